"""All-reduce with an exact correctness check and nccl-tests bus bandwidth.

Runs inside an initialised process group (see gpuaccept.launch). Inputs are small integers, so
any summation order gives the same exact float32 sum; each checked iteration starts from fresh
inputs, so an error cannot be hidden or compounded by the previous result.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.distributed as dist

from gpuaccept.timing import time_repeats

# nccl-tests bus-bandwidth factors: busbw = algbw x factor(n).
BUS_FACTORS: dict[str, Callable[[int], float]] = {
    "all_reduce": lambda n: 2.0 * (n - 1) / n,
    "all_gather": lambda n: (n - 1) / n,
    "reduce_scatter": lambda n: (n - 1) / n,
    "broadcast": lambda n: 1.0,
}
_PATTERN_PERIOD = 61


@dataclass(frozen=True)
class AllReduceSpec:
    nbytes: int
    check_iterations: int
    warmup: int
    repeats: int


@dataclass(frozen=True)
class AllReduceFigure:
    world_size: int
    nbytes: int
    wrong_elements: int
    seconds: float  # slowest rank's median time per all-reduce

    @property
    def algbw_gbps(self) -> float:
        return self.nbytes / self.seconds / 1e9

    @property
    def busbw_gbps(self) -> float:
        return self.algbw_gbps * BUS_FACTORS["all_reduce"](self.world_size)


def rank_device(rank: int) -> torch.device:
    """The device a rank works on: its own GPU under NCCL, the CPU under gloo."""
    if dist.get_backend() == "nccl":
        return torch.device("cuda", rank)
    return torch.device("cpu")


def _pattern(numel: int, rank: int, device: torch.device) -> torch.Tensor:
    return (torch.arange(numel, device=device) % _PATTERN_PERIOD + rank + 1).to(torch.float32)


def expected_all_reduce_sum(numel: int, world_size: int, device: torch.device) -> torch.Tensor:
    base = (torch.arange(numel, device=device) % _PATTERN_PERIOD).to(torch.float32)
    return base * world_size + world_size * (world_size + 1) / 2


def all_reduce_rank(rank: int, world_size: int, spec: AllReduceSpec) -> AllReduceFigure:
    """Rank body: check exactness, then time all-reduce on a zero buffer (nothing to overflow)."""
    device = rank_device(rank)
    numel = max(1, spec.nbytes // 4)
    expected = expected_all_reduce_sum(numel, world_size, device)
    wrong = 0
    for _ in range(spec.check_iterations):
        data = _pattern(numel, rank, device)
        dist.all_reduce(data)
        wrong += int((data != expected).sum())
    buffer = torch.zeros(numel, device=device)
    timing = time_repeats(lambda: dist.all_reduce(buffer), device, spec.warmup, spec.repeats)
    slowest = torch.tensor([timing.median_seconds], dtype=torch.float64, device=device)
    dist.all_reduce(slowest, op=dist.ReduceOp.MAX)
    wrong_total = torch.tensor([wrong], dtype=torch.int64, device=device)
    dist.all_reduce(wrong_total)
    return AllReduceFigure(world_size, numel * 4, int(wrong_total.item()), float(slowest.item()))
