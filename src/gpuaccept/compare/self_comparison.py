"""A run against the same node's own past: is this node slower than it was?

References catch a node that is slow for its GPU model; a node that was fast and lost 40% since
last week can still clear a floor that is set low enough for every board of its model (and on
the CPU twins floors are far below any machine). So every figure of a run is compared with the
median of the same node's last comparable runs, and with the median of its *first* comparable
runs (on this stack): a drop beyond the tolerance against either warns (or, when asked, fails).
The first runs catch a slow decline that a rolling median follows down (2.6% a run for 20 runs is
40% below the first and 7.5% below the rolling median). The runs are chosen in the history's
query (node, command, level, mode, passed), so a health check's hourly quick runs never push the
standard runs out of the scan; ordered by their start as an instant; and a run dated after now
(beyond a few minutes of skew) is no part of the past. A non-finite figure is never compared.

Comparable runs (all must hold): same node (its one name, record/identity.py), same command and
level (a quick accept is not a standard one; a matmul benchmark is not an n-body one), same mode
(GPU or CPU twins), same software stack and GPU models (`stack_sha256`: python, torch, CUDA
runtime and driver, pixi lock, GPU names), and a PASS verdict: a run that failed or was
interrupted is no picture of the node as it should be. Figures are matched by check, metric and
device, and the device's model must agree. A stack change starts the comparison afresh: the
reason is printed, and `history compare` shows the runs either side of the change.

The tolerance (default 20%) is twice gpu-fryer's 10% between the GPUs of one node (its
`--tflops-tolerance`, default 10, a GPU's average against the best GPU's: huggingface/gpu-fryer
src/main.rs:73-76 and 609-617 at 704ba85): runs of one node days apart also differ in
clocks, temperature and what else the host was doing, so a drop past 20% is a change, not noise.
On the CPU twins the default is 50%: they share the machine with whatever else runs there, and
two quick accepts back to back on the 2-core development machine differed by 74% in the 1 MiB
gloo all-reduce. Only figures with a direction (rates better when larger, times better when
smaller; see `comparison.higher_is_better`) are compared.
"""

from __future__ import annotations

import math
import statistics
import time
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from gpuaccept.compare.comparison import higher_is_better
from gpuaccept.record.environment import stack_sha256
from gpuaccept.record.identity import node_name_of
from gpuaccept.results import (
    FUTURE_SKEW_SECONDS,
    HISTORY_CHECK,
    CheckResult,
    RunReport,
    device_label,
)
from gpuaccept.results import stored_drop as stored_drop
from gpuaccept.store.base import History
from gpuaccept.verdict import Outcome, Status

if TYPE_CHECKING:
    from gpuaccept.actions import ActionRules

CHECK_NAME = HISTORY_CHECK
DEFAULT_DROP_TOLERANCE_PERCENT = 20.0
DEFAULT_CPU_DROP_TOLERANCE_PERCENT = 50.0
DEFAULT_COMPARABLE_RUNS = 5
# How many of the node's newest runs of the command are read to find the comparable ones.
_SCAN_RUNS = 50


def default_tolerance(device_mode: str) -> float:
    """The drop tolerance for a run on the GPU ('cuda') or the CPU twins ('cpu')."""
    return (
        DEFAULT_CPU_DROP_TOLERANCE_PERCENT
        if device_mode == "cpu"
        else (DEFAULT_DROP_TOLERANCE_PERCENT)
    )


def _change(value: float, against: float) -> float:
    return 0.0 if against == 0 else (value - against) / abs(against) * 100


@dataclass(frozen=True)
class SelfFigure:
    """One figure of this run against the median of the node's last comparable runs, and
    against the median of its first ones (a slow decline shows against the second)."""

    metric: str  # check/name
    device: str
    unit: str
    value: float
    median: float
    runs: int  # how many comparable runs had this figure
    baseline: float | None = None  # the median of the node's first comparable runs
    baseline_runs: int = 0

    @property
    def change_percent(self) -> float:
        return _change(self.value, self.median)

    @property
    def baseline_change_percent(self) -> float | None:
        return None if self.baseline is None else _change(self.value, self.baseline)

    def _worse(self, change: float | None, tolerance_percent: float) -> bool:
        direction = higher_is_better(self.unit)
        if direction is None or change is None:
            return False
        return change < -tolerance_percent if direction else change > tolerance_percent

    def dropped(self, tolerance_percent: float) -> bool:
        """Worse than the recent median, or than the first runs' median, by more than the
        tolerance, in the unit's direction."""
        return self.dropped_recently(tolerance_percent) or self.declined(tolerance_percent)

    def dropped_recently(self, tolerance_percent: float) -> bool:
        return self._worse(self.change_percent, tolerance_percent)

    def declined(self, tolerance_percent: float) -> bool:
        return self._worse(self.baseline_change_percent, tolerance_percent)


@dataclass(frozen=True)
class SelfComparison:
    tolerance_percent: float
    run_ids: list[int]  # the comparable runs, newest first
    figures: list[SelfFigure]
    nothing_to_compare: str | None = None  # why no figure was compared
    # the runs on other hosts of GPUs that moved here, whose figures they gave
    elsewhere_run_ids: list[int] = field(default_factory=list)

    @property
    def drops(self) -> list[SelfFigure]:
        return [f for f in self.figures if f.dropped(self.tolerance_percent)]

    def check(self, *, fail_on_drop: bool) -> CheckResult:
        """The comparison as a check of the run: SKIP with nothing to compare, WARN (FAIL with
        `fail_on_drop`) on a drop, else PASS."""
        if self.nothing_to_compare is not None:
            return CheckResult(
                name=CHECK_NAME, area="HISTORY", status=Status.SKIP, message=self.nothing_to_compare
            )
        said = []
        if self.run_ids:
            said.append(f"this node's last {len(self.run_ids)} comparable run(s)")
        if self.elsewhere_run_ids:
            said.append(
                f"{len(self.elsewhere_run_ids)} comparable run(s) on other hosts of GPUs that "
                "moved here"
            )
        runs = f"the median of {' and '.join(said)}"
        details: dict[str, Any] = {
            "tolerance_percent": self.tolerance_percent,
            "compared_runs": self.run_ids,
            "compared_runs_of_moved_gpus": self.elsewhere_run_ids,
            "columns": [
                ["metric", "figure"],
                ["device", "device"],
                ["value", "now"],
                ["median", "median before"],
                ["change", "change"],
                ["runs", "runs"],
            ],
            "rows": [
                {
                    "metric": f.metric,
                    "device": f.device,
                    "value": f"{f.value:.4g} {f.unit}",
                    "median": f"{f.median:.4g} {f.unit}",
                    "change": f"{f.change_percent:+.1f}%",
                    "runs": f.runs,
                }
                for f in self.figures
            ],
        }
        drops = self.drops
        if not drops:
            return CheckResult(
                name=CHECK_NAME,
                area="HISTORY",
                status=Status.PASS,
                message=f"{len(self.figures)} figure(s) within {self.tolerance_percent:g}% of "
                f"{runs}",
                details=details,
            )
        worst = sorted(drops, key=lambda f: -abs(_said_change(f, self.tolerance_percent)))
        named = ", ".join(_said(f, self.tolerance_percent) for f in worst[:3])
        more = f" and {len(worst) - 3} more" if len(worst) > 3 else ""
        return CheckResult(
            name=CHECK_NAME,
            area="HISTORY",
            status=Status.FAIL if fail_on_drop else Status.WARN,
            message=f"slower than it was: {len(drops)} figure(s) more than "
            f"{self.tolerance_percent:g}% worse than {runs}: {named}{more}",
            details=details,
        )


def _said_change(f: SelfFigure, tolerance_percent: float) -> float:
    if f.dropped_recently(tolerance_percent) or f.baseline_change_percent is None:
        return f.change_percent
    return f.baseline_change_percent


def _said(f: SelfFigure, tolerance_percent: float) -> str:
    if f.dropped_recently(tolerance_percent) or f.baseline is None:
        return (
            f"{f.metric} on {f.device} {f.change_percent:+.1f}% ({f.value:.4g} vs {f.median:.4g} "
            f"{f.unit})"
        )
    return (
        f"{f.metric} on {f.device} {_said_change(f, tolerance_percent):+.1f}% against the "
        f"node's first {f.baseline_runs} comparable run(s) ({f.value:.4g} vs {f.baseline:.4g} "
        f"{f.unit}; a slow decline)"
    )


Key = tuple[str, str, str]  # (check/metric, the GPU's UUID or the device's label, its model)


def _uuids(report: RunReport) -> dict[int, str]:
    """Device index -> the GPU's UUID, as the run's capture names them."""
    found = {}
    for gpu in report.environment.get("gpus") or []:
        if isinstance(gpu, dict) and isinstance(gpu.get("index"), int):
            uuid = gpu.get("uuid")
            if isinstance(uuid, str) and uuid:
                found[gpu["index"]] = uuid
    return found


# The workload's final training loss (checks.workload records it under this name)
LOSS_METRIC = "llm_final_loss"


def _figures(report: RunReport) -> dict[Key, tuple[float, str, str]]:
    """(metric, GPU, model) -> (value, unit, the device's label in this run), for figures with a
    direction. A GPU's figure is keyed by its UUID where the capture names it (issue #31 §4): a
    board swapped in under the same index is not compared with the one it replaced, and a GPU
    that moved here keeps its own past."""
    uuids = _uuids(report)
    figures = {}
    for check in report.checks:
        if check.name == CHECK_NAME:
            continue
        # a changed training run's loss (fewer steps, another learning rate: the workload's
        # convergence NOT JUDGED) ends where its own schedule leaves it: no picture of the node,
        # nor one to hold a run of the preset's schedule to (train llm --steps 30 read as its
        # final loss 113% worse than the node's 500-step runs)
        unjudged_loss = check.details.get("convergence_judged") is False
        for m in check.measurements:
            if higher_is_better(m.unit) is None or not math.isfinite(m.value):
                continue  # no direction, or a failed (NaN) or absurd (infinite) figure
            if unjudged_loss and m.name == LOSS_METRIC:
                continue
            label = device_label(m.device_index)
            gpu = uuids.get(m.device_index, label) if m.device_index is not None else label
            figures[(f"{check.name}/{m.name}", gpu, m.device_name or "")] = (m.value, m.unit, label)
    return figures


def compare_with_own_history(
    report: RunReport,
    history: History,
    *,
    tolerance_percent: float | None = None,
    comparable_runs: int = DEFAULT_COMPARABLE_RUNS,
) -> SelfComparison:
    """`report`'s figures against the median of the node's last `comparable_runs` comparable
    runs in `history` (the run itself not yet recorded there). Tolerance: `default_tolerance`
    of the run's mode unless given."""
    if tolerance_percent is None:
        tolerance_percent = default_tolerance(report.device_mode)

    def nothing(why: str) -> SelfComparison:
        return SelfComparison(tolerance_percent, [], [], why)

    node = node_name_of(report)
    if node is None:
        return nothing("the run captured no node name: no history of this node to compare with")
    kind = f"{report.command} {report.level} ({report.verdict.mode.upper()} mode)"

    def runs(oldest_first: bool) -> list[Any]:
        return history.list_runs(
            node=node,
            command=report.command,
            level=report.level,
            device_mode=report.device_mode,
            passed_only=True,
            limit=_SCAN_RUNS,
            oldest_first=oldest_first,
            # a run dated in the future (a fast clock) is no picture of the past
            started_by=time.time() + FUTURE_SKEW_SECONDS,
        )

    stack = stack_sha256(report.environment)
    newest = _comparable(history, runs(oldest_first=False), stack, comparable_runs)
    chosen = newest.chosen
    first = _comparable(history, runs(oldest_first=True), stack, comparable_runs).chosen
    recent = _medians(chosen)
    baseline = _medians(first) if chosen else {}
    now = _figures(report)
    moved = _moved_here(
        history, report, node, stack, comparable_runs, {k for k in now if k not in recent}
    )
    for found in moved:
        recent.update(found.recent)
        baseline.update(found.baseline)
    if not chosen and not moved:
        if not newest.candidates:
            return nothing(f"first passing {kind} run on {node}: nothing to compare with yet")
        return nothing(
            f"no passing {kind} run on {node} with this software stack and GPU models "
            f"({len(newest.candidates)} on another: the stack changed; `gpuaccept history "
            "compare` shows the runs either side)"
        )
    hosts = {found.uuid: found.hosts for found in moved}
    figures = [
        SelfFigure(
            key[0],
            label if key[1] not in hosts else f"{label} ({key[1]}, its past on {hosts[key[1]]})",
            unit,
            value,
            statistics.median(recent[key]),
            len(recent[key]),
            statistics.median(baseline[key]) if baseline.get(key) else None,
            len(baseline.get(key, [])),
        )
        for key, (value, unit, label) in sorted(now.items())
        if recent.get(key)
    ]
    if not figures:
        return nothing(f"no figure of this run was measured by the earlier {kind} runs")
    return SelfComparison(
        tolerance_percent,
        [run_id for run_id, _ in chosen],
        figures,
        elsewhere_run_ids=sorted({run_id for found in moved for run_id in found.run_ids}),
    )


@dataclass(frozen=True)
class _MovedGpu:
    """A GPU of this run whose past runs were on other hosts (it moved here)."""

    uuid: str
    hosts: str
    run_ids: list[int]
    recent: dict[Key, list[float]]
    baseline: dict[Key, list[float]]


def _moved_here(
    history: History,
    report: RunReport,
    node: str,
    stack: str,
    comparable_runs: int,
    uncompared: set[Key],
) -> list[_MovedGpu]:
    """For each GPU whose figures this node's past lacks, its comparable runs on other hosts
    (found through the history's UUID index, bounded): a GPU keeps its past when it moves."""
    found = []
    for uuid in sorted({key[1] for key in uncompared if key[1].startswith("GPU-")}):
        rows = [
            row
            for row, _index, _serial in history.gpu_runs(uuid, limit=_SCAN_RUNS)
            if row.hostname != node
            and (row.command, row.level, row.device_mode)
            == (report.command, report.level, report.device_mode)
            and datetime.fromisoformat(row.started_at).timestamp()
            <= time.time() + FUTURE_SKEW_SECONDS
        ]
        recent = _comparable(history, rows, stack, comparable_runs).chosen
        if not recent:
            continue
        first = _comparable(history, rows[::-1], stack, comparable_runs).chosen
        mine = {key for key in uncompared if key[1] == uuid}
        found.append(
            _MovedGpu(
                uuid,
                ", ".join(dict.fromkeys(str(past.hostname) for _, past in recent)),
                [run_id for run_id, _ in recent],
                {k: v for k, v in _medians(recent).items() if k in mine},
                {k: v for k, v in _medians(first).items() if k in mine},
            )
        )
    return [m for m in found if m.recent]


@dataclass(frozen=True)
class _Comparable:
    candidates: list[Any]
    chosen: list[tuple[int, RunReport]]


def _comparable(history: History, rows: list[Any], stack: str, wanted: int) -> _Comparable:
    """The runs (of `rows`, in order) that passed on this software stack: at most `wanted`."""
    candidates = [run for run in rows if run.verdict.outcome is Outcome.PASS]
    chosen: list[tuple[int, RunReport]] = []  # (run id, its report), read once
    for run in candidates:
        past = history.report(run.id)
        if stack_sha256(past.environment) == stack:
            chosen.append((run.id, past))
            if len(chosen) == wanted:
                break
    return _Comparable(candidates, chosen)


def _medians(runs: list[tuple[int, RunReport]]) -> dict[Key, list[float]]:
    values: dict[Key, list[float]] = defaultdict(list)
    for _run_id, past in runs:
        for key, (value, _unit, _label) in _figures(past).items():
            values[key].append(value)
    return values


def with_check(
    report: RunReport, check: CheckResult, rules: ActionRules | None = None
) -> RunReport:
    """`report` (judged, not interrupted) with `check` added, its verdict judged again and its
    actions planned again with `rules`, the tables the run was planned with (built-in: None)."""
    from gpuaccept.actions import builtin_rules, plan_actions
    from gpuaccept.verdict import judge_run

    if not report.verdict.judged or report.verdict.outcome is Outcome.INTERRUPTED:
        raise ValueError("only a judged, uninterrupted run is compared with its history")
    planned = report.actions.rules if report.actions is not None else None
    if planned is not None and planned != (rules or builtin_rules()).label:
        raise ValueError(f"the run's actions were planned with {planned}: pass those rules")
    checks = [*report.checks, check]
    verdict = judge_run(
        checks, kind=report.command, device_mode=report.device_mode, level=report.level
    )
    return report.model_copy(
        update={"checks": checks, "verdict": verdict, "actions": plan_actions(checks, rules)}
    )
