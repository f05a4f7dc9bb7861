"""One timer for every measurement: CUDA events on a GPU, perf_counter on the CPU.

The harness owns warm-up, repeats and statistics; a kernel supplies only the work (and an
optional untimed step before each repeat, such as flushing L2), as nccl-tests does.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch


@dataclass(frozen=True)
class TimingStats:
    samples_seconds: tuple[float, ...]

    @property
    def median_seconds(self) -> float:
        return statistics.median(self.samples_seconds)

    @property
    def best_seconds(self) -> float:
        return min(self.samples_seconds)

    @property
    def mean_seconds(self) -> float:
        return statistics.fmean(self.samples_seconds)


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        import torch

        torch.cuda.synchronize(device)


def time_repeats(
    work: Callable[[], object],
    device: torch.device,
    warmup: int,
    repeats: int,
    before_each: Callable[[], object] | None = None,
) -> TimingStats:
    """Run `work` warmup + repeats times; time each repeat on the device's own clock."""
    if repeats < 1 or warmup < 0:
        raise ValueError(f"repeats must be >= 1 and warmup >= 0 (got {repeats}, {warmup})")
    for _ in range(warmup):
        if before_each is not None:
            before_each()
        work()
    synchronize(device)
    if device.type == "cuda":
        return _time_with_cuda_events(work, device, repeats, before_each)
    samples = []
    for _ in range(repeats):
        if before_each is not None:
            before_each()
        start = time.perf_counter()
        work()
        samples.append(time.perf_counter() - start)
    return TimingStats(tuple(samples))


def _time_with_cuda_events(
    work: Callable[[], object],
    device: torch.device,
    repeats: int,
    before_each: Callable[[], object] | None,
) -> TimingStats:
    import torch

    with torch.cuda.device(device):
        starts = [torch.cuda.Event(enable_timing=True) for _ in range(repeats)]
        ends = [torch.cuda.Event(enable_timing=True) for _ in range(repeats)]
        for start, end in zip(starts, ends, strict=True):
            if before_each is not None:
                before_each()
            start.record()
            work()
            end.record()
        torch.cuda.synchronize(device)
    return TimingStats(tuple(s.elapsed_time(e) / 1000.0 for s, e in zip(starts, ends, strict=True)))
