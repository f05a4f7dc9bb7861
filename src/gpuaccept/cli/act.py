"""`gpuaccept act slurm`: a run's verdict as a Slurm drain or resume, with guards (issue #31).

The options and the exit; what is checked, decided, done and said is commands.act's.
"""

from __future__ import annotations

import typer

from gpuaccept.cli.declared import command_of
from gpuaccept.cli.render import CONSOLE
from gpuaccept.commands.act import (
    BreakerResetRequest,
    BreakerStatusRequest,
    RegressionClearRequest,
    SlurmRequest,
)

app = typer.Typer(no_args_is_help=True, help="Act on a verdict in the scheduler, with guards.")


@app.command("slurm")
@command_of(SlurmRequest)
def slurm(request: SlurmRequest) -> None:
    """Drain a failing node, resume one gpuaccept drained once it passes, never more.

    A failing node is drained with the reason `gpuaccept LEVEL: ACTION: CHECKS [stack DIGEST]`
    (ACTION: the report's recommended action) unless it is drained already, its failure is soft
    (recommended: rerun) and has not yet repeated --debounce runs in a row, two other nodes on
    the same software stack failed the same checks in the last --breaker-minutes (a regression
    of the stack, not the node), or gpuaccept drained --breaker-share of the nodes in that time
    (the circuit breaker); both refusals exit 4, the node left in service, said on stderr. A
    node is resumed only when gpuaccept drained it (its reason) and the run passed
    --resume-level or above; a drain set by anyone else is never lifted. A run that judged
    nothing changes nothing. Exit: 0 in service or resumed; 1 the node failed; 4 the breaker
    refused the drain.
    """
    from gpuaccept.commands.act import run_slurm

    _exit(run_slurm(request, CONSOLE).exit_code)


def _exit(code: int) -> None:
    """The process's exit, the command's result's (0 returns: typer's own exit)."""
    if code:
        raise typer.Exit(code)


breaker_app = typer.Typer(
    no_args_is_help=True,
    help="The circuit breaker: once tripped it holds until a person resets it.",
)
regression_app = typer.Typer(
    no_args_is_help=True,
    help="Software stacks held as regressed: no node failing alike on them is drained.",
)
app.add_typer(breaker_app, name="breaker")
app.add_typer(regression_app, name="regression")


@breaker_app.command("status")
@command_of(BreakerStatusRequest)
def breaker_status(request: BreakerStatusRequest) -> None:
    """Say whether the breaker is tripped, the stacks held as regressed, and the last changes."""
    from gpuaccept.commands.act import run_breaker_status

    _exit(run_breaker_status(request, CONSOLE).exit_code)


@breaker_app.command("reset")
@command_of(BreakerResetRequest)
def breaker_reset(request: BreakerResetRequest) -> None:
    """Reset a tripped breaker (who and why are recorded); drains may start again."""
    from gpuaccept.commands.act import run_breaker_reset

    _exit(run_breaker_reset(request, CONSOLE).exit_code)


@regression_app.command("clear")
@command_of(RegressionClearRequest)
def regression_clear(request: RegressionClearRequest) -> None:
    """Stop holding a stack as regressed (who and why are recorded)."""
    from gpuaccept.commands.act import run_regression_clear

    _exit(run_regression_clear(request, CONSOLE).exit_code)
