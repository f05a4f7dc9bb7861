"""`gpuaccept report`: a stored run or a report file rendered as HTML (with this node's trend
charts), Markdown or Prometheus textfile metrics; or, with --fleet, the fleet's page."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

from gpuaccept.commands.history.fleet import SINCE, FleetJudging
from gpuaccept.commands.options import arg, check_bounds, opt
from gpuaccept.errors import InputError

if TYPE_CHECKING:
    from gpuaccept.commands.output import Output
    from gpuaccept.results import RunReport
    from gpuaccept.store.history import HistoryLocation, MetricPoint

STDOUT = Path("-")  # --markdown -: the summary on stdout (e.g. a CI job's summary)


_HISTORY = "History for run ids and trend charts: an SQLite file or a postgresql:// URI."
_FLEET = (
    "The whole fleet from the history: its page (--html: what to act on first, what changed, "
    "the stacks, each GPU model's figures, the laggards, MTBI) and/or its MTBI as textfile "
    "metrics (--prometheus)."
)


@dataclass(frozen=True, kw_only=True)
class ReportRequest:
    # a run id from the history, or a REPORT.json file; None with fleet
    source: Annotated[
        str | None, arg("A run id from the history, or a REPORT.json file (not with --fleet).")
    ] = None
    html: Annotated[Path | None, opt("--html", text="Write a self-contained HTML page.")] = None
    # STDOUT for stdout
    markdown: Annotated[
        Path | None,
        opt("--markdown", text="Write a Markdown summary ('-' for stdout, e.g. CI summaries)."),
    ] = None
    prometheus: Annotated[
        Path | None,
        opt("--prometheus", text="Write node_exporter textfile metrics (a .prom file)."),
    ] = None
    # for run ids, trend charts and the fleet: a file or a URI
    history: Annotated[str | None, opt("--history", text=_HISTORY)] = None
    # the whole fleet: its page (html) and/or its MTBI metrics (prometheus)
    fleet: Annotated[bool, opt("--fleet", text=_FLEET)] = False
    judging: FleetJudging = field(default_factory=FleetJudging)  # the fleet page's judgement
    # the fleet page's "changed since" (history fleet's --since)
    since: Annotated[str | None, SINCE] = None

    def __post_init__(self) -> None:
        check_bounds(self)
        from gpuaccept.store.history import history_location

        history_location(self.history)  # a history named wrongly is said before the rest
        for flag, path in (("--html", self.html), ("--prometheus", self.prometheus)):
            if path == STDOUT:  # "-" is --markdown's stdout; here it was a file named "-"
                raise InputError(f"{flag} -: stdout is --markdown's alone; give a file path")
        if self.since is not None:
            if not self.fleet:
                raise InputError("--since says what changed in the fleet: give --fleet")
            from gpuaccept.compare.fleet import parse_since

            parse_since(self.since)
        if self.fleet:
            if self.source is not None:
                raise InputError(f"--fleet shows the whole fleet: name no run ({self.source!r})")
            if self.markdown is not None or (self.html is None and self.prometheus is None):
                raise InputError(
                    "--fleet writes its page (--html PAGE) and/or its MTBI as textfile metrics "
                    "(--prometheus FILE), no Markdown"
                )
            if self.since is not None and self.html is None:
                # the metrics are the MTBI window's (--mtbi-days): --since would change nothing
                raise InputError("--since says what changed on the fleet's page: give --html PAGE")
            return
        if self.judging != FleetJudging():
            raise InputError(
                "--tolerance, --min-gpus and --mtbi-days judge the fleet: give --fleet"
            )
        if self.source is None:
            raise InputError("name a run id or a REPORT.json file (or --fleet --html PAGE)")


@dataclass(frozen=True)
class ReportResult:
    written: list[Path]  # the files written, in the order they were said
    report: RunReport | None = None  # the run rendered; None for the fleet's page
    exit_code: int = 0


def run(request: ReportRequest, out: Output) -> ReportResult:
    """Every output is checked, then everything rendered, then written: a refusal or a failed
    rendering leaves no output half-written. With no output named, the Markdown summary on
    stdout, as `history show` prints a run."""
    from gpuaccept.output_files import refuse_collisions
    from gpuaccept.report.reading import load_report
    from gpuaccept.store.history import History, history_location, local_file

    location = history_location(request.history)
    if request.fleet:
        return _fleet_page(request, location, out)
    assert request.source is not None  # the request refuses a report of nothing
    html, markdown, prometheus = request.html, request.markdown, request.prometheus
    if html is None and markdown is None and prometheus is None:
        markdown = STDOUT
    for path, flag in ((html, "--html"), (markdown, "--markdown"), (prometheus, "--prometheus")):
        _check_output(path, flag)
    source = request.source
    refuse_collisions(
        {"--html": html, "--markdown": markdown, "--prometheus": prometheus},
        {"--history": local_file(location), "SOURCE": Path(source)},
    )
    path = Path(source)
    run_id: int | None = None
    if path.exists() or not re.fullmatch(r"[0-9]{1,18}", source):
        report = load_report(path)
    else:
        run_id = int(source)
        with History.open(location, create=False) as store:
            report = store.report(run_id)

    outputs: list[tuple[Path, str]] = []
    if html is not None:
        from gpuaccept.report.html import render_html

        outputs.append((html, render_html(report, _trends(report, run_id, request.history))))
    if prometheus is not None:
        from gpuaccept.report.prometheus import render_prometheus

        outputs.append((prometheus, render_prometheus(report)))
    if markdown is not None:
        from gpuaccept.report.markdown import render_markdown

        text = render_markdown(report)
        if markdown == STDOUT:
            out.line(text.removesuffix("\n"))  # its lines end in a newline, as out's do
        else:
            outputs.append((markdown, text))
    for target, text in outputs:
        _write(target, text)
        # stdout carries the summary: the files written are said beside it, on stderr
        (out.error if markdown == STDOUT else out.line)(f"[REPORT] {target}")
    return ReportResult([target for target, _ in outputs], report)


def _fleet_page(request: ReportRequest, location: HistoryLocation, out: Output) -> ReportResult:
    from datetime import UTC, datetime

    from gpuaccept.commands.history.fleet import judged_fleet
    from gpuaccept.compare.fleet import fleet_mtbi
    from gpuaccept.output_files import refuse_collisions
    from gpuaccept.report.fleet_html import pages_directory, render_fleet_html, write_fleet_page
    from gpuaccept.store.history import History, local_file

    html, prometheus = request.html, request.prometheus
    if html is not None and _a_stream(html):
        # written through as any output is, the page would block on a pipe with no reader (or
        # go to a terminal) after its pages were put beside it, as /dev/NAME.nodes for a device
        raise InputError(
            f"--html {html}: the fleet's page keeps its node pages beside it "
            f"({html.name}.nodes/): give a file path, not a pipe or a device"
        )
    _check_output(html, "--html")
    _check_output(prometheus, "--prometheus")
    refuse_collisions(
        {"--html": html, "--prometheus": prometheus}, {"--history": local_file(location)}
    )
    judging = request.judging
    outputs: list[tuple[Path, str]] = []
    with History.open(location, create=False) as store:
        if html is not None:
            state = judged_fleet(store, judging, request.since, distributions=True)
            mtbi = state.mtbi
            page = render_fleet_html(
                state,
                source=str(location),
                generated_at=datetime.now(UTC).isoformat()[:19],
                directory=pages_directory(html).name,
            )
        else:
            mtbi = fleet_mtbi(store, judging.mtbi_days)  # the window alone, not the fleet's view
    if prometheus is not None:
        from gpuaccept.report.fleet_prometheus import render_fleet_prometheus

        outputs.append((prometheus, render_fleet_prometheus(mtbi)))
    if html is not None:
        try:  # the page, and its node table's other pages in a directory beside it
            write_fleet_page(page, html)
        except OSError as error:  # the page's directory of pages, or the page itself
            where = error.filename2 or error.filename or html
            raise InputError(f"{where}: cannot write the fleet's page: {error.strerror}") from None
        out.line(f"[REPORT] {html}")
    for target, text in outputs:
        _write(target, text)
        out.line(f"[REPORT] {target}")
    return ReportResult([*([html] if html is not None else []), *(t for t, _ in outputs)])


def _a_stream(path: Path) -> bool:
    import stat

    try:
        mode = path.stat().st_mode
    except OSError:
        return False  # not there (or not reachable): check_output_file says what is wrong
    return stat.S_ISFIFO(mode) or stat.S_ISCHR(mode)


def _check_output(path: Path | None, flag: str) -> None:
    from gpuaccept.output_files import check_output_file

    if path is not None and path != STDOUT:
        check_output_file(path, flag)


def _write(target: Path, text: str) -> None:
    from gpuaccept.output_files import write_text_atomically

    try:
        write_text_atomically(target, text)
    except OSError as error:
        raise InputError(f"{target}: cannot write: {error.strerror}") from None


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
