"""One node, one name (issue #53 §1): the name is resolved once (the operator's, Slurm's, the
Kubernetes node's, the host's), recorded in the report, and every writer and reader takes it
from there; a name that moves to another machine, or a machine that takes a new name, is said."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from gpuaccept.cli import app
from gpuaccept.cli.render import CONSOLE
from gpuaccept.commands.recording import record_run
from gpuaccept.compare.fleet_comparison import compare_with_fleet
from gpuaccept.compare.self_comparison import compare_with_own_history
from gpuaccept.evidence import bundle as evidence
from gpuaccept.record import environment
from gpuaccept.record.identity import (
    K8S_NODE_NAME_ENV,
    NODE_NAME_SOURCES,
    identity_changes,
    node_name_of,
    resolve_node_name,
)
from gpuaccept.report.html import render_html
from gpuaccept.report.json_report import report_filename
from gpuaccept.report.markdown import render_markdown
from gpuaccept.report.node_verdict import node_of, node_verdict
from gpuaccept.report.prometheus import render_prometheus
from gpuaccept.results import RunReport
from gpuaccept.store.history import History
from tests.compare.test_fleet_comparison import burnin_report
from tests.run_reports import gpu_report, history_with, rejudged

runner = CliRunner()
POD = "accept-7f9c2"  # the host name inside a pod: the pod's, never the node's
SOURCES = [*(variable for variable, _ in NODE_NAME_SOURCES), "hostname"]
MACHINE_A = "a" * 32
MACHINE_B = "b" * 32


def _expected(source: str) -> str:
    return POD if source == "hostname" else "gpu02"


def _environ(source: str) -> dict[str, str]:
    return {} if source == "hostname" else {source: "gpu02"}


def _report(
    source: str,
    hours: float = 0.0,
    tflops: float = 800.0,
    machine: str = MACHINE_A,
    pod: str = POD,
    **kw: Any,
) -> RunReport:
    """An accept run in a pod (host name `pod`) whose name came from `source`."""
    return _named(gpu_report(POD, [tflops], hours=hours, **kw), source, pod, machine)


def _named(report: RunReport, source: str, pod: str = POD, machine: str = MACHINE_A) -> RunReport:
    """`report` as captured in `pod`, its name from `source`."""
    env = {
        **report.environment,
        "node": resolve_node_name(_environ(source), pod),
        "system": {"hostname": pod, "machine_id": machine},
    }
    return rejudged(report, environment=env)


def test_the_first_source_set_wins_and_the_host_name_is_the_last() -> None:
    everything = {variable: variable.lower() for variable, _ in NODE_NAME_SOURCES}
    assert resolve_node_name(everything, POD) == {
        "name": "gpuaccept_node_name",
        "source": "GPUACCEPT_NODE_NAME",
    }
    del everything["GPUACCEPT_NODE_NAME"]
    assert resolve_node_name(everything, POD)["source"] == "SLURMD_NODENAME"
    del everything["SLURMD_NODENAME"]
    assert resolve_node_name(everything, POD)["source"] == K8S_NODE_NAME_ENV
    assert resolve_node_name({"GPUACCEPT_NODE_NAME": "  "}, POD) == {
        "name": POD,
        "source": "hostname",
    }
    assert resolve_node_name({}, None) == {"name": None, "source": "hostname"}


def test_the_kubernetes_manifests_set_the_kubernetes_source_from_the_node() -> None:
    root = Path(__file__).resolve().parents[2]
    for manifest in sorted((root / "k8s").glob("*.yaml")):
        text = manifest.read_text()
        if "spec.nodeName" in text:
            assert f"name: {K8S_NODE_NAME_ENV}\n" in text, manifest.name


@pytest.mark.parametrize("source", SOURCES)
def test_the_capture_records_the_name_once(
    source: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    for variable, _ in NODE_NAME_SOURCES:
        monkeypatch.delenv(variable, raising=False)
    for key, value in _environ(source).items():
        monkeypatch.setenv(key, value)
    monkeypatch.setattr(environment.socket, "gethostname", lambda: POD)
    for probe in ("_git", "_cuda", "_gpus", "_torch", "_pixi", "_packages", "_container"):
        monkeypatch.setattr(environment, probe, lambda *a: None)  # only the name is asked here
    captured = environment.capture_environment()
    assert captured["node"] == {"name": _expected(source), "source": source}
    assert "node_name" not in (captured["scheduler"] or {})  # once: not again under scheduler


@pytest.mark.parametrize("source", SOURCES)
def test_every_writer_names_the_node_by_its_one_name(source: str, tmp_path: Path) -> None:
    report, name = _report(source), _expected(source)
    saved = tmp_path / report_filename(report)
    saved.write_text(report.model_dump_json())
    labels = runner.invoke(app, ["node-verdict", str(saved)])
    assert labels.stdout.startswith(f"kubectl label node {name} "), labels.output
    assert node_name_of(report) == name
    assert f"-{name}-" in report_filename(report)
    assert f'node="{name}"' in render_prometheus(report)
    assert f"node: {name}" in render_markdown(report)
    assert f"<td>{name}" in render_html(report, {})
    assert node_of(report) == name  # node-verdict and act read it through node_of
    assert node_verdict(report).node == name
    assert evidence.identity(report, node_of(report) or "")["node"] == name
    if source != "hostname":  # the host name stays beside it, so either can be found
        assert f"{name} (host {POD})" in render_markdown(report)


@pytest.fixture(params=["sqlite", "postgresql"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return str(tmp_path / "h.sqlite")
    return str(request.getfixturevalue("pg_history"))


def _stored(location: str, *reports: RunReport) -> str:
    with History.open(location) as history:
        history.append([(report, "test") for report in reports])
    return location


@pytest.mark.parametrize("source", SOURCES)
def test_the_history_and_its_readers_know_the_node_by_its_one_name(
    source: str, store: str, tmp_path: Path
) -> None:
    name = _expected(source)
    # each run in a pod of its own (as a Job's runs are), where the name is not the host's
    pods = [POD] * 3 if source == "hostname" else [f"{POD}-{i}" for i in range(3)]
    path = _stored(store, *(_report(source, hours=i, pod=pod) for i, pod in enumerate(pods)))
    with History.open(path) as history:
        assert [r.hostname for r in history.list_runs()] == [name] * 3
        assert [r.hostname for r in history.newest_runs("accept")] == [name]
        # the self-comparison finds the node's past under the same name
        slower = compare_with_own_history(_report(source, hours=9, tflops=500.0), history)
        assert slower.nothing_to_compare is None
        assert slower.drops
        assert not identity_changes(history, _report(source, hours=9))
    listed = runner.invoke(app, ["history", "list", "--history", str(path), "--node", name])
    assert listed.exit_code == 0, listed.output
    assert listed.output.count(name) == 3, listed.output
    fleet = runner.invoke(app, ["history", "fleet", "--history", str(path), "--json"])
    assert [n["node"] for n in json.loads(fleet.stdout)["nodes"]] == [name], fleet.output
    # the run's own page draws the node's trend from the runs of every pod it ran in
    own = tmp_path / "run.html"
    shown = runner.invoke(app, ["report", "3", "--html", str(own), "--history", str(path)])
    assert shown.exit_code == 0, shown.output
    assert "First run of its kind on this node" not in own.read_text()
    page = tmp_path / "fleet.html"
    drawn = runner.invoke(app, ["report", "--fleet", "--html", str(page), "--history", str(path)])
    assert drawn.exit_code == 0, drawn.output
    # the node table's rows are JSON in the page (issue #53 §2): its first cell, the node
    assert f"[[{json.dumps(name)}," in page.read_text()


def test_a_report_written_before_the_name_was_recorded_reads_as_it_did() -> None:
    old = gpu_report("n7.example", [800.0])
    assert "node" not in old.environment
    assert node_name_of(old) == "n7.example"  # its host name, as the history stored it
    # one that kept a scheduler's name (GPUACCEPT_NODE_NAME, SLURMD_NODENAME) reads that, as
    # node-verdict and act read it then
    named = rejudged(old, environment={**old.environment, "scheduler": {"node_name": "gpu07"}})
    assert node_name_of(named) == "gpu07"


def test_a_name_on_another_machine_is_said(store: str) -> None:
    path = _stored(store, _report("GPUACCEPT_NODE_NAME", machine=MACHINE_A))
    # the board was replaced (new GPUs too), the name kept
    now = _report("GPUACCEPT_NODE_NAME", hours=1, machine=MACHINE_B)
    now = rejudged(now, environment={**now.environment, "gpus": []})
    with History.open(path) as history:
        [said] = identity_changes(history, now)
    assert said.startswith(f"node gpu02 was machine-id {MACHINE_A} in run 1 and is machine-id")
    assert "another machine under the same name" in said


def test_a_machine_under_a_new_name_is_said(store: str) -> None:
    path = _stored(store, _report("hostname"))  # recorded as the pod
    renamed = _report("GPUACCEPT_NODE_NAME", hours=1)  # the same machine and GPUs, now gpu02
    with History.open(path) as history:
        [said] = identity_changes(history, renamed)
    assert said.startswith(
        f"this machine (machine-id {MACHINE_A}) was recorded as node {POD} in run 1 and is "
        "gpu02 now: renamed?"
    )
    # another machine that took over the GPUs' name is not a rename
    other = _report("GPUACCEPT_NODE_NAME", hours=1, machine=MACHINE_B)
    with History.open(path) as history:
        assert not any("renamed" in s for s in identity_changes(history, other))


def test_the_change_is_said_when_the_run_is_recorded(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = history_with(tmp_path / "h.sqlite", _report("hostname"))
    record_run(_report("SLURMD_NODENAME", hours=1), path, CONSOLE)
    out = capsys.readouterr().out
    assert f"[HISTORY] warning: this machine (machine-id {MACHINE_A}) was recorded as node" in out
    assert "[HISTORY] run 2 recorded in" in out
    record_run(
        _report("SLURMD_NODENAME", hours=2), path, CONSOLE
    )  # the same name again: nothing said
    assert "warning" not in capsys.readouterr().out


@pytest.mark.parametrize("source", SOURCES)
def test_the_fleet_comparison_leaves_out_the_nodes_own_runs_from_any_pod(
    source: str, tmp_path: Path
) -> None:
    """A burn-in's figures against other nodes': the node's own earlier run, in another pod, is
    no other node (two peers and itself would make the three a comparison needs)."""
    peers = [burnin_report(f"peer{i}", [800.0]) for i in range(2)]
    pod = POD if source == "hostname" else f"{POD}-old"
    own_before = _named(burnin_report(POD, [800.0]), source, pod)
    path = history_with(tmp_path / "h.sqlite", *peers, own_before)
    now = _named(burnin_report(POD, [800.0], hours=1), source)
    with History.open(path) as history:
        check = compare_with_fleet(now, history, tolerance_percent=10.0)
    assert check.details["figures"] == [], check.message  # two peers: not compared
    assert check.details["not_compared"] == ["NVIDIA H100 80GB HBM3"]


def test_a_damaged_past_run_is_said_and_the_run_still_recorded(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = history_with(tmp_path / "h.sqlite", _report("SLURMD_NODENAME"))
    with sqlite3.connect(path) as db:
        db.execute("UPDATE runs SET report_json = '{' WHERE id = 1")
    record_run(_report("SLURMD_NODENAME", hours=1), path, CONSOLE)
    out = capsys.readouterr().out
    assert "[HISTORY] warning: the node's earlier names were not checked: history " in out
    assert "run 1's stored report is damaged" in out
    assert "[HISTORY] run 2 recorded in" in out
