"""`gpuaccept act slurm`: a run's verdict as a Slurm drain or resume, with guards (issue #31).

The options and the exit; what is checked, decided, done and said is commands.act's.
"""

from __future__ import annotations

from pathlib import Path

import typer

from gpuaccept.cli.options import (
    ACT_PROMETHEUS,
    ACT_RECORD,
    ACT_STATE,
    BREAKER_MINUTES,
    BREAKER_PARTITION,
    BREAKER_SHARE,
    DEBOUNCE,
    DEBOUNCE_HOURS,
    INSPECT_AFTER,
    REPLACE_AFTER,
    REPLACE_DAYS,
    RESUME_LEVEL,
    request_from,
)
from gpuaccept.cli.render import CONSOLE

app = typer.Typer(no_args_is_help=True, help="Act on a verdict in the scheduler, with guards.")


@app.command("slurm")
def slurm(
    report: Path = typer.Argument(..., help="The node's `gpuaccept accept` JSON report."),
    node: str | None = typer.Option(
        None, "--node", metavar="NAME", help="Slurm's name for the node (default: the report's)."
    ),
    act: str = typer.Option(
        "enforce",
        "--act",
        metavar="MODE",
        help="report: say the verdict, ask Slurm nothing, change nothing; shadow: decide "
        "against Slurm's state and say what it would do, change nothing; enforce: drain or "
        "resume.",
    ),
    partition: str | None = BREAKER_PARTITION,
    resume_level: str = RESUME_LEVEL,
    breaker_share: float = BREAKER_SHARE,
    breaker_minutes: float = BREAKER_MINUTES,
    debounce: int = DEBOUNCE,
    debounce_hours: float = DEBOUNCE_HOURS,
    earlier: Path | None = typer.Option(
        None,
        "--earlier",
        metavar="DIR",
        help="Where the node's earlier accept reports are (default: the report's directory; "
        "the newest 192 files are read).",
    ),
    replace_after: int = REPLACE_AFTER,
    replace_days: float = REPLACE_DAYS,
    inspect_after: int = INSPECT_AFTER,
    state: Path | None = ACT_STATE,
    record: Path | None = ACT_RECORD,
    prometheus: Path | None = ACT_PROMETHEUS,
) -> None:
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
    options = dict(locals())  # first: the options as parsed
    from gpuaccept.commands.act import Guarding, SlurmRequest, run_slurm

    request = request_from(SlurmRequest, options, guarding=Guarding)
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

BY = typer.Option(..., "--by", metavar="NAME", help="Who does it (recorded).")
WHY = typer.Option(..., "--why", metavar="TEXT", help="Why (recorded).")


@breaker_app.command("status")
def breaker_status(state: Path | None = ACT_STATE) -> None:
    """Say whether the breaker is tripped, the stacks held as regressed, and the last changes."""
    from gpuaccept.commands.act import BreakerStatusRequest, run_breaker_status

    _exit(run_breaker_status(BreakerStatusRequest(state), CONSOLE).exit_code)


@breaker_app.command("reset")
def breaker_reset(by: str = BY, why: str = WHY, state: Path | None = ACT_STATE) -> None:
    """Reset a tripped breaker (who and why are recorded); drains may start again."""
    from gpuaccept.commands.act import BreakerResetRequest, run_breaker_reset

    _exit(run_breaker_reset(BreakerResetRequest(by, why, state), CONSOLE).exit_code)


@regression_app.command("clear")
def regression_clear(
    stack: str = typer.Argument(..., metavar="STACK", help="The stack's 8-digit digest."),
    by: str = BY,
    why: str = WHY,
    state: Path | None = ACT_STATE,
) -> None:
    """Stop holding a stack as regressed (who and why are recorded)."""
    from gpuaccept.commands.act import RegressionClearRequest, run_regression_clear

    _exit(run_regression_clear(RegressionClearRequest(stack, by, why, state), CONSOLE).exit_code)
