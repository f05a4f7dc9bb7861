"""`sweep --scheduler kubernetes` as library calls (issue #54 §3), through the stand-in for the
Kubernetes client (tests/fake_kube) over one state file: nodes, pods and the sweep's Jobs. The
round is the same pure function as Slurm's (tests/act/test_sweep_machine.py holds its cap);
asserted here: what the cluster's state reads as, and the Job each due node gets."""

from __future__ import annotations

import json
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from gpuaccept.commands.output import Collected
from gpuaccept.commands.sweep import SweepRequest, run
from gpuaccept.errors import EnvironmentProblem, InputError
from gpuaccept.report.node_verdict import TAINT_KEY
from tests.run_reports import gpu_report, rejudged

FAKE_CLIENT = Path(__file__).resolve().parents[1] / "fake_kube"
TEMPLATE = Path(__file__).resolve().parents[2] / "k8s" / "sweep-job.yaml"
POOL_LABEL = "nvidia.com/gpu.product"


def _node(name: str, pool: str = "H100", **spec: Any) -> dict[str, Any]:
    labels = {POOL_LABEL: pool}
    return {"kind": "Node", "metadata": {"name": name, "labels": labels}, "spec": spec}


def _pod(node: str, gpus: str = "8", phase: str = "Running", **labels: str) -> dict[str, Any]:
    container = {"name": "c", "resources": {"limits": {"nvidia.com/gpu": gpus}}}
    return {
        "metadata": {"labels": labels},
        "spec": {"nodeName": node, "containers": [container]},
        "status": {"phase": phase},
    }


def _job(node: str, ended: bool = False) -> dict[str, Any]:
    labels = {"app.kubernetes.io/component": "sweep", "gpuaccept.io/sweep-node": node}
    conditions = [{"type": "Complete", "status": "True"}] if ended else []
    metadata = {"name": f"gpuaccept-sweep-{node}", "namespace": "default", "labels": labels}
    return {"metadata": metadata, "status": {"conditions": conditions}}


@pytest.fixture
def cluster(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    nodes = [
        _node("gpu00"),  # idle, never tested: due
        _node("gpu01"),  # a user's GPU pod: busy
        _node("gpu02", unschedulable=True),  # cordoned by someone else
        _node("gpu03", taints=[{"key": TAINT_KEY, "value": "x", "effect": "NoSchedule"}]),
        _node("gpu04"),  # a sweep Job of it not ended: under test
        _node("gpu05"),  # its sweep Job ended; tested 1 h ago by its report
        _node("gpu06", pool="A100"),  # due, in the other pool
        _node("gpu07"),  # only a CPU pod and an ended GPU pod: idle, due
    ]
    pods = [
        _pod("gpu01"),
        _pod("gpu07", gpus="0"),
        _pod("gpu07", phase="Succeeded"),
        # the sweep's own pod on gpu04 is not a user's
        _pod("gpu04", **{"app.kubernetes.io/component": "sweep"}),
    ]
    state = tmp_path / "cluster.json"
    document = {
        "kind": "List",
        "items": nodes,
        "pods": pods,
        "jobs": [_job("gpu04"), _job("gpu05", True)],
    }
    state.write_text(json.dumps(document))
    monkeypatch.setenv("FAKE_KUBE_STATE", str(state))
    monkeypatch.syspath_prepend(str(FAKE_CLIENT))
    for name in [m for m in sys.modules if m == "kubernetes" or m.startswith("kubernetes.")]:
        monkeypatch.delitem(sys.modules, name)  # a real client imported before: the stand-in
    results = tmp_path / "results" / "gpu05"  # one directory per node, as the Job mounts it
    results.mkdir(parents=True)
    an_hour_ago = datetime.now(UTC) - timedelta(hours=1)
    report = rejudged(
        gpu_report("gpu05", [790.0]),
        started_at=an_hour_ago.isoformat(),
        finished_at=(an_hour_ago + timedelta(minutes=1)).isoformat(),
    )
    (results / "accept-gpu05-x.json").write_text(report.model_dump_json())
    return state


def _request(tmp_path: Path, **changes: Any) -> SweepRequest:
    values: dict[str, Any] = {
        "results": tmp_path / "results",
        "history": str(tmp_path / "history.sqlite"),
        "scheduler": "kubernetes",
        "template": TEMPLATE,
        "max_nodes": 3,
        "max_per_pool": 2,
    }
    return SweepRequest(**(values | changes))


def _jobs(state: Path) -> list[dict[str, Any]]:
    return list(json.loads(state.read_text())["jobs"])


def test_a_round_creates_a_job_for_each_due_node_under_the_caps(
    cluster: Path, tmp_path: Path
) -> None:
    out = Collected()
    result = run(_request(tmp_path), out)
    said = out.text()
    # the fleet's cap of 3: gpu04 under test, then gpu00 and gpu06; gpu07 waits its turn
    assert list(result.submitted) == ["gpu00", "gpu06"], said
    assert "[SWEEP] imported 1 new report(s) into the history\n" in said
    assert "[SWEEP] gpu01: skip: busy: jobs run on it\n" in said
    assert "[SWEEP] gpu02: skip: held: cordoned (spec.unschedulable)\n" in said
    assert "[SWEEP] gpu03: skip: held: tainted unfit by gpuaccept" in said
    assert "[SWEEP] gpu04: skip: under test" in said
    assert "[SWEEP] gpu05: skip: tested 1.0 h ago (cadence 24 h)\n" in said
    assert "[SWEEP] gpu07: skip: due, but the fleet's cap holds: 3 of 3 under test\n" in said
    made = _jobs(cluster)[2:]
    assert [j["metadata"]["labels"]["gpuaccept.io/sweep-node"] for j in made] == ["gpu00", "gpu06"]
    job = made[0]
    assert job["metadata"]["name"].startswith("gpuaccept-sweep-")
    assert job["metadata"]["namespace"] == "default"
    pod = job["spec"]["template"]
    assert pod["metadata"]["labels"]["gpuaccept.io/sweep-node"] == "gpu00"
    [term] = pod["spec"]["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"
    ]["nodeSelectorTerms"]
    assert term == {
        "matchFields": [{"key": "metadata.name", "operator": "In", "values": ["gpu00"]}]
    }
    assert pod["spec"]["priorityClassName"] == "gpuaccept-sweep"  # low, preemptible
    args = pod["spec"]["containers"][0]["args"]
    assert args[args.index("--level") + 1] == "quick"


def test_a_pool_cap_and_the_level_reach_the_jobs(cluster: Path, tmp_path: Path) -> None:
    out = Collected()
    result = run(_request(tmp_path, max_nodes=8, max_per_pool=1, level="standard"), out)
    # one a pool: gpu04's Job fills H100's, so only A100's gpu06 gets one
    assert list(result.submitted) == ["gpu06"]
    assert "[SWEEP] gpu00: skip: due, but pool H100's cap holds: 1 of 1\n" in out.text()
    args = _jobs(cluster)[-1]["spec"]["template"]["spec"]["containers"][0]["args"]
    assert args[args.index("--level") + 1] == "standard"


def test_the_next_round_finds_its_jobs_and_creates_no_more(cluster: Path, tmp_path: Path) -> None:
    run(_request(tmp_path), Collected())
    out = Collected()
    assert run(_request(tmp_path), out).submitted == {}
    assert "[SWEEP] gpu00: skip: under test" in out.text()


def test_an_api_that_refuses_is_one_line(
    cluster: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_KUBE_CREATE_DENIED", "1")
    with pytest.raises(EnvironmentProblem, match=r"refused or did not answer: HTTP 403 Forbidden$"):
        run(_request(tmp_path), Collected())


@pytest.mark.parametrize(
    ("changes", "said"),
    [
        ({"template": None}, "--template: give the sweep's Job template"),
        ({"qos": "low"}, "--qos and --sbatch-option are Slurm's"),
        ({"namespace": "Not_A_Namespace"}, "--namespace 'Not_A_Namespace': give a namespace"),
        ({"pool_label": "a b"}, "--pool-label 'a b': give a node label's key"),
        ({"scheduler": "nomad"}, "--scheduler 'nomad': give one of slurm, kubernetes"),
    ],
)
def test_a_request_out_of_its_bounds_is_refused_in_one_line(
    tmp_path: Path, changes: dict[str, Any], said: str
) -> None:
    with pytest.raises(InputError) as refused:
        _request(tmp_path, **changes)
    assert str(refused.value).startswith(said)


def test_a_template_without_one_job_is_refused_before_the_cluster_is_asked(
    tmp_path: Path,
) -> None:
    template = tmp_path / "two.yaml"
    template.write_text("kind: ConfigMap\n---\nkind: Service\n")
    with pytest.raises(InputError, match=r"holds 0 Job\(s\); give a manifest with one$"):
        run(_request(tmp_path, template=template), Collected())


def test_no_client_is_said_as_the_sweeps_need_not_node_verdicts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # it said "--apply needs ... (or run the printed kubectl commands)": the sweep has no --apply
    # and prints no commands
    (tmp_path / "results").mkdir()
    monkeypatch.setitem(sys.modules, "kubernetes", None)  # import kubernetes: ImportError
    with pytest.raises(EnvironmentProblem) as said:
        run(_request(tmp_path, act="shadow"), Collected())
    assert str(said.value) == (
        "the Kubernetes sweep (--scheduler kubernetes) needs the Kubernetes Python client: "
        "pip install kubernetes"
    )
