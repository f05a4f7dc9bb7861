"""The fleet's state from a history (issue #33 §2-3): each node's newest accept, the GPUs that lag
their model's fleet median, the nodes slower than their own past, the mean time between
incidents, the actions the failing nodes' runs recommend and the burn-ins that found silent data
corruption. What `history fleet` prints and `report --fleet --html` draws.

Bounded by the fleet, not the history: indexes and the columns kept beside each run are read;
a report only for a node whose newest accept did not pass (its recommended action).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime, timedelta

from gpuaccept.act.offenders import Mtbi, gpu_mtbi, node_mtbi
from gpuaccept.errors import InputError
from gpuaccept.record.comparison import FleetView, fleet_view
from gpuaccept.record.history import History, RunRow
from gpuaccept.results import CheckResult

# the burn-in check that compares each GPU's bitwise results: its failure is silent data
# corruption (docs/burnin.md)
SDC_CHECK = "burnin-correctness"


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
    store: History, *, tolerance_percent: float, min_samples: int, mtbi_days: float
) -> FleetState:
    """The fleet as the history says it is now."""
    check_window(mtbi_days)
    view = fleet_view(
        store.newest_runs("accept"),
        store.points(latest_only=True, newest_runs_only=True),
        tolerance_percent=tolerance_percent,
        min_samples=min_samples,
    )
    drops = store.slower_checks([run.id for run in view.nodes])
    slower = [(run, drops[run.id]) for run in view.nodes if run.id in drops]
    actions = {
        run.id: store.report(run.id).action_plan.action.value
        for run in view.nodes
        if not run.verdict.passed
    }
    sdc = [run for run in store.newest_runs("burnin") if SDC_CHECK in run.verdict.failed_checks]
    return FleetState(view, slower, fleet_mtbi(store, mtbi_days), actions, sdc)


def fleet_mtbi(store: History, days: float) -> FleetMtbi:
    """Incidents within `days` before the history's newest run: each node's from its accept
    runs' fitness, each GPU's (that one named for a remediation) from the runs it took part in,
    on any host; bounded by the window, not the history."""
    until = store.newest_start()
    if until is None:
        return FleetMtbi("", "", days, [], [])
    start = datetime.fromisoformat(until) - timedelta(days=days)
    since = start.isoformat()
    judged = {"fail": True, "pass": False}
    nodes = node_mtbi(
        (host, started, judged.get(fitness))
        for host, started, fitness in store.accept_fitness(start.timestamp())
    )
    named = store.remediated_gpus(since)
    took_part = store.accept_runs_of_gpus(sorted({uuid for uuid, _, _ in named}), since)
    gpus = gpu_mtbi(((uuid, run_id) for uuid, run_id, _ in named), took_part)
    return FleetMtbi(since, until, days, nodes, gpus)
