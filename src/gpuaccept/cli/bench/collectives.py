"""`gpuaccept bench collectives`: nccl-tests style sweeps on local ranks or under torchrun
(gpuaccept.commands.bench.collectives)."""

from __future__ import annotations

from pathlib import Path

import typer

from gpuaccept.cli.bench.common import (
    CSV_OUT,
    DEVICE,
    JSON_OUT,
    run_and_exit,
    sweep_options,
)
from gpuaccept.cli.options import HISTORY, NO_HISTORY, DeviceChoice, finite_number, request_from
from gpuaccept.commands.bench import collectives as command

_BEGIN, _END, _FACTOR = sweep_options("collectives")


def collectives(
    ops: list[str] = typer.Option(
        [],
        "--op",
        metavar="[all_reduce|all_gather|reduce_scatter|broadcast]",
        help="The collective to run (repeatable; default all four).",
    ),
    begin: str | None = _BEGIN,
    end: str | None = _END,
    factor: int | None = _FACTOR,
    warmup: int | None = typer.Option(None, "-w", "--warmup", min=0, help="Warm-up iterations."),
    iterations: int | None = typer.Option(
        None, "-n", "--iterations", min=1, help="Timed iterations per size."
    ),
    check: int = typer.Option(
        1, "-c", "--check", min=0, max=1, help="1: check results exactly (#wrong); 0: skip."
    ),
    ranks: int | None = typer.Option(
        None,
        "--ranks",
        help="Local ranks to start (default: every GPU; 2 on CPU). Under "
        "torchrun the launcher's ranks are used.",
    ),
    min_busbw: float | None = typer.Option(
        None,
        "--min-busbw",
        min=0,
        metavar="GBPS",
        callback=finite_number,
        help="Fail when the average busbw (GB/s) over the whole size sweep is below 0.9 x "
        "this, as NCCL_TESTS_MIN_BW does (accept --min-busbw judges its one size).",
    ),
    device: DeviceChoice = DEVICE,
    json_path: Path | None = JSON_OUT,
    csv_path: Path | None = CSV_OUT,
    history: str | None = HISTORY,
    no_history: bool = NO_HISTORY,
) -> None:
    """nccl-tests style sweeps: time, algbw, busbw and #wrong, out-of-place and in-place."""
    options = dict(locals())  # first: the options as parsed
    request = request_from(command.CollectivesRequest, {**options, "check": bool(check)})
    run_and_exit(command.run, request)
