"""A refusal is loud everywhere (issue #31 §2): besides stderr and exit 4, `act slurm` and
`node-verdict` write what they decided to a JSON record (`--record`) and node_exporter metrics
(`--prometheus`: state sets of the decision and of the guard that refused)."""

from __future__ import annotations

import json
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families
from typer.testing import CliRunner

from gpuaccept.cli import app
from tests.act.test_kubernetes_fleet import _cluster, _failing, _stack
from tests.run_reports import gpu_report, rejudged


def _samples(path: Path, name: str) -> dict[tuple[str, str], float]:
    """(node, state) -> value of a state-set metric in a textfile."""
    found = {}
    for family in text_string_to_metric_families(path.read_text()):
        for sample in family.samples:
            if sample.name == name:
                state = sample.labels.get("decision") or sample.labels.get("guard") or ""
                found[(sample.labels["node"], state)] = sample.value
    return found


def _slurm_report(tmp_path: Path, node: str, torch: str) -> Path:
    report = rejudged(
        gpu_report(node, [500.0], passed=False, extra_environment={"torch": {"version": torch}}),
        level="quick",
    )
    path = tmp_path / f"{node}.json"
    path.write_text(report.model_dump_json())
    return path


def test_act_slurm_records_a_drain_and_a_breaker_refusal(fleet: Path, tmp_path: Path) -> None:
    outputs = []
    for node, torch in (("gpu00", "2.13.0"), ("gpu01", "2.12.0")):
        record, metrics = tmp_path / f"{node}-act.json", tmp_path / f"{node}-act.prom"
        result = CliRunner().invoke(
            app,
            [
                "act",
                "slurm",
                str(_slurm_report(tmp_path, node, torch)),
                "--node",
                node,
                "--record",
                str(record),
                "--prometheus",
                str(metrics),
            ],
        )
        outputs.append((result.exit_code, json.loads(record.read_text()), metrics))
    (drained_code, drained, _), (refused_code, refused, metrics) = outputs
    assert (drained_code, refused_code) == (1, 4)
    (first,) = drained["decisions"]
    assert (first["decision"], first["guard"], first["recommended"]) == ("drain", None, "drain")
    assert first["reason"].startswith("gpuaccept quick: drain: compute [stack ")
    assert (drained["tool"], drained["mode"], drained["refused"]) == ("act slurm", "enforce", 0)
    (second,) = refused["decisions"]
    assert (second["decision"], second["guard"]) == ("refused", "breaker")
    assert "the breaker's limit is 1" in second["why"]
    assert refused["refused"] == 1
    assert _samples(metrics, "gpuaccept_act_refused") == {
        ("gpu01", "breaker"): 1.0,
        ("gpu01", "regression"): 0.0,
        ("gpu01", "not-ours"): 0.0,
    }
    decisions = _samples(metrics, "gpuaccept_act_decision")
    assert decisions[("gpu01", "refused")] == 1.0
    assert sum(decisions.values()) == 1.0  # a state set: one state at 1


def test_node_verdict_records_a_regression_round(tmp_path: Path) -> None:
    record, metrics = tmp_path / "round.json", tmp_path / "round.prom"
    reports = [_failing(tmp_path, f"gpu{i:02d}") for i in range(5)]
    result = CliRunner().invoke(
        app,
        [
            "node-verdict",
            *map(str, reports),
            "--cluster",
            str(_cluster(tmp_path)),
            "--record",
            str(record),
            "--prometheus",
            str(metrics),
        ],
    )
    assert result.exit_code == 4
    document = json.loads(record.read_text())
    assert document["refused"] == 5
    assert {d["guard"] for d in document["decisions"]} == {"regression"}
    assert {d["stack"] for d in document["decisions"]} == {_stack()}
    refused = _samples(metrics, "gpuaccept_act_refused")
    assert [node for (node, guard), v in sorted(refused.items()) if v == 1.0] == [
        f"gpu{i:02d}" for i in range(5)
    ]
    assert all(guard == "regression" for (_, guard), v in refused.items() if v == 1.0)


def test_report_modes_record_that_nothing_was_decided(fleet: Path, tmp_path: Path) -> None:
    record = tmp_path / "r.json"
    slurm = CliRunner().invoke(
        app,
        [
            "act",
            "slurm",
            str(_slurm_report(tmp_path, "gpu03", "2.13.0")),
            "--node",
            "gpu03",
            "--act",
            "report",
            "--record",
            str(record),
        ],
    )
    assert slurm.exit_code == 1
    (only,) = json.loads(record.read_text())["decisions"]
    assert (only["decision"], only["why"]) == ("none", "nothing acted on: --act report")
    k8s = CliRunner().invoke(
        app, ["node-verdict", str(_failing(tmp_path, "gpu04")), "--record", str(record)]
    )
    assert k8s.exit_code == 0
    (only,) = json.loads(record.read_text())["decisions"]
    assert (only["node"], only["decision"], only["verdict"]) == ("gpu04", "none", "fail")


def test_an_output_that_cannot_be_written_is_refused_before_slurm_is_asked(
    fleet: Path, tmp_path: Path
) -> None:
    before = fleet.read_text()
    for flag in ("--record", "--prometheus"):
        result = CliRunner().invoke(
            app,
            [
                "act",
                "slurm",
                str(_slurm_report(tmp_path, "gpu05", "2.13.0")),
                "--node",
                "gpu05",
                flag,
                str(tmp_path),
            ],
        )
        assert result.exit_code == 2
        assert f"{flag} {tmp_path}: is a directory" in result.stderr
    same = tmp_path / "same.out"
    both = CliRunner().invoke(
        app,
        [
            "act",
            "slurm",
            str(_slurm_report(tmp_path, "gpu05", "2.13.0")),
            "--node",
            "gpu05",
            "--record",
            str(same),
            "--prometheus",
            str(same),
        ],
    )
    assert both.exit_code == 2
    assert fleet.read_text() == before
