"""`gpuaccept history`: the SQLite record of runs (list, show, compare, trend, import, fleet)."""

from __future__ import annotations

import typer

from gpuaccept.errors import NotBuiltError

app = typer.Typer(help="The record of past runs on this node and across a fleet.")


@app.callback(invoke_without_command=True)
def history(ctx: typer.Context) -> None:
    """Query the run history (not built yet: issue #6)."""
    raise NotBuiltError("`gpuaccept history` is not built yet (tracked in issue #6)")
