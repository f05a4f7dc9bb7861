"""`gpuaccept report`: render a stored run or a report file as HTML, Markdown or Prometheus.

The options are the request's fields; the rendering and writing is gpuaccept.commands.report."""

from __future__ import annotations

import typer

from gpuaccept.cli.declared import command_of
from gpuaccept.cli.render import CONSOLE
from gpuaccept.commands.report import ReportRequest


@command_of(ReportRequest)
def report(request: ReportRequest) -> None:
    """Render a run as HTML (with trend charts), Markdown or Prometheus metrics; with no output
    named, the Markdown summary on stdout. With --fleet, the fleet's page."""
    from gpuaccept.commands.report import run

    result = run(request, CONSOLE)
    if result.exit_code:
        raise typer.Exit(result.exit_code)
