"""`gpuaccept history`: the SQLite record of runs (list, show, compare, trend, import, fleet).

Each subcommand's options are its request's fields; what it does is gpuaccept.commands.history."""

from __future__ import annotations

import typer

from gpuaccept.cli.declared import command_of
from gpuaccept.cli.render import CONSOLE
from gpuaccept.commands.history.compare import CompareRequest
from gpuaccept.commands.history.fleet import FleetRequest
from gpuaccept.commands.history.gpu import GpuRequest
from gpuaccept.commands.history.import_reports import ImportRequest
from gpuaccept.commands.history.list_runs import ListRequest
from gpuaccept.commands.history.push import PushRequest
from gpuaccept.commands.history.show import ShowRequest
from gpuaccept.commands.history.trend import TrendRequest

app = typer.Typer(
    rich_markup_mode=None,
    help="The record of past runs on this node and across a fleet.",
    no_args_is_help=True,
)


@app.command("list")
@command_of(ListRequest)
def list_runs(request: ListRequest) -> None:
    """Recorded runs, newest first."""
    from gpuaccept.commands.history.list_runs import run

    run(request, CONSOLE)


@app.command("gpu")
@command_of(GpuRequest)
def gpu(request: GpuRequest) -> None:
    """One GPU's life, followed by its UUID across hosts: every run it took part in, what each
    recommended for it, and whether it is a repeat offender (3 incidents in 7 days: replace)."""
    from gpuaccept.commands.history.gpu import run

    run(request, CONSOLE)


@app.command("show")
@command_of(ShowRequest)
def show(request: ShowRequest) -> None:
    """One run: its checks and figures (or the whole report with --json)."""
    from gpuaccept.commands.history.show import run

    run(request, CONSOLE)


@app.command("compare")
@command_of(CompareRequest)
def compare(request: CompareRequest) -> None:
    """Every figure of two runs side by side, with the change in percent (B against A)."""
    from gpuaccept.commands.history.compare import run

    run(request, CONSOLE)


@app.command("trend")
@command_of(TrendRequest)
def trend(request: TrendRequest) -> None:
    """A figure over time, oldest first, per node and GPU."""
    from gpuaccept.commands.history.trend import run

    run(request, CONSOLE)


@app.command("import")
@command_of(ImportRequest)
def import_reports(request: ImportRequest) -> None:
    """Add JSON reports to the history: each is checked first, and one malformed or dated after
    now imports none; then they are stored in batches of 500, each one transaction.

    A report already in the history (same content) is not stored twice, so an import stopped
    part-way is finished by running it again.
    """
    from gpuaccept.commands.history.import_reports import run

    run(request, CONSOLE)


@app.command("push")
@command_of(PushRequest)
def push(request: PushRequest) -> None:
    """Deliver the runs the spool kept while their history could not be reached ($GPUACCEPT_SPOOL,
    else ~/.local/share/gpuaccept/spool); each is stored once, whatever was stored before.

    Exit 2 when the history cannot be reached (the spool keeps every run) or a spooled file is
    not a report (it is left in place, and said).
    """
    from gpuaccept.commands.history.push import run

    run(request, CONSOLE)


@app.command("fleet")
@command_of(FleetRequest)
def fleet(request: FleetRequest) -> None:
    """The newest accept run per node, GPUs that lag their fleet, and the mean time between
    incidents of each node and GPU that had one.

    Exit 1 when a node's newest accept did not pass (failed, judged nothing, or was
    interrupted), a GPU lags, or a node is slower than its own history; benchmark and training
    runs are not verdicts on a node.
    """
    from gpuaccept.commands.history.fleet import run

    result = run(request, CONSOLE)
    if result.exit_code:
        raise typer.Exit(result.exit_code)
