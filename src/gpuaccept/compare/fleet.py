"""The fleet's state from a history (issue #33 §2-3): each node's newest accept, the GPUs that lag
their model's fleet median, the nodes slower than their own past, the mean time between
incidents, the actions the failing nodes' runs recommend and the burn-ins that found silent data
corruption. What `history fleet` prints and `report --fleet --html` draws.

Bounded by the fleet, not the history, and counted by the store: the tables every append keeps
(store/fleet_tables.py) give the nodes, the medians and outliers of each GPU model's figures,
the incidents of the window and the failing nodes' actions; no report is read.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TypeVar

from gpuaccept.act.offenders import Mtbi
from gpuaccept.compare.comparison import (
    FleetFigure,
    FleetView,
    fleet_view,
    newest_accepts,
    outlier_bounds,
)
from gpuaccept.errors import InputError
from gpuaccept.results import CheckResult, Status, device_label
from gpuaccept.store.base import (
    GpuIncidents,
    History,
    HistoryError,
    NodeChange,
    RunRow,
    StackUse,
)

T = TypeVar("T")

# the burn-in check that compares each GPU's bitwise results: its failure is silent data
# corruption (docs/burnin.md)
SDC_CHECK = "burnin-correctness"


# what an MTBI row's `runs` counts (issue #53 §5: a node whose runs all passed in CPU mode read
# "runs 0", unexplained), said wherever the count is shown
JUDGED_RUNS = (
    "runs: the node's accepts in the window that judged its GPUs (passed or failed on them); "
    "a pass in CPU mode or a run that judged nothing counts for neither, so a node with only "
    "those shows 0"
)


@dataclass(frozen=True)
class FleetMtbi:
    since: str
    until: str
    days: float
    nodes: list[Mtbi]
    gpus: list[Mtbi]

    def fleet_hours(self) -> float | None:
        """The nodes' hours observed over all their incidents: the fleet's MTBI per node."""
        count = sum(m.incidents for m in self.nodes)
        return sum(m.hours for m in self.nodes) / count if count else None

    def as_json(self) -> dict[str, object]:
        def entry(m: Mtbi) -> dict[str, object]:
            return {
                "incidents": m.incidents,
                "hours_observed": round(m.hours, 3),
                "runs": m.runs,
                "mean_hours_between_incidents": m.mean_hours,
            }

        return {
            "days": self.days,
            "since": self.since,
            "until": self.until,
            "fleet_mean_hours_between_incidents_per_node": self.fleet_hours(),
            "runs_counted": JUDGED_RUNS,
            "nodes": [{"node": m.what, **entry(m)} for m in self.nodes],
            "gpus": [
                {"uuid": m.what, "serial": m.serial, "hosts": list(m.hosts), **entry(m)}
                for m in self.gpus
            ],
        }


# The first screen's actions beyond a failing run's own plan, from the action tables
# (src/gpuaccept/data/actions.toml): a burn-in whose GPUs disagreed bit for bit is the
# `wrong-result` cause, `drain` (its [cause] row); a figure that lags its model's fleet or the
# node's own past is a warning, and a warning's action is `monitor` ([check] default, warn); a
# run that did not finish or judged nothing is a check that could not complete, `rerun` (the
# same row's error). A failed run names its own action, from its plan.
SDC_ACTION = "drain"
WARNING_ACTION = "monitor"
UNFINISHED_ACTION = "rerun"
DEFAULT_SINCE = timedelta(hours=24)  # what changed: the day before the history's newest run
BINS = 40  # a distribution's bins (the page's histograms)


@dataclass(frozen=True)
class ActNow:
    """A node to act on, with the action and why, in one line."""

    node: str
    action: str  # an actions.Action value
    why: str
    run_id: int  # the run that says so
    failing: bool  # its newest accept did not pass
    more: int = 0  # other reasons to act on it, less severe or as severe

    @property
    def severity(self) -> int:
        from gpuaccept.actions import Action

        return Action(self.action).severity


@dataclass(frozen=True)
class FleetChanges:
    """What changed since an instant: each node's newest accept against its newest accept at or
    before the instant."""

    since: str
    newly_failing: list[NodeChange]  # not passing now; passing then, or no accept then
    newly_slow: list[NodeChange]  # slower than its own past now; not then
    returned: list[NodeChange]  # passing now; not passing then

    def as_json(self) -> dict[str, object]:
        def entry(change: NodeChange) -> dict[str, object]:
            return {"node": change.node, "run": change.run_id, "then_run": change.then_run}

        return {
            "since": self.since,
            "newly_failing": [entry(c) for c in self.newly_failing],
            "newly_slow": [entry(c) for c in self.newly_slow],
            "returned_to_pass": [entry(c) for c in self.returned],
        }


@dataclass(frozen=True)
class Distribution:
    """One model's newest figures of one metric, counted by the store: BINS equal bins from the
    least to the greatest (none when they are equal: a figure with no spread), the lagging ones
    among them, worst first."""

    model: str  # 'cpu': figures with no GPU (a node's own, the CPU twins')
    metric: str
    unit: str
    count: int
    low: float
    high: float
    median: float
    bins: list[int]
    lagging: list[int]  # of each bin, how many lag
    outliers: list[FleetFigure]  # worst first
    trusted: bool  # enough figures for a median that flags

    @property
    def gpu(self) -> bool:
        return self.model != "cpu"

    @property
    def spread(self) -> bool:
        return self.high > self.low


@dataclass(frozen=True)
class FleetState:
    view: FleetView
    slower: list[tuple[RunRow, CheckResult]]  # newest accepts that found their node slower
    mtbi: FleetMtbi
    actions: dict[int, str]  # run id -> the recommended action of a node's failing newest accept
    sdc: list[RunRow]  # nodes whose newest burn-in failed its bitwise comparison
    act_now: list[ActNow] = field(default_factory=list)  # most severe first
    changes: FleetChanges | None = None
    stacks: list[StackUse] = field(default_factory=list)  # first seen first
    distributions: list[Distribution] | None = None  # read for the page

    def counts(self) -> dict[str, int]:
        """How many nodes' newest accept ended each way (pass, fail, not judged,
        interrupted), a pass in CPU mode apart: it judged no GPU."""
        found: dict[str, int] = {}
        for run in self.view.nodes:
            state = run.verdict.outcome.value
            if run.verdict.passed and run.verdict.cpu_mode:
                state = "pass (CPU mode)"
            found[state] = found.get(state, 0) + 1
        return found

    def lagging(self) -> tuple[int, int]:
        """(GPU figures, CPU-twin figures) lagging their model: the screens count them apart."""
        gpus = sum(1 for figure in self.view.outliers if figure.model != "cpu")
        return gpus, len(self.view.outliers) - gpus

    def attention_order(self) -> list[RunRow]:
        """The nodes, those to act on first (most severe action first), then the rest by
        name: the node table's default order."""
        rank = {entry.node: index for index, entry in enumerate(self.act_now)}
        last = len(rank)
        return sorted(
            self.view.nodes,
            key=lambda run: (rank.get(run.hostname or "", last), run.hostname or ""),
        )

    @property
    def out_of_service(self) -> set[int]:
        """The run ids whose recommended action takes their node out of service."""
        from gpuaccept.actions import Action

        return {
            run_id for run_id, action in self.actions.items() if Action(action).takes_out_of_service
        }

    @property
    def failing(self) -> list[RunRow]:
        return [run for run in self.view.nodes if not run.verdict.passed]

    @property
    def attention(self) -> bool:
        """Whether anything here calls for a person: `history fleet` exits 1."""
        return bool(self.failing or self.view.outliers or self.slower or self.sdc)


def check_window(days: float) -> float:
    if not (math.isfinite(days) and 0 < days <= 3660):
        raise InputError(f"--mtbi-days {days:g}: give days above 0, ten years at most")
    return days


def parse_since(text: str) -> timedelta | datetime:
    """`--since`: hours or days before the history's newest run (`24h`, `7d`, `1.5d`), or an
    instant (`2026-11-28`, `2026-11-28T06:00`, with or without an offset: UTC without)."""
    import re

    found = re.fullmatch(r"\s*([0-9]{1,6}(?:\.[0-9]{1,3})?)\s*([hd])\s*", text)
    if found:
        amount = float(found.group(1))
        if amount <= 0:
            raise InputError(f"--since {text}: give a time before the newest run, above 0")
        return timedelta(hours=amount) if found.group(2) == "h" else timedelta(days=amount)
    try:
        moment = datetime.fromisoformat(text.strip())
    except ValueError:
        raise InputError(
            f"--since {text!r}: give hours or days before the history's newest run (24h, 7d) "
            "or a date and time (2026-11-28T06:00, UTC unless an offset is given)"
        ) from None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def fleet_state(
    store: History,
    *,
    tolerance_percent: float,
    min_samples: int,
    mtbi_days: float,
    every_figure: bool = False,
    since: timedelta | datetime = DEFAULT_SINCE,
    distributions: bool = False,
) -> FleetState:
    """The fleet as the history says it is now. `every_figure`: read every GPU's newest figures;
    otherwise the store counts them and returns only the outliers. `since`: what changed since
    then (before the newest run, or an instant). `distributions`: each model's figures counted
    in bins by the store (the page's histograms)."""
    check_window(mtbi_days)
    until = store.newest_start()
    window = _window_start(until, mtbi_days)
    with (
        ThreadPoolExecutor(max_workers=1, thread_name_prefix="gpu-incidents") as pool,
        ThreadPoolExecutor(max_workers=1, thread_name_prefix="fleet-changes") as beside,
    ):
        # the store's heaviest statement (each named GPU's runs in the window: 0.16-0.19 s of
        # PostgreSQL's time at 10,000 of them) on a connection of its own, beside the rest
        gpus = pool.submit(_gpu_incidents_apart, store, window) if window else None
        # and what changed and the stacks, each node's runs of the window read again (0.3 and
        # 0.4 s at 10,000 nodes on a loaded machine): a third connection
        first_screen = beside.submit(
            _apart, store, lambda other: _changes_and_stacks(other, until, since, window)
        )
        runs = store.newest_runs("accept")
        if every_figure:
            view = fleet_view(
                runs,
                store.fleet_points(),
                tolerance_percent=tolerance_percent,
                min_samples=min_samples,
            )
        else:
            view = _counted_view(store, runs, tolerance_percent, min_samples)
        drops = store.slower_checks([run.id for run in view.nodes])
        slower = [(run, drops[run.id]) for run in view.nodes if run.id in drops]
        plans = store.newest_accept_plans()
        actions = {
            run.id: plans[run.id][0]
            for run in view.nodes
            if not run.verdict.passed and run.id in plans
        }
        sdc = [run for run in store.newest_runs("burnin") if SDC_CHECK in run.verdict.failed_checks]
        watched = _watch_failures(store, view)
        found = first_screen.result()
        changes, stacks = found or _changes_and_stacks(store, until, since, window)
        drawn = (
            _distributions(store, view, tolerance_percent, min_samples) if distributions else None
        )
        apart = gpus.result() if gpus is not None else []
        gpu_rows = apart if apart is not None else store.gpu_incidents(window)
    mtbi = _mtbi(store, until, window, mtbi_days, gpu_rows)
    act_now = _act_now(view, plans, slower, sdc, watched)
    return FleetState(view, slower, mtbi, actions, sdc, act_now, changes, stacks, drawn)


def _changes(store: History, until: str | None, since: timedelta | datetime) -> FleetChanges | None:
    if until is None:
        return None
    newest = _utc(datetime.fromisoformat(until))
    # an instant given with an offset is said in UTC, as every time on the fleet's screens
    start = newest - since if isinstance(since, timedelta) else _utc(since)
    if start > newest:
        raise InputError(
            f"--since {start.isoformat()}: after the history's newest run ({newest.isoformat()}): "
            "nothing can have changed since then"
        )
    changed = store.node_changes(start.isoformat())
    return FleetChanges(
        start.isoformat(),
        [c for c in changed if not c.passed and c.then_passed is not False],
        [c for c in changed if c.slower and not c.then_slower],
        [c for c in changed if c.passed and c.then_passed is False],
    )


def _utc(moment: datetime) -> datetime:
    """An aware instant in UTC (the history's times are UTC, some stored without an offset)."""
    return moment.astimezone(UTC) if moment.tzinfo else moment.replace(tzinfo=UTC)


def _watch_failures(store: History, view: FleetView) -> list[ActNow]:
    """A node whose watch (the daemon between jobs) failed it after its newest accept: an XID 79
    at 3 a.m. is a reason to act before the next accept says so (it was on no fleet screen).
    Its action and why are the watch run's own plan's."""
    from gpuaccept.actions import plan_of

    accepted = {run.hostname: run.started_at for run in view.nodes}
    found = []
    for run in store.newest_runs("watch"):
        since = accepted.get(run.hostname)
        if run.verdict.passed or (since is not None and run.started_at <= since):
            continue
        plan = plan_of(store.report(run.id))
        first = next((r for r in plan.recommendations if r.status == Status.FAIL), None)
        why = first.finding if first is not None else ", ".join(run.verdict.failed_checks)
        found.append(ActNow(run.hostname or "", plan.action.value, f"watch: {why}", run.id, True))
    return found


def _act_now(
    view: FleetView,
    plans: dict[int, tuple[str, str]],
    slower: list[tuple[RunRow, CheckResult]],
    sdc: list[RunRow],
    watched: list[ActNow] = [],  # noqa: B006 - read, never changed
) -> list[ActNow]:
    """Every node with a reason to act, its most severe reason first: its failing newest
    accept's own action (or a rerun where it did not finish), what its watch failed it on since,
    silent data corruption (drain), then lagging figures and a node slower than its past
    (monitor)."""
    reasons: dict[str, list[ActNow]] = {}

    def add(entry: ActNow) -> None:
        reasons.setdefault(entry.node, []).append(entry)

    for entry in watched:
        add(entry)

    for run in view.nodes:
        if run.verdict.passed:
            continue
        action, why = plans.get(run.id, ("", ""))
        if not why:
            why = (
                f"failed: {', '.join(run.verdict.failed_checks)}"
                if run.verdict.failed_checks
                else run.verdict.label.lower()
            )
        add(ActNow(run.hostname or "", action or UNFINISHED_ACTION, why, run.id, True))
    for run in sdc:
        add(
            ActNow(
                run.hostname or "",
                SDC_ACTION,
                f"burn-in run {run.id}: its GPUs disagreed bit for bit (silent data corruption)",
                run.id,
                False,
            )
        )
    lagging: dict[str, list[FleetFigure]] = {}
    for figure in view.outliers:
        lagging.setdefault(figure.point.hostname or "", []).append(figure)
    for node, figures in lagging.items():
        worst = min(figures, key=lambda f: -abs(f.deviation_percent))
        what = "GPU" if worst.model != "cpu" else "CPU-twin"
        device = device_label(worst.point.device_index) if worst.model != "cpu" else "node"
        others = f" (and {len(figures) - 1} more)" if len(figures) > 1 else ""
        add(
            ActNow(
                node,
                WARNING_ACTION,
                f"{what} figure lags: {device} {worst.point.metric} {worst.point.value:.4g} "
                f"{worst.point.unit}, {worst.deviation_percent:+.1f}% against the "
                f"{worst.model} median {worst.fleet_median:.4g}{others}",
                worst.point.run_id,
                False,
            )
        )
    for run, drop in slower:
        add(ActNow(run.hostname or "", WARNING_ACTION, drop.message, run.id, False))
    found = []
    for entries in reasons.values():
        first = max(entries, key=lambda e: (e.severity, e.failing))
        found.append(
            ActNow(
                first.node,
                first.action,
                first.why,
                first.run_id,
                any(e.failing for e in entries),
                len(entries) - 1,
            )
        )
    return sorted(found, key=lambda e: (-e.severity, not e.failing, e.node))


def _distributions(
    store: History, view: FleetView, tolerance_percent: float, min_samples: int
) -> list[Distribution]:
    """Each model's metric in each unit, its bins counted by the store; the outliers (already
    read) placed in them."""
    outliers: dict[tuple[str, str, str], list[FleetFigure]] = {}
    for figure in view.outliers:
        key = (figure.model, figure.point.metric, figure.point.unit)
        outliers.setdefault(key, []).append(figure)
    found = []
    groups: dict[tuple[str, str], dict[str, int]] = {}
    for model, check, name, unit, count in store.figure_groups():
        groups.setdefault((model, f"{check}/{name}"), {})[unit] = count
    for (model, metric), units in sorted(groups.items()):
        samples = sum(units.values())
        median = statistics.median(store.middle_values(model, metric, samples))
        for unit, count in sorted(units.items()):
            counted = store.figure_bins(model, metric, unit, BINS)
            if counted is None:
                continue
            low, high, bins = counted
            lag = [0] * len(bins)
            worst = sorted(
                outliers.get((model, metric, unit), []), key=lambda f: -abs(f.deviation_percent)
            )
            for figure in worst:
                if bins:
                    index = int((figure.point.value - low) / (high - low) * BINS)
                    lag[min(BINS - 1, max(0, index))] += 1
            trusted = samples >= min_samples
            found.append(
                Distribution(
                    model, metric, unit, count, low, high, median, bins, lag, worst, trusted
                )
            )
    return found


def _window_start(until: str | None, days: float) -> str:
    """The start of the incidents' window ending at the history's newest run ("": none)."""
    return (datetime.fromisoformat(until) - timedelta(days=days)).isoformat() if until else ""


def _changes_and_stacks(
    store: History, until: str | None, since: timedelta | datetime, window: str
) -> tuple[FleetChanges | None, list[StackUse]]:
    return _changes(store, until, since), store.stack_use(window) if window else []


def _apart(store: History, read: Callable[[History], T]) -> T | None:
    """`read` on another connection to the history; None where it cannot be opened (the
    caller then reads on its own)."""
    try:
        with store.another() as other:
            return read(other)
    except HistoryError:
        return None


def _gpu_incidents_apart(store: History, since: str) -> GpuIncidents | None:
    """The GPUs' incidents read on another connection to the history; None where it cannot be
    opened (the caller then reads them on its own). Its snapshot is its own: a run stored
    between the two reads may count in one and not the other, as a second later would."""
    try:
        with store.another() as other:
            return other.gpu_incidents(since)
    except HistoryError:
        return None


def _counted_view(
    store: History, runs: list[RunRow], tolerance_percent: float, min_samples: int
) -> FleetView:
    """The fleet's view with each model's medians and outliers found by the store (an index
    seek per median, a range per model's outliers): the rule of `fleet_view`, no figure read
    that is not an outlier."""
    units: dict[tuple[str, str], dict[str, int]] = {}
    for model, check, name, unit, count in store.figure_groups():
        units.setdefault((model, f"{check}/{name}"), {})[unit] = count
    outliers: list[FleetFigure] = []
    for (model, metric), counts in sorted(units.items()):
        samples = sum(counts.values())
        median = statistics.median(store.middle_values(model, metric, samples))
        for unit in sorted(counts):
            bounds = outlier_bounds(
                unit,
                median,
                samples,
                tolerance_percent=tolerance_percent,
                min_samples=min_samples,
            )
            if bounds is not None:
                outliers += [
                    FleetFigure(point, model, median, samples, True)
                    for point in store.figures_beyond(model, metric, unit, *bounds)
                ]
    return FleetView(newest_accepts(runs), None, tolerance_percent, min_samples, outliers)


def fleet_mtbi(store: History, days: float) -> FleetMtbi:
    """Incidents within `days` before the history's newest run: each node's from its accept
    runs' fitness, each GPU's (that one named for a remediation) from the runs it took part in,
    on any host; counted by the store over the window (store/fleet_tables.py), the rule of
    `act.offenders.node_mtbi` and `gpu_mtbi`."""
    until = store.newest_start()
    since = _window_start(until, days)
    return _mtbi(store, until, since, days, store.gpu_incidents(since) if since else [])


def _mtbi(
    store: History, until: str | None, since: str, days: float, gpu_rows: GpuIncidents
) -> FleetMtbi:
    if until is None:
        return FleetMtbi("", "", days, [], [])
    nodes = [
        Mtbi(node, incidents, hours, runs)
        for node, incidents, hours, runs in store.node_incidents(since)
    ]
    gpus = [Mtbi(*gpu) for gpu in gpu_rows]
    return FleetMtbi(
        since,
        until,
        days,
        sorted(nodes, key=lambda m: (-m.incidents, m.what)),
        sorted(gpus, key=lambda m: (-m.incidents, m.what)),
    )
