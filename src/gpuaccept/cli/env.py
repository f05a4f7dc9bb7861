"""`gpuaccept env`: capture the environment (stack, GPUs, lock hash, image, scheduler ids);
gpuaccept.commands.env does it."""

from __future__ import annotations

from pathlib import Path

import typer

from gpuaccept.cli.render import CONSOLE


def env(
    as_json: bool = typer.Option(False, "--json", help="Print the capture as JSON to stdout."),
    output: Path | None = typer.Option(
        None, "--output", "-o", help="Write the capture as JSON to this file."
    ),
) -> None:
    """Capture the environment this process runs in: stack, GPUs, lock, image, scheduler ids.

    The same capture is embedded in every report. Unknown values are null.
    """
    from gpuaccept.commands.env import EnvRequest, run

    result = run(EnvRequest(as_json=as_json, output=output), CONSOLE)
    if result.exit_code:
        raise typer.Exit(result.exit_code)
