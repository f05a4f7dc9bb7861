"""`gpuaccept bench transfer`: host<->device copies and the GPU-to-GPU matrix."""

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

_BEGIN, _END, _FACTOR = sweep_options("transfer")


def plan_transfer(
    runs: PlannedRuns,
    begin: str | None,
    end: str | None,
    factor: int | None,
    w: int | None,
    r: int | None,
) -> None:
    from gpuaccept.sweeps.transfer import run_transfer

    sizes = sweep_sizes("transfer", runs.device, begin, end, factor)
    warmup, repeats = iterations_for(runs.device, w, r)
    runs.add(
        len(sizes) * (4 if runs.device.type == "cuda" else 2),
        f"transfer: h2d/d2h, pinned and pageable, {sweep_text(sizes)}",
        lambda advance: run_transfer(runs.device, sizes, warmup, repeats, advance),
    )


def transfer(
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
    """Host<->device copies (pinned and pageable) and a GPU-to-GPU matrix when there are several."""
    run_planned(
        "transfer",
        device,
        json_path,
        csv_path,
        history,
        no_history,
        lambda runs: plan_transfer(runs, begin, end, factor, warmup, iterations),
    )
