"""`gpuaccept env`: capture the environment (stack, GPUs, lock hash, scheduler ids) as JSON."""

from __future__ import annotations

import typer

from gpuaccept.errors import NotBuiltError


def env(
    as_json: bool = typer.Option(False, "--json", help="Print JSON to stdout."),
) -> None:
    """Capture the environment this process runs in (not built yet: issue #6)."""
    raise NotBuiltError("`gpuaccept env` is not built yet (tracked in issue #6)")
