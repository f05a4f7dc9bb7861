"""Host-device transfer bandwidth; on the CPU twin both ends are host memory."""

from __future__ import annotations

import time
from dataclasses import dataclass
from functools import partial

import torch

from gpuaccept.errors import InputError
from gpuaccept.measure.timing import TimingStats, time_repeats

DIRECTIONS = ("h2d", "d2h")


@dataclass(frozen=True)
class TransferFigure:
    direction: str
    pinned: bool
    nbytes: int
    timing: TimingStats

    @property
    def median_gbps(self) -> float:
        return self.nbytes / self.timing.median_seconds / 1e9


def measure_transfer_gbps(
    device: torch.device, direction: str, nbytes: int, pinned: bool, warmup: int, repeats: int
) -> TransferFigure:
    """Copy `nbytes` host->device or device->host; pinned host memory needs a GPU."""
    if direction not in DIRECTIONS:
        raise InputError(f"transfer direction must be h2d or d2h (got {direction!r})")
    if nbytes < 1:
        raise InputError(f"transfer size must be positive (got {nbytes})")
    pin = pinned and device.type == "cuda"
    host = (
        torch.ones(nbytes, dtype=torch.uint8).pin_memory()
        if pin
        else torch.ones(nbytes, dtype=torch.uint8)
    )
    on_device = torch.empty(nbytes, dtype=torch.uint8, device=device)
    source, target = (host, on_device) if direction == "h2d" else (on_device, host)
    timing = time_repeats(lambda: target.copy_(source, non_blocking=pin), device, warmup, repeats)
    return TransferFigure(direction, pin, nbytes, timing)


@dataclass(frozen=True)
class PeerFigure:
    source: int
    target: int
    peer_access: bool  # P2P (NVLink or PCIe peer) available; without it copies bounce via host
    nbytes: int
    timing: TimingStats

    @property
    def median_gbps(self) -> float:
        return self.nbytes / self.timing.median_seconds / 1e9


def measure_peer_matrix(nbytes: int, warmup: int, repeats: int) -> list[PeerFigure]:
    """Device-to-device copy bandwidth for every ordered pair of visible GPUs (empty below 2)."""
    if nbytes < 1:
        raise InputError(f"transfer size must be positive (got {nbytes})")
    count = torch.cuda.device_count() if torch.cuda.is_available() else 0
    figures = []
    for source in range(count):
        for target in range(count):
            if source == target:
                continue
            a = torch.ones(nbytes, dtype=torch.uint8, device=torch.device("cuda", source))
            b = torch.empty(nbytes, dtype=torch.uint8, device=torch.device("cuda", target))
            timing = time_repeats(partial(b.copy_, a), a.device, warmup, repeats)
            torch.cuda.synchronize(b.device)
            figures.append(
                PeerFigure(
                    source,
                    target,
                    torch.cuda.can_device_access_peer(source, target),
                    nbytes,
                    timing,
                )
            )
    return figures


def measure_host_pair(nbytes: int, warmup: int, repeats: int) -> PeerFigure:
    """The CPU twin of a peer copy: one host buffer into another, as "pair" 0 -> 1."""
    if nbytes < 1:
        raise InputError(f"transfer size must be positive (got {nbytes})")
    a = torch.ones(nbytes, dtype=torch.uint8)
    b = torch.empty(nbytes, dtype=torch.uint8)
    timing = time_repeats(partial(b.copy_, a), a.device, warmup, repeats)
    return PeerFigure(0, 1, False, nbytes, timing)


def keep_copying(device: torch.device, nbytes: int, seconds: float) -> int:
    """Copy host-to-device and back for `seconds`, so that the PCIe link is sampled while it
    carries data (the timed copies can be over in a tenth of a second); the copies made."""
    if device.type != "cuda":
        return 0
    host = torch.ones(nbytes, dtype=torch.uint8).pin_memory()
    on_device = torch.empty(nbytes, dtype=torch.uint8, device=device)
    copies = 0
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        on_device.copy_(host, non_blocking=True)
        host.copy_(on_device, non_blocking=True)
        torch.cuda.synchronize(device)
        copies += 2
    return copies
