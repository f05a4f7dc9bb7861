"""A small fleet's node_exporter textfile directory, written by gpuaccept's own writers: each
node's newest runs through `gpuaccept report --prometheus` (commands.report.run) and what
`act slurm` decided through act.record.write_outputs, as the dashboard's docs tell an operator
to wire them (docs/dashboards.md)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path

from gpuaccept.act.policy import Decision
from gpuaccept.act.record import acted, write_outputs
from gpuaccept.commands.output import Collected
from gpuaccept.commands.report import ReportRequest
from gpuaccept.commands.report import run as report_run
from gpuaccept.report.json_report import write_json_report
from gpuaccept.results import RunReport
from tests.act.test_offenders import UUID, _run
from tests.report.test_writers import sample_report
from tests.run_reports import gpu_report, history_with, rejudged, soft_failure

GPU03 = [(40, True), (30, False), (20, True), (10, False), (1, False)]  # (hours ago, passed)
GPU04 = [(30, False), (4, True)]  # (hours ago, a row remapping pending on its GPU)
H100 = [790.0, 785.0, 792.0, 788.0, 795.0, 781.0, 790.0, 786.0]  # floor 640 (800 x 0.8)


@dataclass(frozen=True)
class SampleFleet:
    """What the files say, for the tests to hold the queries' answers to."""

    directory: Path
    passing: tuple[str, ...]  # newest GPU accept passed
    failing: dict[str, str]  # newest GPU accept failed: node -> its recommended action
    stale: tuple[str, ...]  # newest accept older than 7 days
    lagging: tuple[tuple[str, str, str], ...]  # (node, gpu, metric) below the floor
    nearest: tuple[str, str]  # (node, gpu) of the passing figure nearest its floor
    refused: dict[str, str]  # node -> the guard that refused to drain it
    drained: tuple[str, ...]
    mtbi_hours: dict[str, float]  # node -> its mean time between incidents in the history
    gpu_incidents: dict[str, int]  # GPU UUID -> its incidents


def _at(report: RunReport, started: datetime, node: str | None = None) -> RunReport:
    update: dict[str, object] = {
        "started_at": started.isoformat(),
        "finished_at": (started + timedelta(seconds=report.duration_seconds)).isoformat(),
    }
    if node is not None:
        update["environment"] = {**report.environment, "system": {"hostname": node}}
    return rejudged(report, **update)


def write_sample_fleet(directory: Path, now: datetime) -> SampleFleet:
    """Six nodes' textfile metrics in `directory` (one file per node and kind of run, as the docs
    say), their runs started relative to `now`."""
    reports = {
        "gpu01": _at(gpu_report("gpu01", H100), now - timedelta(hours=2)),
        # passes, one GPU 2% above its floor: the first the "closest to the floor" panel shows
        "gpu02": _at(gpu_report("gpu02", [*H100[:5], 653.0, *H100[6:]]), now - timedelta(hours=3)),
        # a soft failure (below the floor once): rerun
        "gpu03": _at(soft_failure("gpu03", 0), now - timedelta(hours=1)),
        # a figure below its floor and a check that errored: drain
        "gpu04": _at(sample_report(), now - timedelta(hours=4), node="gpu04"),
        # passed, but ten days ago
        "gpu05": _at(gpu_report("gpu05", H100), now - timedelta(days=10)),
        # the CPU twins: no GPU acceptance, left out of the node counts
        "gpu06": _at(
            rejudged(gpu_report("gpu06", H100[:1]), device_mode="cpu"), now - timedelta(hours=5)
        ),
    }
    sources = directory.parent / f"{directory.name}-reports"
    for node, report in reports.items():
        source = write_json_report(report, sources)
        target = directory / f"gpuaccept-{report.command}-{report.level}.{node}.prom"
        result = report_run(ReportRequest(source=str(source), prometheus=target), Collected())
        assert result.exit_code == 0, node
    bench = _at(gpu_report("gpu01", H100, command="bench"), now - timedelta(hours=6))
    source = write_json_report(bench, sources)
    report_run(
        ReportRequest(source=str(source), prometheus=directory / "gpuaccept-bench.gpu01.prom"),
        Collected(),
    )
    breaker = "the breaker is open: 1 of 6 nodes drained this hour"
    decided = [
        acted(
            "gpu04", "fail", "standard", "drain", Decision("drain", "gpu04", "failed", "gpuaccept")
        ),
        acted(
            "gpu03",
            "fail",
            "quick",
            "rerun",
            Decision("refused", "gpu03", breaker, guard="breaker"),
        ),
        acted("gpu01", "pass", "standard", "none", Decision("none", "gpu01", "in service")),
    ]
    write_outputs(decided, "act slurm", "enforce", now, None, directory / "gpuaccept-act.prom")
    # The history the fleet's MTBI is counted from, exported by `report --fleet --prometheus`
    # on the host that reads it: gpu03 failed twice in 39 h, gpu04's GPU was named for reset-gpu.
    runs = [_at(soft_failure("gpu03", 0, passed=p), now - timedelta(hours=h)) for h, p in GPU03]
    runs += [_at(gpu_report("gpu01", H100), now - timedelta(hours=h)) for h in (40, 2)]
    runs += [_at(_run("gpu04", 0, remap=r), now - timedelta(hours=h)) for h, r in GPU04]
    history = history_with(sources / "history.sqlite", *runs)
    fleet = ReportRequest(
        source=None, fleet=True, history=str(history), prometheus=directory / "gpuaccept-fleet.prom"
    )
    assert report_run(fleet, Collected()).exit_code == 0
    return SampleFleet(
        directory=directory,
        passing=("gpu01", "gpu02", "gpu05"),
        failing={"gpu03": "rerun", "gpu04": "drain"},
        stale=("gpu05",),
        lagging=(("gpu03", "0", "matmul_bf16_tflops"), ("gpu04", "3", "matmul_bf16_tflops")),
        nearest=("gpu02", "5"),
        refused={"gpu03": "breaker"},
        drained=("gpu04",),
        mtbi_hours={"gpu03": 19.5, "gpu04": 26.0},
        gpu_incidents={UUID: 1},
    )
