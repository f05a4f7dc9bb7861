"""A burn-in's GPUs against the same GPU model on other nodes, from the history (issue #23).

Within a node a straggler is judged against the node's median (`burnin.window`); a node whose
every GPU is equally slow passes that test. Across nodes, each GPU's median rate per stressor is
compared with the newest figure of every GPU of the same model on the *other* nodes the history
holds, from burn-ins that passed on the GPU: a GPU more than the straggler tolerance below their
median is a straggler of the fleet (the same 10% as within a node: gpu-fryer's, cited in
`burnin.judging`). Fewer than three such GPUs make no median: the GPU is not compared, and the
check says so (SKIP when nothing was compared), never a pass.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass

from gpuaccept.record.history import History
from gpuaccept.results import CheckResult, RunReport, Status
from gpuaccept.verdict import Outcome

CHECK_NAME = "burnin-fleet"
MIN_PEERS = 3
_COMMAND = "burnin"
_CHECK = "burnin-throughput"


@dataclass(frozen=True)
class FleetFigure:
    metric: str
    gpu: str
    model: str
    value: float
    unit: str
    median: float  # of the same model's GPUs on other nodes
    peers: int

    @property
    def change_percent(self) -> float:
        return (self.value - self.median) / abs(self.median) * 100 if self.median else 0.0


def compare_with_fleet(
    report: RunReport, history: History, tolerance_percent: float
) -> CheckResult:
    """The run's per-GPU burn-in figures against the same model on other nodes."""
    if report.device_mode == "cpu":
        return _skip("CPU mode: the twin's figures are the machine's, not a GPU model's")
    host = report.hostname
    passing = {
        row.id
        for row in history.list_runs(command=_COMMAND)
        if row.verdict.outcome is Outcome.PASS and row.device_mode != "cpu"
    }
    throughput = next((c for c in report.checks if c.name == _CHECK), None)
    compared: list[FleetFigure] = []
    uncompared: set[str] = set()
    for m in throughput.measurements if throughput is not None else []:
        if m.device_index is None or m.device_name is None:
            continue
        peers = [
            p.value
            for p in history.points(f"{_CHECK}/{m.name}", command=_COMMAND, latest_only=True)
            if p.run_id in passing
            and p.hostname != host
            and p.device_name == m.device_name
            and p.unit == m.unit
        ]
        if len(peers) < MIN_PEERS:
            uncompared.add(m.device_name)
            continue
        compared.append(
            FleetFigure(
                m.name,
                f"gpu{m.device_index}",
                m.device_name,
                m.value,
                m.unit,
                statistics.median(peers),
                len(peers),
            )
        )
    details = {
        "tolerance_percent": tolerance_percent,
        "figures": [f.__dict__ | {"change_percent": f.change_percent} for f in compared],
        "not_compared": sorted(uncompared),
    }
    if not compared:
        why = (
            f"fewer than {MIN_PEERS} GPUs of {', '.join(sorted(uncompared))} on other nodes in "
            "the history's passing burn-ins"
            if uncompared
            else "no per-GPU figure to compare"
        )
        return _skip(f"not compared with other nodes: {why}", details)
    slow = [f for f in compared if f.change_percent < -tolerance_percent]
    if slow:
        return CheckResult(
            name=CHECK_NAME,
            area="BURNIN",
            status=Status.FAIL,
            message="; ".join(
                f"{f.gpu} {f.metric} {f.value:.4g} {f.unit} is {f.change_percent:+.1f}% against "
                f"the median {f.median:.4g} of {f.peers} {f.model} GPUs on other nodes"
                for f in slow
            ),
            details=details,
        )
    return CheckResult(
        name=CHECK_NAME,
        area="BURNIN",
        status=Status.PASS,
        message=f"{len(compared)} figure(s) within {tolerance_percent:g}% of the same GPU model "
        "on other nodes",
        details=details,
    )


def _skip(message: str, details: dict[str, object] | None = None) -> CheckResult:
    return CheckResult(
        name=CHECK_NAME, area="BURNIN", status=Status.SKIP, message=message, details=details or {}
    )
