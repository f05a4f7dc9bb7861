"""Host-device transfer bandwidth; on the CPU twin both ends are host memory."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from gpuaccept.errors import InputError
from gpuaccept.timing import TimingStats, time_repeats

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
