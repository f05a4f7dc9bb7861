"""The fleet's mean time between incidents as node_exporter textfile metrics (issue #53 §4), for
`gpuaccept report --fleet --prometheus FILE`.

A node's own textfile (`report --prometheus`) holds its newest run only; incidents are counted
over the history's window, so these come from the one host that reads the history, written
atomically like every other textfile. The rule is the history's (`compare.fleet.fleet_mtbi`,
`act.offenders.node_mtbi` and `gpu_mtbi`), nothing is recounted here; the `node` label is the
one every other gpuaccept metric carries, so a dashboard joins them on it.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from typing import TYPE_CHECKING

from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.exposition import generate_latest
from prometheus_client.registry import Collector, CollectorRegistry

if TYPE_CHECKING:
    from gpuaccept.act.offenders import Mtbi
    from gpuaccept.compare.fleet import FleetMtbi


class _MtbiCollector(Collector):
    def __init__(self, mtbi: FleetMtbi) -> None:
        self.mtbi = mtbi

    def collect(self) -> Iterator[Metric]:
        mtbi = self.mtbi
        window = GaugeMetricFamily(
            "gpuaccept_fleet_mtbi_window_days",
            "How many days before the history's newest run the incidents are counted over",
        )
        window.add_metric([], mtbi.days)
        newest = GaugeMetricFamily(
            "gpuaccept_fleet_mtbi_window_end_seconds",
            "When the history's newest run started, where the window ends (Unix time)",
        )
        if mtbi.until:
            newest.add_metric([], datetime.fromisoformat(mtbi.until).timestamp())
        fleet = GaugeMetricFamily(
            "gpuaccept_fleet_mtbi_hours",
            "The fleet's mean time between incidents per node: the nodes' hours observed over "
            "all their incidents (no series without an incident)",
        )
        if (hours := mtbi.fleet_hours()) is not None:
            fleet.add_metric([], hours)
        yield from (window, newest, fleet)
        yield from _families("node", ["node"], [([m.what], m) for m in mtbi.nodes])
        # A GPU is named by its UUID wherever it moved; its serial and newest host help find it.
        yield from _families(
            "gpu",
            ["uuid", "serial", "host"],
            [([m.what, m.serial or "", m.hosts[-1] if m.hosts else ""], m) for m in mtbi.gpus],
        )


def _families(
    what: str, labels: list[str], entries: list[tuple[list[str], Mtbi]]
) -> Iterator[Metric]:
    about = {"node": "a node", "gpu": "a GPU a failed run named for a remediation"}[what]
    incidents = GaugeMetricFamily(
        f"gpuaccept_fleet_{what}_incidents",
        f"Incidents of {about} in the window (a stretch of failures after a pass is one)",
        labels=labels,
    )
    observed = GaugeMetricFamily(
        f"gpuaccept_fleet_{what}_observed_hours",
        f"Hours from the first to the last judged run of {about} in the window",
        labels=labels,
    )
    runs = GaugeMetricFamily(
        f"gpuaccept_fleet_{what}_judged_runs",
        f"Judged accept runs of {about} in the window (a pass in CPU mode or a run that judged "
        "nothing counts for neither)",
        labels=labels,
    )
    mean = GaugeMetricFamily(
        f"gpuaccept_fleet_{what}_mtbi_hours",
        f"Mean time between incidents of {about}: hours observed over incidents (no series "
        "without an incident or with one run only)",
        labels=labels,
    )
    for values, m in entries:
        incidents.add_metric(values, m.incidents)
        observed.add_metric(values, m.hours)
        runs.add_metric(values, m.runs)
        if m.mean_hours is not None:
            mean.add_metric(values, m.mean_hours)
    yield from (incidents, observed, runs, mean)


def render_fleet_prometheus(mtbi: FleetMtbi) -> str:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_MtbiCollector(mtbi))
    return generate_latest(registry).decode("utf-8")
