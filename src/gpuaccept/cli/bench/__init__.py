"""`gpuaccept bench`: full benchmark sweeps (matmul, membw, transfer, collectives, nbody), one
module per command; `gpuaccept bench` alone runs each with its default sweep."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from pathlib import Path

import typer

from gpuaccept.cli.bench import collectives, matmul, membw, nbody, transfer
from gpuaccept.cli.bench.common import (
    CSV_OUT,
    DEVICE,
    JSON_OUT,
    PlannedRuns,
    check_outputs,
    finish,
    interruptible,
    refuse_torchrun,
    resolve_device,
    show,
)
from gpuaccept.cli.recording import HISTORY, NO_HISTORY, history_path, history_target

app = typer.Typer(
    rich_markup_mode=None,
    help="Benchmarks that read like nccl-tests, mamf-finder, STREAM and cuda-samples nbody.",
    invoke_without_command=True,
)


@app.callback()
def bench(
    ctx: typer.Context,
    device: str = DEVICE,
    json_path: Path | None = JSON_OUT,
    csv_path: Path | None = CSV_OUT,
    history: str | None = HISTORY,
    no_history: bool = NO_HISTORY,
) -> None:
    """Run every benchmark with its default sweep (or name one: see the commands below)."""
    if ctx.invoked_subcommand is not None:
        return
    refuse_torchrun("")
    check_outputs(json_path, csv_path, history_path(history, no_history))
    target = history_target(history, no_history)
    started, clock = datetime.now(UTC), time.monotonic()
    runs = PlannedRuns(resolve_device(device))
    matmul.plan_matmul(
        runs, [matmul.default_matmul_dtype(runs.device)], None, None, None, "quick", None, None
    )
    membw.plan_membw(runs, None, None, None, None, None)
    transfer.plan_transfer(runs, None, None, None, None, None)
    with interruptible() as session:
        runs.run(session)
        show(
            session.measure(
                "collectives",
                lambda: collectives.run_collectives(
                    runs.device,
                    list(collectives.collective_names()),
                    None,
                    None,
                    None,
                    None,
                    None,
                    True,
                    None,
                    None,
                ),
            )
        )
        nbody_runs = PlannedRuns(runs.device)
        nbody.plan_nbody(nbody_runs, ["fp32"], None, None, None, None)
        nbody_runs.run(session)
    finish(session, "all", runs.device, started, clock, json_path, csv_path, target)


app.command("matmul")(matmul.matmul)
app.command("membw")(membw.membw)
app.command("transfer")(transfer.transfer)
app.command("nbody")(nbody.nbody)
app.command("collectives")(collectives.collectives)
