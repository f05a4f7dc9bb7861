"""`gpuaccept env`: capture the environment (stack, GPUs, lock hash, image, scheduler ids);
gpuaccept.commands.env does it."""

from __future__ import annotations

import typer

from gpuaccept.cli.declared import command_of
from gpuaccept.cli.render import CONSOLE
from gpuaccept.commands.env import EnvRequest


@command_of(EnvRequest)
def env(request: EnvRequest) -> None:
    """Capture the environment this process runs in: stack, GPUs, lock, image, scheduler ids.

    The same capture is embedded in every report. Unknown values are null.
    """
    from gpuaccept.commands.env import run

    result = run(request, CONSOLE)
    if result.exit_code:
        raise typer.Exit(result.exit_code)
