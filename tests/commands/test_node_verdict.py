"""`node-verdict` as a library call, without Typer (issue #51): commands.node_verdict's round in
report mode (kubectl commands, nothing read) and against a cluster's nodes as `kubectl get nodes
-o json` prints them (the guards decide; the breaker refuses with exit 4)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpuaccept.commands.act import REFUSED_EXIT, Guarding
from gpuaccept.commands.node_verdict import NodeVerdictRequest, run_node_verdict
from gpuaccept.commands.output import Collected
from gpuaccept.errors import InputError
from tests.run_reports import gpu_report, rejudged


def _failing(tmp_path: Path, node: str, torch: str = "2.13.0") -> Path:
    """A hard failure (compute, recommended: drain) of `node`, named as the manifests name it."""
    report = gpu_report(
        node, [500.0], passed=False, extra_environment={"torch": {"version": torch}}
    )
    named = rejudged(report, environment={**report.environment, "scheduler": {"node_name": node}})
    path = tmp_path / f"{node}-{torch}.json"
    path.write_text(named.model_dump_json())
    return path


def _cluster(tmp_path: Path, nodes: int) -> Path:
    items = [
        {"kind": "Node", "metadata": {"name": f"gpu{i:02d}", "labels": {}, "annotations": {}}}
        for i in range(nodes)
    ]
    path = tmp_path / "nodes.json"
    path.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": items}))
    return path


def test_report_mode_prints_the_verdicts_kubectl_commands(tmp_path: Path) -> None:
    out = Collected()
    result = run_node_verdict(NodeVerdictRequest(reports=(_failing(tmp_path, "gpu00"),)), out)
    assert (result.exit_code, result.mode, result.decided) == (0, "report", None)
    [verdict] = result.applied
    assert (verdict.node, verdict.verdict) == ("gpu00", "fail")
    commands = out.text().splitlines()
    assert commands
    assert all(line.startswith("kubectl ") for line in commands)
    assert any("gpuaccept.io/unfit" in line and "NoSchedule" in line for line in commands)


def test_the_breaker_taints_one_node_of_a_small_pool_and_refuses_the_next(tmp_path: Path) -> None:
    cluster = _cluster(tmp_path, 4)
    reports = (_failing(tmp_path, "gpu00"), _failing(tmp_path, "gpu01", torch="2.12.0"))
    out = Collected()
    result = run_node_verdict(
        NodeVerdictRequest(reports=reports, cluster=cluster, guarding=Guarding(debounce=1)), out
    )
    assert (result.exit_code, result.mode) == (REFUSED_EXIT, "enforce")
    assert result.decided is not None
    actions = {done.change.node: done.decision.action for done in result.decided}
    assert sorted(actions.values()) == ["drain", "refused"]
    refused = next(node for node, action in actions.items() if action == "refused")
    assert any(
        stream == "err" and line.startswith(f"node-verdict: {refused}: ")
        for stream, line in out.lines
    )


def test_a_cluster_and_the_api_at_once_is_refused(tmp_path: Path) -> None:
    request = NodeVerdictRequest(
        reports=(_failing(tmp_path, "gpu00"),), apply=True, cluster=_cluster(tmp_path, 1)
    )
    with pytest.raises(InputError) as refused:
        run_node_verdict(request, Collected())
    assert str(refused.value) == (
        "--apply reads the cluster from the API: give it or --cluster, not both"
    )


def test_a_report_given_twice_is_applied_once_and_not_called_superseded(tmp_path: Path) -> None:
    """The same file named twice (or a copy) is one run, not an older one: said as such (it was
    "superseded by a newer one"; the operator review of issue #51)."""

    report = tmp_path / "r.json"
    report.write_text(
        rejudged(
            gpu_report("n1", [800.0]), environment={"scheduler": {"node_name": "gpu017"}}
        ).model_dump_json()
    )
    out = Collected()
    result = run_node_verdict(NodeVerdictRequest(reports=(report, report)), out)
    assert result.exit_code == 0
    said = out.text("err")
    assert "superseded" not in said
    assert "# gpu017: the report of " in said
    assert "was given more than once; applied once" in said
    assert out.text().count("kubectl label node gpu017 ") == 1
