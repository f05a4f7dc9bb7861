"""`gpuaccept bench transfer` as a library call: host<->device copies and the GPU-to-GPU
matrix."""

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


_BEGIN, _END, _FACTOR = sweep_opts("transfer")


@dataclass(frozen=True, kw_only=True)
class TransferRequest(SizeSweepRequest):
    """Copies of each size: host to device and back, pinned and pageable."""

    begin: Annotated[str | None, _BEGIN] = None
    end: Annotated[str | None, _END] = None
    factor: Annotated[int | None, _FACTOR] = None
    warmup: Annotated[int | None, WARMUP] = None
    iterations: Annotated[int | None, ITERATIONS] = None


def plan_transfer(runs: PlannedRuns, request: SizeSweepRequest) -> None:
    from gpuaccept.sweeps.sizes import sweep_text
    from gpuaccept.sweeps.transfer import run_transfer

    sizes = sweep_sizes("transfer", runs.device, request.begin, request.end, request.factor)
    warmup, repeats = iterations_for(runs.device, request.warmup, request.iterations)
    runs.add(
        len(sizes) * (4 if runs.device.type == "cuda" else 2),
        f"transfer: h2d/d2h, pinned and pageable, {sweep_text(sizes)}",
        lambda advance: run_transfer(runs.device, sizes, warmup, repeats, advance),
    )


def run(request: TransferRequest, out: Output, progress: ProgressBar = no_progress) -> BenchResult:
    """Host<->device copies (pinned and pageable) and a GPU-to-GPU matrix when there are
    several."""
    return run_planned(
        "transfer", request, out, progress, lambda runs: plan_transfer(runs, request)
    )
