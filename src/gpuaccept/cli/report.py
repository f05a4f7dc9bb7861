"""`gpuaccept report`: render a stored run or report file as HTML, Markdown or Prometheus."""

from __future__ import annotations

import typer

from gpuaccept.errors import NotBuiltError


def report(
    source: str = typer.Argument(..., help="A run id from the history, or a REPORT.json file."),
) -> None:
    """Render a run as HTML, Markdown or Prometheus metrics (not built yet: issue #6)."""
    raise NotBuiltError("`gpuaccept report` is not built yet (tracked in issue #6)")
