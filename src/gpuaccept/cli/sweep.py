"""`gpuaccept sweep`: the options and the exit; the round is commands.sweep's."""

from __future__ import annotations

import typer

from gpuaccept.cli.declared import command_of
from gpuaccept.cli.render import CONSOLE
from gpuaccept.commands.sweep import SweepRequest


@command_of(SweepRequest)
def sweep(request: SweepRequest) -> None:
    """One round of capped checks on idle nodes (docs/preflight-and-sweep.md): each idle node not
    tested within --cadence-hours gets a low-priority, exclusive accept job, the most overdue
    first, never more than --max-nodes (and --max-per-pool) under test at once; busy nodes,
    nodes drained or down, and nodes under test are skipped. Run it from a timer. Exit 0."""
    from gpuaccept.commands.sweep import run

    result = run(request, CONSOLE)
    if result.exit_code:
        raise typer.Exit(result.exit_code)
