"""The LLM workload on the HTML page: its loss over the steps against the floor and the limit,
and its tokens/s per GPU per step; a hand-damaged curve is still drawn, never a traceback."""

from __future__ import annotations

import dataclasses

from gpuaccept.checks import workload
from gpuaccept.checks.context import RanksOutcome
from gpuaccept.report.html import render_html
from gpuaccept.results import CheckResult
from tests.llm.helpers import context, record, short
from tests.run_reports import T0, judged_report


def _check() -> CheckResult:
    spec = short()
    records = [dataclasses.replace(record(r), spec=spec) for r in (0, 1)]
    return workload.conclude(context("cpu"), RanksOutcome(2, "gloo", records))


def _page(check: CheckResult) -> str:
    report = judged_report(
        command="train-llm",
        level="tiny",
        device_mode="cpu",
        started_at=T0.isoformat(),
        finished_at=T0.isoformat(),
        duration_seconds=60.0,
        checks=[check],
        environment={"system": {"hostname": "gpu017"}},
    )
    return render_html(report, {})


def test_the_loss_and_the_throughput_are_drawn_over_the_steps() -> None:
    check = _check()
    assert check.details["tokens_per_second_per_step"] == [204.8, 1024.0, 1024.0, 1024.0]
    page = _page(check)
    assert page.count('<img alt="workload loss over steps" src="data:image/png;base64,') == 1
    assert page.count('<img alt="workload tokens/s per GPU over steps" src="data:image/png') == 1
    # the curves are drawn, not also dumped as lists in the details table
    assert "204.8" not in page


def test_a_damaged_curve_is_still_drawn() -> None:
    check = _check()
    details = {**check.details, "losses": [6.0, "x", None, float("nan")], "entropy_rate": "?"}
    details["tokens_per_second_per_step"] = "not a list"
    page = _page(check.model_copy(update={"details": details}))
    assert '<img alt="workload loss over steps"' in page
    assert "workload tokens/s per GPU over steps" not in page
