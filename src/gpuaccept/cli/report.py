"""`gpuaccept report`: render a stored run or a report file as HTML, Markdown or Prometheus.

The options and the request; the rendering and writing is gpuaccept.commands.report."""

from __future__ import annotations

from pathlib import Path

import typer

from gpuaccept.cli.options import (
    FLEET_MIN_GPUS,
    FLEET_MTBI_DAYS,
    FLEET_SINCE,
    FLEET_TOLERANCE,
    request_from,
)
from gpuaccept.cli.render import CONSOLE


def report(
    source: str | None = typer.Argument(
        None, help="A run id from the history, or a REPORT.json file (not with --fleet)."
    ),
    html: Path | None = typer.Option(None, "--html", help="Write a self-contained HTML page."),
    markdown: Path | None = typer.Option(
        None, "--markdown", help="Write a Markdown summary ('-' for stdout, e.g. CI summaries)."
    ),
    prometheus: Path | None = typer.Option(
        None, "--prometheus", help="Write node_exporter textfile metrics (a .prom file)."
    ),
    history: str | None = typer.Option(
        None,
        "--history",
        help="History for run ids and trend charts: an SQLite file or a postgresql:// URI.",
    ),
    fleet: bool = typer.Option(
        False,
        "--fleet",
        help="The whole fleet from the history: its page (--html: what to act on first, what "
        "changed, the stacks, each GPU model's figures, the laggards, MTBI) and/or its MTBI as "
        "textfile metrics (--prometheus).",
    ),
    tolerance_percent: float = FLEET_TOLERANCE,
    min_gpus: int = FLEET_MIN_GPUS,
    mtbi_days: float = FLEET_MTBI_DAYS,
    since: str | None = FLEET_SINCE,
) -> None:
    """Render a run as HTML (with trend charts), Markdown or Prometheus metrics; with no output
    named, the Markdown summary on stdout. With --fleet, the fleet's page."""
    options = dict(locals())  # first: the options as parsed
    from gpuaccept.commands.history.fleet import FleetJudging
    from gpuaccept.commands.report import ReportRequest, run

    request = request_from(ReportRequest, options, judging=FleetJudging)
    result = run(request, CONSOLE)
    if result.exit_code:
        raise typer.Exit(result.exit_code)
