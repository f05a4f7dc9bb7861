"""`gpuaccept report`: render a stored run or a report file as HTML, Markdown or Prometheus."""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from gpuaccept.cli.history import FLEET_MIN_GPUS, FLEET_MTBI_DAYS, FLEET_TOLERANCE
from gpuaccept.errors import InputError

if TYPE_CHECKING:
    from gpuaccept.results import RunReport
    from gpuaccept.store.history import HistoryLocation, MetricPoint


def _trends(
    report: RunReport, run_id: int | None, history: str | None
) -> dict[str, list[MetricPoint]]:
    """This node's stored points for each figure of the report, from runs of the same command and
    level only (like with like); the report's own points when it is not stored."""
    from gpuaccept.record.identity import node_name_of
    from gpuaccept.store.history import History, history_location, report_points

    own = report_points(report, run_id or 0)
    trends: dict[str, list[MetricPoint]] = {point.metric: [] for point in own}
    location = history_location(history)
    if not isinstance(location, Path) or location.is_file():
        with History.open(location, create=False) as store:
            for metric in trends:
                trends[metric] = store.points(
                    metric, node=node_name_of(report), command=report.command, level=report.level
                )
    for point in own:
        if run_id is None or not any(p.run_id == run_id for p in trends[point.metric]):
            trends[point.metric].append(point)
    for points in trends.values():
        points.sort(key=lambda p: (p.started_at, p.run_id))
    return trends


def _check_output(path: Path | None, flag: str) -> None:
    from gpuaccept.output_files import check_output_file

    if path is not None and str(path) != "-":
        check_output_file(path, flag)


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
        help="The whole fleet from the history on one page (with --html): every node's newest "
        "accept, each GPU model's figures, the laggards, drains, SDC, MTBI.",
    ),
    tolerance: float = FLEET_TOLERANCE,
    min_gpus: int = FLEET_MIN_GPUS,
    mtbi_days: float = FLEET_MTBI_DAYS,
) -> None:
    """Render a run as HTML (with trend charts), Markdown or Prometheus metrics; with no output
    named, the Markdown summary on stdout. With --fleet, the fleet's page."""
    from gpuaccept.output_files import write_text_atomically
    from gpuaccept.report.reading import load_report
    from gpuaccept.store.history import History, history_location, local_file

    location = history_location(history)
    if fleet:
        _fleet_page(source, html, markdown, prometheus, location, (tolerance, min_gpus, mtbi_days))
        return
    defaults = (FLEET_TOLERANCE.default, FLEET_MIN_GPUS.default, FLEET_MTBI_DAYS.default)
    if (tolerance, min_gpus, mtbi_days) != defaults:
        raise InputError("--tolerance, --min-gpus and --mtbi-days judge the fleet: give --fleet")
    if source is None:
        raise InputError("name a run id or a REPORT.json file (or --fleet --html PAGE)")
    if html is None and markdown is None and prometheus is None:
        markdown = Path("-")  # no file named: the summary on stdout, as `history show` prints
    for path, flag in ((html, "--html"), (markdown, "--markdown"), (prometheus, "--prometheus")):
        _check_output(path, flag)
    from gpuaccept.output_files import refuse_collisions

    refuse_collisions(
        {"--html": html, "--markdown": markdown, "--prometheus": prometheus},
        {"--history": local_file(location), "SOURCE": Path(source)},
    )
    path = Path(source)
    run_id: int | None = None
    if path.exists() or not re.fullmatch(r"[0-9]{1,18}", source):
        run = load_report(path)
    else:
        run_id = int(source)
        with History.open(location, create=False) as store:
            run = store.report(run_id)

    # Render everything first, so a failure leaves no output half-written.
    outputs: list[tuple[Path, str]] = []
    if html is not None:
        from gpuaccept.report.html import render_html

        outputs.append((html, render_html(run, _trends(run, run_id, history))))
    if prometheus is not None:
        from gpuaccept.report.prometheus import render_prometheus

        outputs.append((prometheus, render_prometheus(run)))
    if markdown is not None:
        from gpuaccept.report.markdown import render_markdown

        text = render_markdown(run)
        if str(markdown) == "-":
            typer.echo(text, nl=False)
        else:
            outputs.append((markdown, text))
    for target, text in outputs:
        try:
            write_text_atomically(target, text)
        except OSError as error:
            raise InputError(f"{target}: cannot write: {error.strerror}") from None
        typer.echo(f"[REPORT] {target}", err=str(markdown) == "-")


def _fleet_page(
    source: str | None,
    html: Path | None,
    markdown: Path | None,
    prometheus: Path | None,
    location: HistoryLocation,
    judging: tuple[float, int, float],
) -> None:
    from datetime import UTC, datetime

    from gpuaccept.compare.fleet import fleet_state
    from gpuaccept.output_files import refuse_collisions, write_text_atomically
    from gpuaccept.report.fleet_html import render_fleet_html
    from gpuaccept.store.history import History, local_file

    if source is not None:
        raise InputError(f"--fleet shows the whole fleet: name no run ({source!r})")
    if html is None or markdown is not None or prometheus is not None:
        raise InputError("--fleet writes one page: give --html PAGE (and no other output)")
    _check_output(html, "--html")
    refuse_collisions({"--html": html}, {"--history": local_file(location)})
    with History.open(location, create=False) as store:
        tolerance, min_gpus, mtbi_days = judging
        state = fleet_state(
            store,
            tolerance_percent=tolerance,
            min_samples=min_gpus,
            mtbi_days=mtbi_days,
            every_figure=True,
        )
    page = render_fleet_html(
        state, source=str(location), generated_at=datetime.now(UTC).isoformat()[:19]
    )
    try:
        write_text_atomically(html, page)
    except OSError as error:
        raise InputError(f"{html}: cannot write: {error.strerror}") from None
    typer.echo(f"[REPORT] {html}")
