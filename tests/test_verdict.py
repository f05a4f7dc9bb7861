"""One verdict, told the same everywhere: judged once, stored, and rendered (never re-derived) by
the console, Markdown, HTML, Prometheus, the history, `history fleet` and `node-verdict`."""

from __future__ import annotations

import json
import signal
import sqlite3
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families
from pydantic import ValidationError
from typer.testing import CliRunner

from gpuaccept.cli import app
from gpuaccept.errors import InputError
from gpuaccept.report.console import result_line
from gpuaccept.report.html import render_html
from gpuaccept.report.markdown import render_markdown
from gpuaccept.report.node_verdict import kubectl_commands, newest_per_node, node_verdict
from gpuaccept.report.prometheus import render_prometheus
from gpuaccept.results import CheckResult, Outcome, RunReport, Status
from gpuaccept.store.history import SCHEMA_VERSION, History
from gpuaccept.verdict import judge_run, verdict_fitness
from tests.run_reports import gpu_report, rejudged

runner = CliRunner()


def _check(name: str, status: Status) -> CheckResult:
    return CheckResult(name=name, area=name.upper(), status=status, message=name)


def _judge(*statuses: Status, **kwargs: object) -> Outcome:
    checks = [_check(f"c{i}", s) for i, s in enumerate(statuses)]
    verdict = judge_run(checks, kind="accept", device_mode="cuda", level="quick", **kwargs)  # type: ignore[arg-type]
    return verdict.outcome


# --- the rules ------------------------------------------------------------------------------


def test_every_check_skipped_is_not_judged_never_a_pass() -> None:
    assert _judge(Status.SKIP, Status.SKIP) is Outcome.NOT_JUDGED
    assert _judge() is Outcome.NOT_JUDGED
    assert _judge(Status.SKIP, Status.PASS) is Outcome.PASS
    assert _judge(Status.WARN) is Outcome.PASS  # warnings pass


@pytest.mark.parametrize("bad", [Status.FAIL, Status.ERROR])
def test_a_failed_or_errored_check_fails_the_run(bad: Status) -> None:
    assert _judge(Status.PASS, bad, Status.SKIP) is Outcome.FAIL


def test_the_check_under_way_when_interrupted_is_not_called_failed() -> None:
    checks = [
        _check("inventory", Status.FAIL),
        _check("transfer", Status.ERROR),
        _check("compute", Status.SKIP),
    ]
    verdict = judge_run(
        checks,
        kind="accept",
        device_mode="cuda",
        level="standard",
        interrupted_by=signal.SIGTERM,
        interrupted_check="transfer",
    )
    assert verdict.outcome is Outcome.INTERRUPTED
    assert verdict.failed_checks == ["inventory"]  # failed before the signal: still said
    assert verdict.exit_code == 143
    assert verdict.label == "INTERRUPTED (transfer)"
    assert verdict.sentence == (
        "INTERRUPTED by SIGTERM during transfer; no verdict on the rest; "
        "failed before it: inventory"
    )


def test_only_a_gpu_accept_speaks_for_a_node() -> None:
    checks = [_check("c", Status.PASS)]
    for kind, mode, expected in [
        ("accept", "cuda", True),
        ("accept", "cpu", False),
        ("bench", "cuda", False),
        ("train-mnist", "cuda", False),
    ]:
        verdict = judge_run(checks, kind=kind, device_mode=mode, level="x")
        assert verdict.is_node_acceptance is expected, (kind, mode)


def test_a_report_whose_stored_verdict_disagrees_with_its_checks_is_refused() -> None:
    failing = gpu_report("n1", [100.0], passed=False)
    forged = json.loads(failing.model_dump_json())
    forged["verdict"] = json.loads(gpu_report("n1", [800.0]).verdict.model_dump_json())
    with pytest.raises(ValidationError, match="not the one its checks give: outcome="):
        RunReport.model_validate(forged)
    claimed = {**forged["verdict"], "failed_checks": ["compute"]}
    with pytest.raises(ValidationError, match="a pass has no failed check"):
        RunReport.model_validate({**forged, "verdict": claimed})


def test_a_version_1_report_is_judged_on_reading(tmp_path: Path) -> None:
    old = json.loads(rejudged(gpu_report("n1", [800.0]), checks=[]).model_dump_json())
    old["schema_version"] = 1
    del old["verdict"]
    report = RunReport.model_validate_json(json.dumps(old))
    # version 1 writers called this PASS; it judged nothing
    assert report.verdict.outcome is Outcome.NOT_JUDGED
    path = tmp_path / "old.json"
    path.write_text(json.dumps(old))
    from gpuaccept.report.reading import load_report

    assert load_report(path).verdict.outcome is Outcome.NOT_JUDGED
    path.write_text(json.dumps({**old, "schema_version": 3}))
    with pytest.raises(InputError, match="schema version 3"):
        load_report(path)


# --- every writer renders the stored verdict ------------------------------------------------


def _not_judged() -> RunReport:
    report = gpu_report("n1", [800.0])
    skipped = [c.model_copy(update={"status": Status.SKIP}) for c in report.checks]
    return rejudged(report, checks=skipped)


def _metrics(report: RunReport) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    found = {}
    for family in text_string_to_metric_families(render_prometheus(report)):
        for sample in family.samples:
            found[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return found


def _one(metrics: dict, name: str, **labels: str) -> float:  # type: ignore[type-arg]
    hits = [
        value
        for (n, got), value in metrics.items()
        if n == name and all(dict(got).get(k) == v for k, v in labels.items())
    ]
    assert len(hits) == 1, (name, labels, hits)
    return float(hits[0])


def test_a_run_that_judged_nothing_reads_not_judged_in_every_writer() -> None:
    report = _not_judged()
    assert result_line(report).startswith("[RESULT] NOT JUDGED")
    assert render_markdown(report).splitlines()[0].endswith(": NOT JUDGED")
    assert "NOT JUDGED" in render_html(report, {})
    assert 'class="verdict pass"' not in render_html(report, {})
    metrics = _metrics(report)
    assert _one(metrics, "gpuaccept_run_passed") == 0
    assert _one(metrics, "gpuaccept_run_verdict", verdict="not_judged") == 1
    assert _one(metrics, "gpuaccept_run_verdict", verdict="pass") == 0


def test_prometheus_series_keep_their_identity_when_the_verdict_flips() -> None:
    passing = _metrics(gpu_report("n1", [800.0]))
    failing = _metrics(gpu_report("n1", [100.0], passed=False))
    assert set(passing) == set(failing)  # the same series, other values
    value_labels = {
        label
        for (name, labels) in passing
        if name == "gpuaccept_measurement_value"
        for label, _ in labels
    }
    assert not value_labels & {"verdict", "status"}
    assert _one(failing, "gpuaccept_measurement_within_reference", gpu="0") == 0
    assert _one(passing, "gpuaccept_measurement_within_reference", gpu="0") == 1
    assert _one(failing, "gpuaccept_check_status", check="compute", status="fail") == 1
    assert _one(failing, "gpuaccept_check_passed", check="compute") == 0


def test_cpu_mode_is_said_by_every_writer_and_a_cpu_failure_is_still_red() -> None:
    cpu_pass = rejudged(gpu_report("n1", [800.0]), device_mode="cpu")
    assert "NOT a GPU acceptance" in result_line(cpu_pass)
    assert "PASS (CPU mode)" in render_markdown(cpu_pass).splitlines()[0]
    assert _one(_metrics(cpu_pass), "gpuaccept_run_node_acceptance") == 0
    assert 'class="verdict cpu"' in render_html(cpu_pass, {})
    cpu_fail = rejudged(gpu_report("n1", [100.0], passed=False), device_mode="cpu")
    assert 'class="verdict fail"' in render_html(cpu_fail, {})


def test_markdown_shows_report_text_and_never_renders_it() -> None:
    report = rejudged(gpu_report("n1", [800.0]), level="quick <!-- FAIL -->")
    report = rejudged(
        report,
        checks=[report.checks[0].model_copy(update={"message": "<script>x()</script> | *b*"})],
    )
    text = render_markdown(report)
    for raw in ("<!--", "<script>"):
        assert raw not in text
    for shown in ("&lt;script&gt;", "\\*b\\*", "\\|"):
        assert shown in text


# --- the history, fleet and node verdicts ----------------------------------------------------


def test_history_lists_the_stored_verdict(tmp_path: Path) -> None:
    db = tmp_path / "h.sqlite"
    interrupted = rejudged(
        gpu_report("n2", [800.0], hours=1),
        checks=[_check("transfer", Status.ERROR)],
        interrupted_by=signal.SIGINT,
        interrupted_check="transfer",
    )
    with History.open(db) as history:
        history.append([(_not_judged(), "a"), (interrupted, "b")])
    listed = runner.invoke(app, ["history", "list", "--history", str(db)])
    assert listed.exit_code == 0, listed.output
    assert "INTERRUPTED (transfer)" in listed.stdout  # not FAIL (transfer)
    assert "NOT JUDGED" in listed.stdout
    assert " PASS" not in listed.stdout


def test_fleet_judges_each_node_by_its_newest_accept_only(tmp_path: Path) -> None:
    db = tmp_path / "h.sqlite"
    failed = gpu_report("n1", [100.0], passed=False, hours=0)
    bench_after = rejudged(gpu_report("n1", [800.0], hours=1), command="bench", level="all")
    train_after = rejudged(gpu_report("n1", [800.0], hours=2), command="train-mnist")
    with History.open(db) as history:
        history.append([(failed, "a"), (bench_after, "b"), (train_after, "c")])
    fleet = runner.invoke(app, ["history", "fleet", "--history", str(db), "--json"])
    assert fleet.exit_code == 1, fleet.output  # a benchmark does not turn the node green
    (node,) = json.loads(fleet.stdout)["nodes"]
    assert (node["run"], node["verdict"]["outcome"]) == (1, "fail")

    nothing = tmp_path / "n.sqlite"
    with History.open(nothing) as history:
        history.append([(_not_judged(), "a")])
    assert runner.invoke(app, ["history", "fleet", "--history", str(nothing)]).exit_code == 1


def test_a_version_1_history_is_upgraded_with_verdicts_judged_again(tmp_path: Path) -> None:
    db = tmp_path / "h.sqlite"
    with History.open(db) as history:
        history.append([(_not_judged(), "a")])
    # make it what gpuaccept wrote before: no verdict column, the run stored as passed
    with sqlite3.connect(db) as raw:
        raw.execute("ALTER TABLE runs DROP COLUMN verdict_json")
        raw.execute("UPDATE runs SET passed = 1")
        raw.execute("PRAGMA user_version = 1")
    with History.open(db, create=False) as history:
        (run,) = history.list_runs()
    assert run.verdict.outcome is Outcome.NOT_JUDGED
    with sqlite3.connect(db) as raw:
        assert raw.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
        assert raw.execute("SELECT passed FROM runs").fetchone()[0] == 0


def test_a_damaged_stored_report_is_one_line_not_a_traceback(tmp_path: Path) -> None:
    db = tmp_path / "h.sqlite"
    with History.open(db) as history:
        history.append([(gpu_report("n1", [800.0]), "a")])
    with sqlite3.connect(db) as raw:
        raw.execute("UPDATE runs SET report_json = substr(report_json, 1, 40) || 'X'")
    shown = runner.invoke(app, ["history", "show", "1", "--history", str(db)])
    assert shown.exit_code == 2
    assert "stored report is damaged" in shown.stderr
    assert "Traceback" not in shown.output


def test_node_verdict_reads_accept_reports_only(tmp_path: Path) -> None:
    bench = rejudged(gpu_report("n1", [800.0]), command="bench", level="all")
    with pytest.raises(InputError, match="says nothing of a node's fitness"):
        node_verdict(bench, "gpu017")
    path = tmp_path / "bench.json"
    path.write_text(bench.model_dump_json())
    done = runner.invoke(app, ["node-verdict", str(path), "--node", "gpu017"])
    assert done.exit_code == 2
    assert "kubectl" not in done.stdout


def test_a_cpu_pass_or_an_interruption_leaves_the_taint_alone() -> None:
    cpu_pass = rejudged(gpu_report("n1", [800.0]), device_mode="cpu")
    interrupted = rejudged(
        gpu_report("n1", [800.0]),
        interrupted_by=signal.SIGTERM,
        interrupted_check="train",
    )
    for report in (cpu_pass, interrupted):
        verdict = node_verdict(report, "gpu017")
        assert verdict.verdict == "not-judged"
        (label,) = kubectl_commands(verdict)  # no taint command at all
        assert not any(part.startswith("gpuaccept.io/failed") for part in label)
    cpu_fail = rejudged(gpu_report("n1", [100.0], passed=False), device_mode="cpu")
    assert node_verdict(cpu_fail, "gpu017").taint == "compute"  # a failure taints in any mode


def test_of_several_reports_of_a_node_the_newest_run_is_applied(tmp_path: Path) -> None:
    newer_fail = gpu_report("n1", [100.0], passed=False, hours=5)
    older_pass = gpu_report("n1", [800.0], hours=1)
    other = gpu_report("n2", [800.0], hours=0)
    verdicts = [node_verdict(r, n) for r, n in ((newer_fail, "a"), (older_pass, "a"), (other, "b"))]
    newest, superseded = newest_per_node(verdicts)
    assert [(v.node, v.verdict) for v in newest] == [("a", "fail"), ("b", "pass")]
    assert [(v.node, v.verdict) for v in superseded] == [("a", "pass")]

    files = []
    for i, report in enumerate((newer_fail, older_pass)):  # the older pass comes last
        files.append(tmp_path / f"r{i}.json")
        files[-1].write_text(
            rejudged(report, environment={"scheduler": {"node_name": "gpu017"}}).model_dump_json()
        )
    done = runner.invoke(app, ["node-verdict", *map(str, files)])
    assert done.exit_code == 0, done.output
    assert "gpuaccept.io/unfit=compute:NoSchedule" in done.stdout
    assert "NoSchedule-" not in done.stdout  # the taint is not lifted by the older pass
    assert "superseded" in done.stderr


def test_a_check_under_way_needs_the_signal_that_stopped_it() -> None:
    with pytest.raises(ValueError, match=r"^interrupted_check needs interrupted_by$"):
        judge_run([], kind="accept", device_mode="cuda", level="quick", interrupted_check="x")


def test_an_xid_outside_the_table_is_said_so() -> None:
    from gpuaccept.probe.xid import describe_xid

    assert describe_xid(9999) == "not in gpuaccept's table (see NVIDIA's XID listing)"


def test_a_node_figure_is_labelled_as_the_node_not_a_gpu() -> None:
    from gpuaccept.results import Measurement

    report = gpu_report("n1", [800.0])
    node_check = CheckResult(
        name="inventory",
        area="INVENTORY",
        status=Status.PASS,
        message="1 GPU(s)",
        measurements=[Measurement(name="gpus_usable", value=1, unit="GPUs")],
    )
    metrics = _metrics(rejudged(report, checks=[node_check, *report.checks]))
    assert _one(metrics, "gpuaccept_measurement_value", check="inventory") == 1
    labels = next(
        dict(labels)
        for (name, labels) in metrics
        if name == "gpuaccept_measurement_value" and dict(labels)["check"] == "inventory"
    )
    assert (labels["gpu"], labels["gpu_name"]) == ("node", "")


# --- what a run measured but did not judge (issue #52) -----------------------------------------

WHY = "no 1b floor for NVIDIA H100 80GB HBM3 (h100-sxm) at 16 layers, ..."


def _unjudged_workload(status: Status = Status.WARN, **not_judged: str) -> CheckResult:
    return CheckResult(
        name="workload",
        area="TRAIN",
        status=status,
        message=f"speed NOT JUDGED: {WHY}",
        not_judged=not_judged or {"speed": WHY},
    )


def _passing(status: Status = Status.PASS) -> CheckResult:
    return CheckResult(name="compute", area="COMPUTE", status=status, message="ok")


def test_a_healthy_node_passes_and_its_verdict_says_what_was_not_judged() -> None:
    verdict = judge_run(
        [_passing(), _unjudged_workload()], kind="accept", device_mode="cuda", level="standard"
    )
    assert verdict.outcome is Outcome.PASS
    assert verdict.exit_code == 0
    assert verdict_fitness(verdict) == "pass"
    assert verdict.not_judged == {"workload speed": WHY}
    assert verdict.label == "PASS, workload speed NOT JUDGED"
    assert verdict.sentence == f"SUCCESS; workload speed NOT JUDGED: {WHY}"


def test_every_check_says_its_own_and_a_cpu_run_keeps_its_mode() -> None:
    checks = [_unjudged_workload(speed=WHY, convergence="a changed run"), _passing()]
    verdict = judge_run(checks, kind="train-llm", device_mode="cpu", level="tiny")
    assert list(verdict.not_judged) == ["workload speed", "workload convergence"]
    assert verdict.label == "PASS, workload speed, workload convergence NOT JUDGED (CPU mode)"
    assert verdict.sentence.endswith(
        f"; workload speed NOT JUDGED: {WHY}; workload convergence NOT JUDGED: a changed run"
    )


def test_a_failure_still_fails_and_says_what_was_not_judged() -> None:
    verdict = judge_run(
        [_passing(Status.FAIL), _unjudged_workload()],
        kind="accept",
        device_mode="cuda",
        level="standard",
    )
    assert verdict.outcome is Outcome.FAIL
    assert verdict.exit_code == 1
    assert verdict.label == "FAIL (compute)"
    assert verdict.sentence == f"FAILURE: compute; workload speed NOT JUDGED: {WHY}"


def test_nothing_judged_is_said_of_a_run_without_it() -> None:
    verdict = judge_run([_passing()], kind="accept", device_mode="cuda", level="quick")
    assert verdict.not_judged == {}
    assert (verdict.label, verdict.sentence) == ("PASS", "SUCCESS")


def test_the_check_under_way_when_interrupted_says_nothing_of_its_figures() -> None:
    verdict = judge_run(
        [_passing(), _unjudged_workload(Status.ERROR)],
        kind="accept",
        device_mode="cuda",
        level="standard",
        interrupted_by=signal.SIGTERM,
        interrupted_check="workload",
    )
    assert verdict.outcome is Outcome.INTERRUPTED
    assert verdict.not_judged == {}


def test_the_report_stores_it_and_refuses_a_verdict_that_drops_it() -> None:
    base = gpu_report("n1", [800.0])
    report = rejudged(base, checks=[*base.checks, _unjudged_workload()])
    assert report.verdict.not_judged == {"workload speed": WHY}
    stored = json.loads(report.model_dump_json())
    assert RunReport.model_validate(stored).verdict == report.verdict
    stored["verdict"]["not_judged"] = {}
    with pytest.raises(ValidationError, match="not the one its checks give: not_judged="):
        RunReport.model_validate(stored)
    # a report written before the field existed reads as judging everything it measured
    plain = json.loads(base.model_dump_json())
    del plain["verdict"]["not_judged"]
    for check in plain["checks"]:
        del check["not_judged"]
    assert RunReport.model_validate(plain).verdict.not_judged == {}


def test_the_markdown_report_carries_it() -> None:
    base = gpu_report("n1", [800.0])
    report = rejudged(base, checks=[*base.checks, _unjudged_workload()])
    assert "workload speed NOT JUDGED" in render_markdown(report)
