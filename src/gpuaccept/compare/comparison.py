"""Comparing figures: one run against another, and each GPU against its fleet's median.

Pure logic over the results model and history rows; the CLI prints, the history stores.
"""

from __future__ import annotations

import math
import statistics
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

from gpuaccept.results import RunReport, device_label
from gpuaccept.store.base import MetricPoint, RunRow
from gpuaccept.verdict import ACCEPT

# Units whose smaller values are better; rates and accuracies are better when larger.
LOWER_IS_BETTER_UNITS = frozenset({"s", "ms", "us", "nats", "elements"})
HIGHER_IS_BETTER_UNITS = frozenset({"TFLOPS", "GFLOP/s", "GB/s", "img/s", "%"})


def higher_is_better(unit: str) -> bool | None:
    """True or False for units with a known direction; None when a change is neither."""
    if unit in HIGHER_IS_BETTER_UNITS or unit.endswith("/s"):
        return True
    if unit in LOWER_IS_BETTER_UNITS:
        return False
    return None


@dataclass(frozen=True)
class ComparedFigure:
    metric: str
    device: str
    unit: str
    value_a: float | None
    value_b: float | None

    @property
    def change_percent(self) -> float | None:
        if self.value_a is None or self.value_b is None or self.value_a == 0:
            return None
        return (self.value_b - self.value_a) / abs(self.value_a) * 100

    @property
    def worse(self) -> bool:
        """B is worse than A (by direction of the unit)."""
        change = self.change_percent
        direction = higher_is_better(self.unit)
        if change is None or direction is None:
            return False
        return change < 0 if direction else change > 0


def _figures(report: RunReport) -> dict[tuple[str, str], tuple[float, str]]:
    figures: dict[tuple[str, str], tuple[float, str]] = {}
    for check in report.checks:
        for m in check.measurements:
            figures[(f"{check.name}/{m.name}", device_label(m.device_index))] = (m.value, m.unit)
    return figures


def compare_reports(a: RunReport, b: RunReport) -> list[ComparedFigure]:
    """Every figure of either run, matched by check, metric and device."""
    figures_a, figures_b = _figures(a), _figures(b)
    compared = []
    for key in sorted(figures_a.keys() | figures_b.keys()):
        value_a, unit_a = figures_a.get(key, (None, ""))
        value_b, unit_b = figures_b.get(key, (None, ""))
        compared.append(ComparedFigure(key[0], key[1], unit_a or unit_b, value_a, value_b))
    return compared


class FleetFigure(NamedTuple):
    """A GPU's newest figure for one metric, against the median of GPUs of the same model (a
    named tuple for the reason MetricPoint is one: one per GPU and figure of the fleet)."""

    point: MetricPoint
    model: str
    fleet_median: float
    samples: int
    outlier: bool

    @property
    def deviation_percent(self) -> float:
        if self.fleet_median == 0:
            return 0.0
        return (self.point.value - self.fleet_median) / abs(self.fleet_median) * 100


@dataclass(frozen=True)
class FleetView:
    nodes: list[RunRow]  # the newest acceptance run of each node
    figures: list[FleetFigure] | None  # every GPU's newest figures; None: only outliers read
    tolerance_percent: float
    min_samples: int
    outliers: list[FleetFigure]


def outlier_bounds(
    unit: str, median: float, samples: int, *, tolerance_percent: float, min_samples: int
) -> tuple[float, float] | None:
    """The values a figure in `unit` keeps within its model's median: beyond them (below the
    low, above the high) it is an outlier. None where nothing is flagged: a unit with no
    direction, or a median of fewer than `min_samples` figures."""
    direction = higher_is_better(unit)
    if direction is None or samples < min_samples:
        return None
    limit = tolerance_percent / 100 * abs(median)
    return (median - limit, math.inf) if direction else (-math.inf, median + limit)


def newest_accepts(runs: Sequence[RunRow]) -> list[RunRow]:
    """The newest acceptance run of each node, by node name. Only an acceptance run speaks for
    a node: a benchmark or a training run after a failed accept must not turn the node green."""
    newest: dict[str | None, RunRow] = {}
    for run in sorted(runs, key=lambda r: (r.started_at, r.id), reverse=True):
        if run.verdict.kind == ACCEPT:
            newest.setdefault(run.hostname, run)
    return sorted(newest.values(), key=lambda r: str(r.hostname))


def fleet_view(
    runs: Sequence[RunRow],
    latest_points: Sequence[MetricPoint],
    *,
    tolerance_percent: float,
    min_samples: int = 3,
) -> FleetView:
    """Newest `accept` run per node, every GPU's newest figures, and the GPUs more than
    `tolerance_percent` worse than their model's median (`outlier_bounds`).

    A GPU is flagged whether or not it passed its reference: a node that is 15% slower than its
    siblings is worth a look before users notice. Models with fewer than `min_samples` GPUs have
    no meaningful median and are never flagged. Where every figure is read anyway (the fleet's
    page); `history fleet` has the store count and bound them (`compare.fleet`).
    """
    groups: dict[tuple[str, str], list[MetricPoint]] = defaultdict(list)
    for point in latest_points:
        model = point.device_name or "cpu"
        groups[(model, point.metric)].append(point)
    figures = []
    for (model, _metric), points in sorted(groups.items()):
        median = statistics.median(point.value for point in points)
        for point in points:
            bounds = outlier_bounds(
                point.unit,
                median,
                len(points),
                tolerance_percent=tolerance_percent,
                min_samples=min_samples,
            )
            outlier = bounds is not None and not bounds[0] <= point.value <= bounds[1]
            figures.append(FleetFigure(point, model, median, len(points), outlier))
    return FleetView(
        nodes=newest_accepts(runs),
        figures=figures,
        tolerance_percent=tolerance_percent,
        min_samples=min_samples,
        outliers=[figure for figure in figures if figure.outlier],
    )
