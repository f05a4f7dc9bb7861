"""`gpuaccept history`: the SQLite record of runs (list, show, compare, trend, import, fleet).

Options and the request each subcommand makes; what it does is gpuaccept.commands.history."""

from __future__ import annotations

from pathlib import Path

import typer

from gpuaccept.cli.options import (
    FLEET_MIN_GPUS,
    FLEET_MTBI_DAYS,
    FLEET_SINCE,
    FLEET_TOLERANCE,
    request_from,
)
from gpuaccept.cli.render import CONSOLE
from gpuaccept.commands.history import fleet as fleet_request

app = typer.Typer(
    rich_markup_mode=None,
    help="The record of past runs on this node and across a fleet.",
    no_args_is_help=True,
)

DATABASE = typer.Option(
    None,
    "--history",
    metavar="FILE|postgresql://...",
    help="History: an SQLite file or a PostgreSQL URI (default: $GPUACCEPT_HISTORY, else "
    "~/.local/share/gpuaccept/history.sqlite).",
)
NODE = typer.Option(None, "--node", metavar="NODE", help="Only this node (its name as recorded).")
AS_JSON = typer.Option(False, "--json", help="Print it as JSON on stdout (for scripts).")
COMMAND = typer.Option(
    None,
    "--command",
    metavar="[accept|bench|train-mnist|burnin]",
    help="Only runs of this command.",
)


@app.command("list")
def list_runs(
    history: str | None = DATABASE,
    node: str | None = NODE,
    command: str | None = COMMAND,
    limit: int = typer.Option(
        20, "--limit", min=1, max=1_000_000, metavar="N", help="Newest runs to show."
    ),
    as_json: bool = AS_JSON,
) -> None:
    """Recorded runs, newest first."""
    from gpuaccept.commands.history.list_runs import ListRequest, run

    request = ListRequest(history=history, node=node, command=command, limit=limit, as_json=as_json)
    run(request, CONSOLE)


@app.command("gpu")
def gpu(
    uuid: str = typer.Argument(..., help="The GPU's UUID (GPU-...), as NVML says."),
    history: str | None = DATABASE,
    limit: int = typer.Option(
        100, "--limit", min=1, max=10_000, metavar="N", help="Newest runs to read."
    ),
    as_json: bool = AS_JSON,
) -> None:
    """One GPU's life, followed by its UUID across hosts: every run it took part in, what each
    recommended for it, and whether it is a repeat offender (3 incidents in 7 days: replace)."""
    from gpuaccept.commands.history.gpu import GpuRequest, run

    run(GpuRequest(uuid=uuid, history=history, limit=limit, as_json=as_json), CONSOLE)


@app.command("show")
def show(
    run: str = typer.Argument(..., help="Run id (see `gpuaccept history list`)."),
    history: str | None = DATABASE,
    as_json: bool = typer.Option(False, "--json", help="Print the stored report as JSON."),
) -> None:
    """One run: its checks and figures (or the whole report with --json)."""
    from gpuaccept.commands.history import show as showing

    showing.run(showing.ShowRequest(run=run, history=history, as_json=as_json), CONSOLE)


@app.command("compare")
def compare(
    run_a: str = typer.Argument(..., help="The earlier (reference) run id."),
    run_b: str = typer.Argument(..., help="The run to compare with it."),
    history: str | None = DATABASE,
    as_json: bool = AS_JSON,
) -> None:
    """Every figure of two runs side by side, with the change in percent (B against A)."""
    from gpuaccept.commands.history.compare import CompareRequest, run

    run(CompareRequest(run_a=run_a, run_b=run_b, history=history, as_json=as_json), CONSOLE)


@app.command("trend")
def trend(
    metric: str = typer.Argument(..., help="A figure's name, or CHECK/NAME (e.g. matmul/..."),
    history: str | None = DATABASE,
    node: str | None = NODE,
    command: str | None = COMMAND,
    level: str | None = typer.Option(
        None,
        "--level",
        metavar="LEVEL",
        help="Only runs of this level (accept: quick, standard, full; bench: the benchmark).",
    ),
    as_json: bool = AS_JSON,
) -> None:
    """A figure over time, oldest first, per node and GPU."""
    from gpuaccept.commands.history.trend import TrendRequest, run

    request = TrendRequest(
        metric=metric, history=history, node=node, command=command, level=level, as_json=as_json
    )
    run(request, CONSOLE)


@app.command("import")
def import_reports(
    reports: list[Path] = typer.Argument(
        ...,
        help="JSON reports (e.g. from HTCondor jobs), or directories of them (their *.json files).",
    ),
    history: str | None = DATABASE,
) -> None:
    """Add JSON reports to the history: each is checked first, and one malformed or dated after
    now imports none; then they are stored in batches of 500, each one transaction.

    A report already in the history (same content) is not stored twice, so an import stopped
    part-way is finished by running it again.
    """
    from gpuaccept.commands.history.import_reports import ImportRequest, run

    run(ImportRequest(reports=reports, history=history), CONSOLE)


@app.command("push")
def push(history: str | None = DATABASE) -> None:
    """Deliver the runs the spool kept while their history could not be reached ($GPUACCEPT_SPOOL,
    else ~/.local/share/gpuaccept/spool); each is stored once, whatever was stored before.

    Exit 2 when the history cannot be reached (the spool keeps every run) or a spooled file is
    not a report (it is left in place, and said).
    """
    from gpuaccept.commands.history.push import PushRequest, run

    run(PushRequest(history=history), CONSOLE)


@app.command("fleet")
def fleet(
    history: str | None = DATABASE,
    tolerance_percent: float = FLEET_TOLERANCE,
    min_gpus: int = FLEET_MIN_GPUS,
    as_json: bool = typer.Option(False, "--json", help="Print the view as JSON."),
    mtbi_days: float = FLEET_MTBI_DAYS,
    since: str | None = FLEET_SINCE,
    page: int = typer.Option(
        1, "--page", min=1, help="The node table's page (attention first: failing nodes lead)."
    ),
    page_size: int = typer.Option(
        fleet_request.PAGE_SIZE, "--page-size", min=1, max=100_000, help="Nodes per page."
    ),
) -> None:
    """The newest accept run per node, GPUs that lag their fleet, and the mean time between
    incidents of each node and GPU that had one.

    Exit 1 when a node's newest accept did not pass (failed, judged nothing, or was
    interrupted), a GPU lags, or a node is slower than its own history; benchmark and training
    runs are not verdicts on a node.
    """
    options = dict(locals())  # first: the options as parsed
    from gpuaccept.commands.history.fleet import FleetJudging, FleetRequest, run

    result = run(request_from(FleetRequest, options, judging=FleetJudging), CONSOLE)
    if result.exit_code:
        raise typer.Exit(result.exit_code)
