"""What a run measured but did not judge, said by its verdict (issue #52): a GPU without a floor for
the workload's configuration passes a healthy node (exit 0), and the verdict, its label, its
sentence and the stored report say what was NOT JUDGED and why."""

from __future__ import annotations

import json
import signal

import pytest
from pydantic import ValidationError

from gpuaccept.report.markdown import render_markdown
from gpuaccept.results import CheckResult, Outcome, RunReport, Status
from gpuaccept.verdict import judge_run, verdict_fitness
from tests.run_reports import gpu_report, rejudged

WHY = "no 1b floor for NVIDIA H100 80GB HBM3 (h100-sxm) at 16 layers, ..."


def _workload(status: Status = Status.WARN, **not_judged: str) -> CheckResult:
    return CheckResult(
        name="workload",
        area="TRAIN",
        status=status,
        message=f"speed NOT JUDGED: {WHY}",
        not_judged=not_judged or {"speed": WHY},
    )


def _compute(status: Status = Status.PASS) -> CheckResult:
    return CheckResult(name="compute", area="COMPUTE", status=status, message="ok")


def test_a_healthy_node_passes_and_its_verdict_says_what_was_not_judged() -> None:
    verdict = judge_run(
        [_compute(), _workload()], kind="accept", device_mode="cuda", level="standard"
    )
    assert verdict.outcome is Outcome.PASS
    assert verdict.exit_code == 0
    assert verdict_fitness(verdict) == "pass"
    assert verdict.not_judged == {"workload speed": WHY}
    assert verdict.label == "PASS, workload speed NOT JUDGED"
    assert verdict.sentence == f"SUCCESS; workload speed NOT JUDGED: {WHY}"


def test_every_check_says_its_own_and_a_cpu_run_keeps_its_mode() -> None:
    checks = [_workload(speed=WHY, convergence="a changed run"), _compute()]
    verdict = judge_run(checks, kind="train-llm", device_mode="cpu", level="tiny")
    assert list(verdict.not_judged) == ["workload speed", "workload convergence"]
    assert verdict.label == "PASS, workload speed, workload convergence NOT JUDGED (CPU mode)"
    assert verdict.sentence.endswith(
        f"; workload speed NOT JUDGED: {WHY}; workload convergence NOT JUDGED: a changed run"
    )


def test_a_failure_still_fails_and_says_what_was_not_judged() -> None:
    verdict = judge_run(
        [_compute(Status.FAIL), _workload()], kind="accept", device_mode="cuda", level="standard"
    )
    assert verdict.outcome is Outcome.FAIL
    assert verdict.exit_code == 1
    assert verdict.label == "FAIL (compute)"
    assert verdict.sentence == f"FAILURE: compute; workload speed NOT JUDGED: {WHY}"


def test_nothing_judged_is_said_of_a_run_without_it() -> None:
    verdict = judge_run([_compute()], kind="accept", device_mode="cuda", level="quick")
    assert verdict.not_judged == {}
    assert (verdict.label, verdict.sentence) == ("PASS", "SUCCESS")


def test_the_check_under_way_when_interrupted_says_nothing_of_its_figures() -> None:
    verdict = judge_run(
        [_compute(), _workload(Status.ERROR)],
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
    report = rejudged(base, checks=[*base.checks, _workload()])
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
    report = rejudged(base, checks=[*base.checks, _workload()])
    assert "workload speed NOT JUDGED" in render_markdown(report)
