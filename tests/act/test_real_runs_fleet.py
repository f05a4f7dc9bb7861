"""The guards over reports of real `gpuaccept accept` runs (issue #31 §6): the CLI run on this
machine's CPU with faults injected through a kernel-log file (GPUACCEPT_KERNEL_LOG), each report
then named for one node of the 50-node stand-in Slurm or Kubernetes pool (its hostname, scheduler
node name and start: the run's checks, verdict, actions and stack digest are the run's own).

- XID 79 (the GPU fell off the bus; NVIDIA's catalogue: RESTART_BM, so reboot-node): a hard
  fault; on all 50 nodes at once Slurm drains one (the breaker) and Kubernetes taints none (one
  round sees the regression of the stack);
- XID 94 (a contained ECC error; the catalogue: RESTART_APP, so rerun): soft: drained on its
  second run in a row, not its first;
- XID 13 (an application's graphics exception): a warning: the run passes (in CPU mode a pass is
  no node acceptance: nothing changes);
- shadow mode drains nothing and says what it would do.

What a CPU run cannot give: a pass that returns a node (a CPU pass is not a node acceptance) and a
finding that names a GPU by its UUID (the CPU twins watch no NVML); those paths are held by
GPU-form reports in test_fleet.py, test_offenders.py and test_kubernetes_fleet.py.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gpuaccept.cli import app
from gpuaccept.record.environment import stack_sha256
from gpuaccept.report.reading import load_report
from tests.kernel_stamps import recent

XID = "[  100.000000] NVRM: Xid (PCI:0000:cb:00): {}, pid=4242, name=python3, injected by a test"


def _real_run(directory: Path, xid: int, monkeypatch: pytest.MonkeyPatch) -> Path:
    """`gpuaccept accept --level quick --only events` on the CPU with XID `xid` in the kernel
    log; the JSON report it wrote."""
    log = directory / f"kernel-{xid}.log"
    log.write_text("[    0.000000] Linux version 6.1.0\n" + recent(XID.format(xid)) + "\n")
    out = directory / f"reports-{xid}"
    monkeypatch.setenv("GPUACCEPT_KERNEL_LOG", str(log))
    result = CliRunner().invoke(
        app,
        [
            "accept",
            "--device",
            "cpu",
            "--no-history",
            "--level",
            "quick",
            "--only",
            "events",
            "--report-dir",
            str(out),
        ],
    )
    assert result.exit_code in (0, 1), result.output
    (report,) = out.iterdir()
    return report


@pytest.fixture(scope="module")
def real(tmp_path_factory: pytest.TempPathFactory) -> dict[int, Path]:
    """One real run per injected XID (each about a second), shared by the tests."""
    directory = tmp_path_factory.mktemp("real-runs")
    with pytest.MonkeyPatch.context() as monkeypatch:
        return {xid: _real_run(directory, xid, monkeypatch) for xid in (79, 94, 13)}


def _as_node(real_report: Path, node: str, into: Path, hours: float = 0.0) -> Path:
    """The real run's report, named for `node` and started `hours` after now (less a minute)."""
    document = json.loads(real_report.read_text())
    start = datetime.now().astimezone() - timedelta(minutes=1) + timedelta(hours=hours)
    length = timedelta(seconds=document["duration_seconds"])
    document["started_at"] = start.isoformat()
    document["finished_at"] = (start + length).isoformat()
    environment = document["environment"]
    environment["system"]["hostname"] = node
    environment["scheduler"] = {**(environment.get("scheduler") or {}), "node_name": node}
    environment["node"] = {"name": node, "source": "GPUACCEPT_NODE_NAME"}  # its one name
    into.mkdir(parents=True, exist_ok=True)
    path = into / f"gpuaccept-accept-{node}-{start:%Y%m%dT%H%M%S}.json"
    path.write_text(json.dumps(document))
    return path


def _slurm(report: Path, node: str, *more: str) -> object:
    return CliRunner().invoke(app, ["act", "slurm", str(report), "--node", node, *more])


def _states(fleet: Path) -> dict[str, dict[str, str]]:
    return dict(json.loads(fleet.read_text())["nodes"])


def test_the_real_runs_say_what_the_catalogue_says(real: dict[int, Path]) -> None:
    reports = {xid: load_report(path) for xid, path in real.items()}
    assert reports[79].verdict.failed_checks == ["events"]
    assert reports[79].action_plan.action.value == "reboot-node"
    assert reports[94].action_plan.action.value == "rerun"
    assert reports[13].verdict.outcome.value == "pass"
    assert reports[13].action_plan.action.value == "monitor"


def test_xid_79_on_every_node_drains_one_in_slurm(
    real: dict[int, Path], fleet: Path, tmp_path: Path
) -> None:
    codes = [
        _slurm(_as_node(real[79], f"gpu{i:02d}", tmp_path / f"gpu{i:02d}"), f"gpu{i:02d}").exit_code
        for i in range(50)
    ]
    assert codes == [1] + [4] * 49
    states = _states(fleet)
    drained = [name for name, n in states.items() if "drain" in n["state"].split("+")]
    assert drained == ["gpu00"]
    stack = stack_sha256(load_report(real[79]).environment)[:8]
    assert states["gpu00"]["reason"] == f"gpuaccept quick: reboot-node: events [stack {stack}]"


def test_xid_79_on_every_node_in_one_kubernetes_round_taints_none(
    real: dict[int, Path], tmp_path: Path
) -> None:
    nodes = [{"kind": "Node", "metadata": {"name": f"gpu{i:02d}"}, "spec": {}} for i in range(50)]
    cluster = tmp_path / "nodes.json"
    cluster.write_text(json.dumps({"kind": "List", "items": nodes}))
    reports = [_as_node(real[79], f"gpu{i:02d}", tmp_path / "k8s") for i in range(50)]
    result = CliRunner().invoke(
        app, ["node-verdict", *map(str, reports), "--cluster", str(cluster)]
    )
    assert result.exit_code == 4, result.output
    assert "kubectl taint" not in result.stdout
    assert "gpuaccept.io/action=reboot-node" in result.stdout
    alerts = [line for line in result.stderr.splitlines() if line.startswith("node-verdict:")]
    assert len(alerts) == 1
    assert "50 node(s) failed alike" in alerts[0]


def test_a_soft_xid_drains_on_its_second_run_in_a_row(
    real: dict[int, Path], fleet: Path, tmp_path: Path
) -> None:
    results = tmp_path / "gpu07"
    first = _slurm(_as_node(real[94], "gpu07", results, hours=-1), "gpu07")
    assert first.exit_code == 1
    assert "NOT drained until it fails 2 runs in a row" in first.stdout
    assert _states(fleet)["gpu07"]["state"] == "idle"
    second = _slurm(_as_node(real[94], "gpu07", results), "gpu07")
    assert second.exit_code == 1, second.output
    assert _states(fleet)["gpu07"]["reason"].startswith("gpuaccept quick: rerun: events [stack ")


def test_a_warning_changes_nothing_and_shadow_mode_drains_nothing(
    real: dict[int, Path], fleet: Path, tmp_path: Path
) -> None:
    before = fleet.read_text()
    warned = _slurm(_as_node(real[13], "gpu03", tmp_path / "gpu03"), "gpu03")
    assert warned.exit_code == 0
    assert "the run judged nothing: nothing is changed" in warned.stdout  # CPU mode
    shadow = _slurm(_as_node(real[79], "gpu04", tmp_path / "gpu04"), "gpu04", "--act", "shadow")
    assert shadow.exit_code == 1
    assert "[ACT] shadow: gpu04: would drain: failed: drained (gpuaccept quick: reboot-node" in (
        shadow.stdout
    )
    assert fleet.read_text() == before
