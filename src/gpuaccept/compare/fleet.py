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
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime, timedelta

from gpuaccept.act.offenders import Mtbi
from gpuaccept.compare.comparison import (
    FleetFigure,
    FleetView,
    fleet_view,
    newest_accepts,
    outlier_bounds,
)
from gpuaccept.errors import InputError
from gpuaccept.results import CheckResult
from gpuaccept.store.base import GpuIncidents, History, HistoryError, RunRow

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


@dataclass(frozen=True)
class FleetState:
    view: FleetView
    slower: list[tuple[RunRow, CheckResult]]  # newest accepts that found their node slower
    mtbi: FleetMtbi
    actions: dict[int, str]  # run id -> the recommended action of a node's failing newest accept
    sdc: list[RunRow]  # nodes whose newest burn-in failed its bitwise comparison

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


def fleet_state(
    store: History,
    *,
    tolerance_percent: float,
    min_samples: int,
    mtbi_days: float,
    every_figure: bool = False,
) -> FleetState:
    """The fleet as the history says it is now. `every_figure`: read every GPU's newest figures
    (the page draws their distributions); otherwise the store counts them and returns only the
    outliers."""
    check_window(mtbi_days)
    until = store.newest_start()
    since = _window_start(until, mtbi_days)
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="gpu-incidents") as pool:
        # the store's heaviest statement (each named GPU's runs in the window: 0.16-0.19 s of
        # PostgreSQL's time at 10,000 of them) on a connection of its own, beside the rest
        gpus = pool.submit(_gpu_incidents_apart, store, since) if since else None
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
        stored_actions = store.newest_accept_actions()
        actions = {
            run.id: stored_actions[run.id]
            for run in view.nodes
            if not run.verdict.passed and run.id in stored_actions
        }
        sdc = [run for run in store.newest_runs("burnin") if SDC_CHECK in run.verdict.failed_checks]
        apart = gpus.result() if gpus is not None else []
        gpu_rows = apart if apart is not None else store.gpu_incidents(since)
    mtbi = _mtbi(store, until, since, mtbi_days, gpu_rows)
    return FleetState(view, slower, mtbi, actions, sdc)


def _window_start(until: str | None, days: float) -> str:
    """The start of the incidents' window ending at the history's newest run ("": none)."""
    return (datetime.fromisoformat(until) - timedelta(days=days)).isoformat() if until else ""


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
