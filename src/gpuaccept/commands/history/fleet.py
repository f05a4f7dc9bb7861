"""`history fleet`: the newest accept run per node, the GPUs that lag their model's fleet, the
nodes slower than their own past, silent data corruption, and the mean time between incidents.

The fleet needs a person (exit 1) when a node's newest accept did not pass (failed, judged
nothing, or was interrupted), a GPU lags, a node is slower than its own history, or a burn-in
found GPUs disagreeing; benchmark and training runs are not verdicts on a node.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Annotated

from gpuaccept.commands.history.common import HISTORY, opened, table_lines, write_table
from gpuaccept.commands.options import check_bounds, opt
from gpuaccept.errors import InputError

if TYPE_CHECKING:
    from gpuaccept.commands.output import Output
    from gpuaccept.compare.fleet import FleetMtbi, FleetState
    from gpuaccept.store.base import History, NodeChange, RunRow

# how the fleet is judged unless told otherwise: `history fleet`'s and `report --fleet`'s
TOLERANCE_PERCENT = 10.0
MIN_GPUS = 3
MTBI_DAYS = 30.0


_TOLERANCE = "Flag a GPU more than this many percent worse than its model's fleet median."
_MTBI_DAYS = (
    "The window (ending at the history's newest run) of the mean time between incidents per "
    "node and per GPU."
)
_PAGE = "The node table's page (attention first: failing nodes lead)."
SINCE = opt(
    "--since",
    "WHEN",
    "What changed in the fleet since then (newly failing, newly slower, returned to pass): "
    "hours or days before the history's newest run (24h, 7d) or an instant (2026-11-28T06:00, "
    "UTC unless it says); default 24h.",
)


@dataclass(frozen=True, kw_only=True)
class FleetJudging:
    """How the fleet is judged (--tolerance, --min-gpus, --mtbi-days)."""

    tolerance_percent: Annotated[
        float, opt("--tolerance", "PERCENT", _TOLERANCE, least=0, most=100)
    ] = TOLERANCE_PERCENT
    min_gpus: Annotated[
        int, opt("--min-gpus", text="GPUs of a model needed before its median is trusted.", least=2)
    ] = MIN_GPUS
    mtbi_days: Annotated[float, opt("--mtbi-days", "DAYS", _MTBI_DAYS)] = MTBI_DAYS


PAGE_SIZE = 50  # the node table's rows a page (`history fleet`)
ACT_NOW_LINES = 25  # the act-now lines the text shows (the JSON and the page: every one)
NAMES_SHOWN = 10  # nodes named in a line of what changed


@dataclass(frozen=True, kw_only=True)
class FleetRequest:
    history: Annotated[str | None, HISTORY] = None
    judging: FleetJudging = field(default_factory=FleetJudging)
    as_json: Annotated[bool, opt("--json", text="Print the view as JSON.")] = False
    # 24h, 7d, or an instant; None: 24 h before the newest run
    since: Annotated[str | None, SINCE] = None
    page: Annotated[int, opt("--page", text=_PAGE, least=1)] = 1
    page_size: Annotated[int, opt("--page-size", text="Nodes per page.", least=1, most=100_000)] = (
        PAGE_SIZE
    )

    def __post_init__(self) -> None:
        check_bounds(self)
        from gpuaccept.compare.fleet import check_window, parse_since

        check_window(self.judging.mtbi_days)
        if self.since is not None:
            parse_since(self.since)
        check_page(self.page, self.page_size)


def check_page(page: int, page_size: int) -> None:
    if not 1 <= page <= 10**9:
        raise InputError(f"--page {page}: give a page from 1")
    if not 1 <= page_size <= 100_000:
        raise InputError(f"--page-size {page_size}: give 1 to 100,000 rows")


@dataclass(frozen=True)
class FleetResult:
    state: FleetState
    exit_code: int  # 1 when the fleet needs a person (FleetState.attention)


def judged_fleet(
    store: History, judging: FleetJudging, since: str | None, *, distributions: bool = False
) -> FleetState:
    """The fleet's state as `history fleet` and the fleet page judge it: the judging options
    and `--since` (None: the default window) applied to the store."""
    from gpuaccept.compare.fleet import DEFAULT_SINCE, fleet_state, parse_since

    return fleet_state(
        store,
        tolerance_percent=judging.tolerance_percent,
        min_samples=judging.min_gpus,
        mtbi_days=judging.mtbi_days,
        since=DEFAULT_SINCE if since is None else parse_since(since),
        distributions=distributions,
    )


def run(request: FleetRequest, out: Output) -> FleetResult:
    with opened(request.history) as store:
        state = judged_fleet(store, request.judging, request.since)
    ordered = state.attention_order()
    pages = max(1, -(-len(ordered) // request.page_size))
    if request.page > pages:
        raise InputError(f"--page {request.page}: the node table has {pages} page(s)")
    first = (request.page - 1) * request.page_size
    page = Page(
        ordered[first : first + request.page_size],
        request.page,
        pages,
        len(ordered),
        request.page_size,
    )
    if request.as_json:
        # one line: Python's indenting encoder is its slow one (a fleet of 10,000 nodes: 2.8 s
        # of 3.5 against 0.2 s, benchmarks/history_scale.py)
        out.line(json.dumps(_as_json(state, request.judging.tolerance_percent, page)))
    else:
        _write_view(state, request.judging.tolerance_percent, page, out)
    return FleetResult(state, 1 if state.attention else 0)


@dataclass(frozen=True)
class Page:
    """One page of the node table, attention first."""

    nodes: list[RunRow]
    number: int
    pages: int
    total: int
    size: int  # rows a page


def _names(changes: list[NodeChange]) -> str:
    names = [c.node or "(unnamed)" for c in changes[:NAMES_SHOWN]]
    more = f" and {len(changes) - NAMES_SHOWN} more" if len(changes) > NAMES_SHOWN else ""
    return f" ({', '.join(names)}{more})" if names else ""


def _write_first_screen(state: FleetState, tolerance: float, out: Output) -> None:
    """How many nodes are in each state, what to act on first and why, what changed, and the
    stacks in use (issue #53 §2): the decision before the tables."""
    from gpuaccept.naming import format_number

    counts = state.counts()
    nodes = len(state.view.nodes)
    said = " · ".join(f"{format_number(n)} {what}" for what, n in counts.items()) or "none"
    out.line(f"Fleet: {format_number(nodes)} node(s), each by its newest accept: {said}")
    gpu_lag, cpu_lag = state.lagging()
    overlays = [
        f"{format_number(len(state.out_of_service))} to take out of service",
        f"{format_number(gpu_lag)} GPU figure(s) lagging their model by over {tolerance:g}%",
        f"{format_number(len(state.slower))} slower than before",
        f"{format_number(len(state.sdc))} with silent data corruption",
    ]
    if cpu_lag:
        overlays.insert(2, f"{format_number(cpu_lag)} CPU-twin figure(s) lagging")
    out.line("  " + " · ".join(overlays))
    out.line("")
    if state.act_now:
        out.line(f"Act now, most severe first ({format_number(len(state.act_now))} node(s)):")
        shown = state.act_now[:ACT_NOW_LINES]
        for line in table_lines(
            ["node", "action", "why", "run"],
            [
                [
                    e.node or "(unnamed)",
                    e.action,
                    _one_line(e.why) + (f" (+{e.more} more)" if e.more else ""),
                    str(e.run_id),
                ]
                for e in shown
            ],
        ):
            out.line("  " + line)
        if len(state.act_now) > len(shown):
            out.line(
                f"  ... and {len(state.act_now) - len(shown)} more: the node table lists them "
                "first, --json lists every one"
            )
    else:
        out.line("Act now: nothing; no node's newest accept asks for an action")
    changes = state.changes
    if changes is not None:
        out.line("")
        out.line(
            f"Changed since {changes.since[:19]}: "
            f"{len(changes.newly_failing)} newly failing{_names(changes.newly_failing)}; "
            f"{len(changes.newly_slow)} newly slower than before{_names(changes.newly_slow)}; "
            f"{len(changes.returned)} returned to pass{_names(changes.returned)}"
        )
    if state.stacks:
        out.line("")
        out.line(
            f"Stacks in use (accept runs of the UTC days {state.mtbi.since[:10]} to "
            f"{state.mtbi.until[:10]}, --mtbi-days' window; first seen first):"
        )
        for line in table_lines(
            ["stack", "nodes now", "judged runs", "passed", "pass rate", "first", "last"],
            [
                [
                    s.stack,
                    format_number(s.nodes_now),
                    format_number(s.judged),
                    format_number(s.passed),
                    f"{100 * s.passed / s.judged:.1f}%" if s.judged else "-",
                    _utc(s.first),
                    _utc(s.last),
                ]
                for s in state.stacks
            ],
        ):
            out.line("  " + line)
    out.line("")


def _utc(seconds: float) -> str:
    from datetime import UTC, datetime

    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%d %H:%M")


def _one_line(text: str, width: int = 120) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"


def _write_view(state: FleetState, tolerance: float, page: Page, out: Output) -> None:
    from gpuaccept.results import device_label

    view = state.view
    _write_first_screen(state, tolerance, out)
    out.line(
        f"Nodes, those to act on first (page {page.number} of {page.pages}, "
        f"{len(page.nodes)} of {page.total}; --page N):"
    )
    write_table(
        out,
        ["node", "newest accept", "started (UTC)", "level", "result", "action"],
        [
            [
                str(run.hostname),
                str(run.id),
                run.started_at[:19],
                run.level,
                run.verdict.label,
                state.actions.get(run.id, ""),
            ]
            for run in page.nodes
        ],
    )
    out.line("")
    if view.outliers:
        out.line(f"GPUs more than {tolerance:g}% worse than their model's fleet median:")
        write_table(
            out,
            ["node", "device", "model", "metric", "value", "median", "deviation", "run"],
            [
                [
                    str(f.point.hostname),
                    device_label(f.point.device_index),
                    f.model,
                    f.point.metric,
                    f"{f.point.value:.4g} {f.point.unit}",
                    f"{f.fleet_median:.4g}",
                    f"{f.deviation_percent:+.1f}%",
                    str(f.point.run_id),
                ]
                for f in view.outliers
            ],
        )
    else:
        out.line(f"no GPU more than {tolerance:g}% worse than its model's fleet median")
    if state.slower:
        out.line("")
        out.line("Nodes slower than their own history (their newest accept says):")
        for run, drop in state.slower:
            out.line(f"  {run.hostname} (run {run.id}): {drop.message}")
    for run in state.sdc:
        out.line("")
        out.line(
            f"{run.hostname}: its newest burn-in (run {run.id}) found silent data "
            "corruption (GPUs disagreed bit for bit)"
        )
    _write_mtbi(state.mtbi, out)


def _hours(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value / 24:.1f} d" if value >= 48 else f"{value:.1f} h"


def _write_mtbi(mtbi: FleetMtbi, out: Output) -> None:
    from gpuaccept.compare.fleet import JUDGED_RUNS

    if not mtbi.nodes:
        return
    hit = [m for m in mtbi.nodes if m.incidents]
    out.line("")
    out.line(
        f"Mean time between incidents, the {mtbi.days:g} days to {mtbi.until[:19]}: "
        f"{len(hit)} of {len(mtbi.nodes)} node(s) had one; the fleet's per node "
        f"{_hours(mtbi.fleet_hours())}"
    )
    if hit:
        write_table(
            out,
            ["node", "incidents", "observed", "judged runs", "MTBI"],
            [
                [m.what, str(m.incidents), _hours(m.hours), str(m.runs), _hours(m.mean_hours)]
                for m in hit
            ],
        )
        out.line(f"(judged {JUDGED_RUNS})")
    if mtbi.gpus:
        out.line("GPUs a run named for a remediation:")
        write_table(
            out,
            ["gpu", "serial", "hosts", "incidents", "observed", "MTBI"],
            [
                [
                    m.what,
                    m.serial or "-",
                    ", ".join(m.hosts),
                    str(m.incidents),
                    _hours(m.hours),
                    _hours(m.mean_hours),
                ]
                for m in mtbi.gpus
            ],
        )


def _as_json(state: FleetState, tolerance: float, page: Page) -> dict[str, object]:
    view = state.view
    return {
        "summary": {
            "nodes": len(view.nodes),
            "states": state.counts(),
            "to_take_out_of_service": len(state.out_of_service),
            "lagging_gpu_figures": sum(1 for f in view.outliers if f.model != "cpu"),
            "lagging_cpu_figures": sum(1 for f in view.outliers if f.model == "cpu"),
            "slower_than_before": len(state.slower),
            "sdc": len(state.sdc),
        },
        "act_now": [
            {
                "node": e.node,
                "action": e.action,
                "why": e.why,
                "run": e.run_id,
                "failing": e.failing,
                "more_reasons": e.more,
            }
            for e in state.act_now
        ],
        "changed": None if state.changes is None else state.changes.as_json(),
        "stacks": [
            {
                "stack": s.stack,
                "nodes_now": s.nodes_now,
                "judged_runs": s.judged,
                "passed": s.passed,
                "pass_rate": s.passed / s.judged if s.judged else None,
                "first_seen": _utc(s.first),
                "last_seen": _utc(s.last),
            }
            for s in state.stacks
        ],
        "nodes_page": {
            "page": page.number,
            "pages": page.pages,
            "page_size": page.size,
            "total": page.total,
            "order": "those to act on first (most severe action first), then by name",
        },
        "nodes": [
            {
                "node": run.hostname,
                "run": run.id,
                "started_at": run.started_at,
                "command": run.command,
                "level": run.level,
                "verdict": run.verdict.model_dump(mode="json"),
                "action": state.actions.get(run.id),
            }
            for run in page.nodes
        ],
        "outliers": [
            {
                "node": f.point.hostname,
                "device_index": f.point.device_index,
                "gpu_uuid": f.point.gpu_uuid,
                "model": f.model,
                "metric": f.point.metric,
                "value": f.point.value,
                "unit": f.point.unit,
                "fleet_median": f.fleet_median,
                "deviation_percent": f.deviation_percent,
                "run": f.point.run_id,
            }
            for f in view.outliers
        ],
        "tolerance_percent": tolerance,
        "slower_than_before": [
            {
                "node": run.hostname,
                "run": run.id,
                "status": drop.status.value,
                "message": drop.message,
            }
            for run, drop in state.slower
        ],
        "mtbi": state.mtbi.as_json(),
        "sdc": [
            {"node": run.hostname, "run": run.id, "started_at": run.started_at} for run in state.sdc
        ],
    }
