"""`gpuaccept preflight`: the options and the exit; the run is commands.preflight's."""

from __future__ import annotations

import typer

from gpuaccept.cli.declared import command_of
from gpuaccept.cli.render import CONSOLE
from gpuaccept.cli.signals import interrupts_as_exceptions
from gpuaccept.commands.preflight import PreflightRequest


@command_of(PreflightRequest)
def preflight(request: PreflightRequest) -> None:
    """A verdict in seconds before a job starts: the quick level within --budget, for a Slurm
    Prolog or a Kubernetes init container (docs/preflight-and-sweep.md). A failing node is acted
    on as `act slurm` does (--act enforce); with --job its job is requeued, not held. Exit: 0
    the job may start (passed, or not judged: checks the budget cut are named), or with --job it
    was requeued; 1 not fit (this node or, with --gang, the set); 4 the guard refused the drain.
    """
    from gpuaccept.commands.preflight import run

    with interrupts_as_exceptions():
        result = run(request, CONSOLE)
    if result.exit_code:
        raise typer.Exit(result.exit_code)
