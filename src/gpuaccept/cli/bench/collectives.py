"""`gpuaccept bench collectives`: nccl-tests style sweeps on local ranks or under torchrun."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from gpuaccept.cli.bench.common import (
    CSV_OUT,
    DEVICE,
    JSON_OUT,
    check_outputs,
    finish,
    interruptible,
    progress_bar,
    resolve_device,
    show,
    sweep_options,
    sweep_sizes,
)
from gpuaccept.cli.options import finite_number
from gpuaccept.cli.recording import HISTORY, NO_HISTORY, history_path, history_target
from gpuaccept.errors import InputError
from gpuaccept.sweeps.sizes import sweep_text

if TYPE_CHECKING:
    import torch

    from gpuaccept.results import CheckResult


_BEGIN, _END, _FACTOR = sweep_options("collectives")


def collective_names() -> tuple[str, ...]:
    from gpuaccept.measure.collectives import COLLECTIVES

    return COLLECTIVES


def run_collectives(
    device: torch.device,
    ops: list[str],
    begin: str | None,
    end: str | None,
    factor: int | None,
    warmup: int | None,
    iterations: int | None,
    check: bool,
    ranks: int | None,
    min_busbw: float | None,
) -> CheckResult:
    import os

    from gpuaccept.measure.collectives import SweepSpec, collective_sweep_rank
    from gpuaccept.sweeps.collectives import CollectiveRun, collectives_result

    unknown = sorted(set(ops) - set(collective_names()))
    if unknown:
        raise InputError(f"--op {unknown[0]!r}: choose from {', '.join(collective_names())}")
    sizes = sweep_sizes("collectives", device, begin, end, factor)
    w = 5 if warmup is None else warmup
    n = 20 if iterations is None else iterations
    if ranks is not None and ranks < 1:
        raise InputError(f"--ranks must be at least 1 (got {ranks})")
    started = time.monotonic()
    specs = {op: SweepSpec(op, tuple(sizes), w, n, check) for op in ops}
    from gpuaccept.distributed.launch_env import rank_env

    if rank_env(os.environ) is not None:  # torchrun's variables, checked: bad ones exit 2
        from gpuaccept.distributed.torchrun import torchrun_process_group

        with torchrun_process_group(device.type) as (_, rank, world):
            import torch.distributed as dist

            rows = {op: collective_sweep_rank(rank, world, spec) for op, spec in specs.items()}
            backend = str(dist.get_backend())
        if rank != 0:
            raise typer.Exit(0)
    else:
        import torch

        from gpuaccept.distributed.local_ranks import run_ranks

        world = ranks or (torch.cuda.device_count() if device.type == "cuda" else 2)
        backend = "nccl" if device.type == "cuda" else "gloo"
        typer.echo(
            f"[BENCH] collectives {','.join(ops)}: {world} {backend} rank(s), "
            f"{sweep_text(sizes)}, -w {w} -n {n}; times in us, algbw and busbw in GB/s"
        )
        rows = {}
        with progress_bar(len(specs), f"collectives on {world} {backend} rank(s)") as advance:
            for op, spec in specs.items():
                rows[op] = run_ranks(collective_sweep_rank, world, spec, 600.0, backend)[0]
                advance()
    return collectives_result(CollectiveRun(rows, world, backend), min_busbw, started)


def collectives(
    op: list[str] = typer.Option(
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
    device: str = DEVICE,
    json_path: Path | None = JSON_OUT,
    csv_path: Path | None = CSV_OUT,
    history: str | None = HISTORY,
    no_history: bool = NO_HISTORY,
) -> None:
    """nccl-tests style sweeps: time, algbw, busbw and #wrong, out-of-place and in-place."""
    check_outputs(json_path, csv_path, history_path(history, no_history))
    target = history_target(history, no_history)
    started, clock = datetime.now(UTC), time.monotonic()
    run_device = resolve_device(device)
    with interruptible() as session:
        show(
            session.measure(
                "collectives",
                lambda: run_collectives(
                    run_device,
                    op or list(collective_names()),
                    begin,
                    end,
                    factor,
                    warmup,
                    iterations,
                    bool(check),
                    ranks,
                    min_busbw,
                ),
            )
        )
    finish(session, "collectives", run_device, started, clock, json_path, csv_path, target)
