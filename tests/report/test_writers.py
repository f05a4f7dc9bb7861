from __future__ import annotations

import json
import os
import xml.etree.ElementTree as ET
from pathlib import Path

from gpuaccept.report import console, json_report, junit
from gpuaccept.results import CheckResult, Measurement, Reference, RunReport, Status, Verdict
from tests.run_reports import judged_report, rejudged

REPO = Path(__file__).resolve().parents[2]


def sample_report() -> RunReport:
    reference = Reference(value=794.5, lower_fraction=0.75, unit="TFLOPS", source="mamf-finder")
    checks = [
        CheckResult(name="inventory", area="INVENTORY", status=Status.PASS, message="8 GPU(s)"),
        CheckResult(
            name="compute",
            area="COMPUTE",
            status=Status.FAIL,
            message='gpu3 matmul_bf16_tflops 512 TFLOPS below floor <596> & "quoted"',
            duration_seconds=12.5,
            measurements=[
                Measurement(
                    name="matmul_bf16_tflops",
                    value=512.0,
                    unit="TFLOPS",
                    device_index=3,
                    device_name="NVIDIA H100 80GB HBM3",
                    reference=reference,
                    reference_model="h100-sxm",
                    verdict=Verdict.FAIL,
                )
            ],
        ),
        CheckResult(name="health", area="HEALTH", status=Status.SKIP, message="NVML unavailable"),
        CheckResult(name="ddp", area="DDP", status=Status.ERROR, message="timed out after 900 s"),
    ]
    return judged_report(
        tool_version="0.1.0",
        command="accept",
        level="standard",
        device_mode="cuda",
        started_at="2026-11-21T05:00:00.123+00:00",
        finished_at="2026-11-21T05:03:00+00:00",
        duration_seconds=180.0,
        checks=checks,
        environment={"system": {"hostname": "gpu-node/07 'east'"}},
    )


def test_json_report_round_trips_and_names_the_host_and_process(tmp_path: Path) -> None:
    report = sample_report()
    path = json_report.write_json_report(report, tmp_path)
    assert path.name == f"gpuaccept-accept-gpu-node_07__east_-20261121T050000-pid{os.getpid()}.json"
    assert RunReport.model_validate_json(path.read_text()) == report
    assert [p.name for p in tmp_path.iterdir()] == [path.name]


def test_the_same_report_name_twice_never_overwrites(tmp_path: Path) -> None:
    report = sample_report()
    first = json_report.write_json_report(report, tmp_path)
    first.write_text("an earlier run's report\n")
    second = json_report.write_json_report(report, tmp_path)
    assert second != first
    assert second.name.endswith(f"-pid{os.getpid()}-2.json")
    assert first.read_text() == "an earlier run's report\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([first.name, second.name])


def test_a_slurm_job_id_goes_into_the_name() -> None:
    name = json_report.report_filename(sample_report(), {"SLURM_JOB_ID": "4711"})
    assert name.endswith(f"-slurm4711-pid{os.getpid()}.json")


def test_committed_schema_matches_the_model() -> None:
    committed = (REPO / "docs" / "report-schema.json").read_text()
    assert committed == json_report.render_report_schema(), "regenerate docs/report-schema.json"
    assert json.loads(committed)["properties"]["schema_version"]["default"] == 2


def test_junit_counts_and_marks_each_check(tmp_path: Path) -> None:
    path = tmp_path / "junit.xml"
    junit.write_junit(sample_report(), path)
    suite = ET.parse(path).getroot().find("testsuite")
    assert suite is not None
    assert (
        suite.get("tests"),
        suite.get("failures"),
        suite.get("errors"),
        suite.get("skipped"),
    ) == ("4", "1", "1", "1")
    cases = {case.get("name"): case for case in suite.iter("testcase")}
    failure = cases["compute"].find("failure")
    assert failure is not None
    # the check's recommended action leads its message: this synthetic check keeps no findings,
    # so its failure takes the check's action (drain); the check that could not complete, rerun
    assert (
        failure.get("message")
        == '[drain] gpu3 matmul_bf16_tflops 512 TFLOPS below floor <596> & "quoted"'
    )
    error = cases["ddp"].find("error")
    assert error is not None
    assert (error.get("message") or "").startswith("[rerun] ")
    properties = {p.get("name"): p.get("value") for p in suite.iter("property")}
    assert properties["gpuaccept.action"] == "drain"
    assert properties["gpuaccept.action_rules"].startswith("built-in (sha256 ")
    assert cases["health"].find("skipped") is not None
    assert cases["inventory"].find("failure") is None


def test_console_lines_carry_the_area_prefix_and_the_verdict() -> None:
    report = sample_report()
    lines = [console.check_line(check) for check in report.checks]
    assert lines[0] == "[INVENTORY] PASS inventory (0.0 s): 8 GPU(s)"
    assert lines[1].startswith("[COMPUTE] FAIL compute (12.5 s): gpu3")
    assert console.result_line(report) == "[RESULT] FAILURE: compute, ddp"
    passing = rejudged(report, checks=report.checks[:1])
    assert console.result_line(passing) == "[RESULT] SUCCESS"


def test_summary_table_has_a_row_per_check() -> None:
    table = console.summary_table(sample_report())
    assert table.row_count == 4


def test_every_writer_shows_the_recommended_action() -> None:
    """Issue #31 §1: the node's action and each finding's wherever the verdict is shown."""
    from gpuaccept.report.html import render_html
    from gpuaccept.report.markdown import render_markdown
    from gpuaccept.report.prometheus import render_prometheus

    report = sample_report()
    plan = report.action_plan
    assert (plan.action.value, [r.action.value for r in plan.recommendations]) == (
        "drain",
        ["drain", "rerun"],
    )
    lines = console.action_lines(report)
    assert lines[0].startswith("[ACTION] drain: the node's action, the most severe of 2 finding(s)")
    assert lines[1].startswith("[ACTION]   drain <- compute: gpu3 matmul_bf16_tflops")
    assert lines[2].startswith("[ACTION]   rerun <- ddp: ")
    clean = rejudged(report, checks=report.checks[:1])
    assert console.action_lines(clean) == ["[ACTION] none: nothing to do"]
    page = render_html(report, {})
    assert '<b id="action">drain</b>' in page
    assert "<h2>Actions</h2>" in page
    assert "<h2>Actions</h2>" not in render_html(clean, {})
    assert "- recommended action: **drain (compute: gpu3 matmul" in render_markdown(report)
    metrics = render_prometheus(report)
    assert 'gpuaccept_run_action{action="drain",' in metrics
    states = [line for line in metrics.splitlines() if line.startswith("gpuaccept_run_action{")]
    assert [line.rsplit(" ", 1)[1] for line in states] == ["0.0"] * 5 + ["1.0", "0.0"]
    ddp = [
        line
        for line in metrics.splitlines()
        if line.startswith("gpuaccept_check_action{") and 'check="ddp"' in line
    ]
    assert [line for line in ddp if line.endswith(" 1.0")] == [
        line for line in ddp if 'action="rerun"' in line
    ]


def test_an_action_line_is_cut_where_a_word_ends_and_says_so() -> None:
    """Issue #53 §5: the [ACTION] line was cut inside a figure ("... floor 640.0...")."""
    figures = ", ".join(
        f"gpu{i} matmul_bf16_tflops {500.25 + i:.2f} TFLOPS below floor 595.88" for i in range(8)
    )
    report = sample_report()
    slow = report.checks[1].model_copy(update={"message": figures, "details": {}})
    line = console.action_lines(rejudged(report, checks=[slow]))[1]
    assert line.startswith("[ACTION]   drain <- compute: gpu0 matmul_bf16_tflops 500.25")
    assert console.CUT in line
    kept = line.split(": ", 1)[1].split(console.CUT)[0]
    words = figures.split()
    assert kept.split() == words[: len(kept.split())]  # whole words only, the last one too
    assert len(kept) <= 160
    assert console.clipped("short", 160) == "short"
    assert console.clipped("x" * 200, 160) == "x" * 160 + console.CUT  # no word end to cut at
