"""`gpuaccept bench membw`: STREAM kernels on device memory."""

from __future__ import annotations

from pathlib import Path

from gpuaccept.cli.bench.common import (
    CSV_OUT,
    DEVICE,
    ITERATIONS,
    JSON_OUT,
    WARMUP,
    PlannedRuns,
    iterations_for,
    run_planned,
    sweep_options,
    sweep_sizes,
)
from gpuaccept.cli.recording import HISTORY, NO_HISTORY
from gpuaccept.sweeps.sizes import sweep_text

_BEGIN, _END, _FACTOR = sweep_options("membw")


def plan_membw(
    runs: PlannedRuns,
    begin: str | None,
    end: str | None,
    factor: int | None,
    w: int | None,
    r: int | None,
) -> None:
    from gpuaccept.sweeps.membw import run_membw

    sizes = sweep_sizes("membw", runs.device, begin, end, factor)
    warmup, repeats = iterations_for(runs.device, w, r)
    runs.add(
        len(sizes) * 4,
        f"membw: STREAM copy/scale/add/triad, arrays of {sweep_text(sizes)}",
        lambda advance: run_membw(runs.device, sizes, warmup, repeats, advance),
    )


def membw(
    begin: str | None = _BEGIN,
    end: str | None = _END,
    factor: int | None = _FACTOR,
    warmup: int | None = WARMUP,
    iterations: int | None = ITERATIONS,
    device: str = DEVICE,
    json_path: Path | None = JSON_OUT,
    csv_path: Path | None = CSV_OUT,
    history: str | None = HISTORY,
    no_history: bool = NO_HISTORY,
) -> None:
    """STREAM copy, scale, add and triad on device memory (GB/s = 10^9 B/s)."""
    run_planned(
        "membw",
        device,
        json_path,
        csv_path,
        history,
        no_history,
        lambda runs: plan_membw(runs, begin, end, factor, warmup, iterations),
    )
