"""`history fleet`: the newest accept run per node, the GPUs that lag their model's fleet, the
nodes slower than their own past, silent data corruption, and the mean time between incidents.

The fleet needs a person (exit 1) when a node's newest accept did not pass (failed, judged
nothing, or was interrupted), a GPU lags, a node is slower than its own history, or a burn-in
found GPUs disagreeing; benchmark and training runs are not verdicts on a node.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from gpuaccept.commands.history.common import opened, write_table

if TYPE_CHECKING:
    from gpuaccept.commands.output import Output
    from gpuaccept.compare.fleet import FleetMtbi, FleetState

# how the fleet is judged unless told otherwise: `history fleet`'s and `report --fleet`'s
TOLERANCE_PERCENT = 10.0
MIN_GPUS = 3
MTBI_DAYS = 30.0


@dataclass(frozen=True)
class FleetJudging:
    """How the fleet is judged (--tolerance, --min-gpus, --mtbi-days)."""

    tolerance_percent: float = TOLERANCE_PERCENT  # a GPU this much worse than its model lags
    min_gpus: int = MIN_GPUS  # GPUs of a model needed before its median is trusted
    mtbi_days: float = MTBI_DAYS  # the MTBI's window, ending at the history's newest run


@dataclass(frozen=True)
class FleetRequest:
    history: str | None = None
    judging: FleetJudging = field(default_factory=FleetJudging)
    as_json: bool = False

    def __post_init__(self) -> None:
        from gpuaccept.compare.fleet import check_window

        check_window(self.judging.mtbi_days)


@dataclass(frozen=True)
class FleetResult:
    state: FleetState
    exit_code: int  # 1 when the fleet needs a person (FleetState.attention)


def run(request: FleetRequest, out: Output) -> FleetResult:
    from gpuaccept.compare.fleet import fleet_state

    judging = request.judging
    with opened(request.history) as store:
        state = fleet_state(
            store,
            tolerance_percent=judging.tolerance_percent,
            min_samples=judging.min_gpus,
            mtbi_days=judging.mtbi_days,
        )
    if request.as_json:
        # one line: Python's indenting encoder is its slow one (a fleet of 10,000 nodes: 2.8 s
        # of 3.5 against 0.2 s, benchmarks/history_scale.py)
        out.line(json.dumps(_as_json(state, judging.tolerance_percent)))
    else:
        _write_view(state, judging.tolerance_percent, out)
    return FleetResult(state, 1 if state.attention else 0)


def _write_view(state: FleetState, tolerance: float, out: Output) -> None:
    from gpuaccept.results import device_label

    view = state.view
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
            for run in view.nodes
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


def _as_json(state: FleetState, tolerance: float) -> dict[str, object]:
    view = state.view
    return {
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
            for run in view.nodes
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
