"""`gpuaccept bench membw` as a library call: STREAM kernels on device memory."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated

from gpuaccept.commands.bench.common import (
    ITERATIONS,
    WARMUP,
    BenchResult,
    PlannedRuns,
    ProgressBar,
    SizeSweepRequest,
    iterations_for,
    no_progress,
    run_planned,
    sweep_opts,
    sweep_sizes,
)

if TYPE_CHECKING:
    from gpuaccept.commands.output import Output


_BEGIN, _END, _FACTOR = sweep_opts("membw")


@dataclass(frozen=True, kw_only=True)
class MembwRequest(SizeSweepRequest):
    """STREAM copy, scale, add and triad over arrays of each size."""

    begin: Annotated[str | None, _BEGIN] = None
    end: Annotated[str | None, _END] = None
    factor: Annotated[int | None, _FACTOR] = None
    warmup: Annotated[int | None, WARMUP] = None
    iterations: Annotated[int | None, ITERATIONS] = None


def plan_membw(runs: PlannedRuns, request: SizeSweepRequest) -> None:
    from gpuaccept.sweeps.membw import run_membw
    from gpuaccept.sweeps.sizes import sweep_text

    sizes = sweep_sizes("membw", runs.device, request.begin, request.end, request.factor)
    warmup, repeats = iterations_for(runs.device, request.warmup, request.iterations)
    runs.add(
        len(sizes) * 4,
        f"membw: STREAM copy/scale/add/triad, arrays of {sweep_text(sizes)}",
        lambda advance: run_membw(runs.device, sizes, warmup, repeats, advance),
    )


def run(request: MembwRequest, out: Output, progress: ProgressBar = no_progress) -> BenchResult:
    """STREAM copy, scale, add and triad on device memory (GB/s = 10^9 B/s)."""
    return run_planned("membw", request, out, progress, lambda runs: plan_membw(runs, request))
