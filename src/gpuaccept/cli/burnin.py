"""`gpuaccept burnin`: hours of load on every GPU of the node, judged window by window.

The options and their help; the burn-in itself is `gpuaccept.commands.burnin`."""

from __future__ import annotations

import typer

from gpuaccept.cli.declared import command_of
from gpuaccept.commands.burnin.request import BurnInRequest


@command_of(BurnInRequest)
def burnin(request: BurnInRequest) -> None:
    """Keep every GPU of the node busy for --duration with a rotation of stressors, and judge
    each window: wrong bits, hard events, lost GPUs, stragglers, drift.

    Exit 0: passed (warnings allowed); 1: a window failed; 2: bad input; 3: environment error;
    130/143: interrupted (the report says so; the checkpoint keeps the finished windows).
    """
    from gpuaccept.cli.render import BURNIN_CONSOLE
    from gpuaccept.cli.signals import interrupts_as_exceptions
    from gpuaccept.commands.burnin import run

    # planned before SIGINT/SIGTERM become Interrupted, as burnin always was
    result = run(request, BURNIN_CONSOLE, signals=interrupts_as_exceptions)
    if result.exit_code:
        raise typer.Exit(result.exit_code)
