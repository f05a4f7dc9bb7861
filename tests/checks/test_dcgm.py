"""dcgm: `dcgmi diag -j` parsed in both shapes DCGM's repository shows (DCGM 4's per-entity
results with a test summary, DCGM 3's gpu_ids strings), and the check run against a stand-in
`dcgmi` executable on PATH (a real subprocess)."""

from __future__ import annotations

import json
import os
import stat
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from gpuaccept.actions import Action, plan_actions
from gpuaccept.checks import dcgm
from gpuaccept.probe.dcgm import DcgmError, parse_diag
from gpuaccept.results import Status
from tests.checks.conftest import cpu_context, gpu_context


def _gpu_result(
    gpu: int, status: str, warning: str | None = None, error_id: int = 50
) -> dict[str, Any]:
    """One entity's result as dcgmi 4.6 writes it (Diag.cpp HelperJsonAddResult); its error
    DCGM_FR_STRESS_LEVEL (50, TRIAGE) unless told."""
    result: dict[str, Any] = {
        "entity_group": "GPU",
        "entity_group_id": 1,
        "entity_id": gpu,
        "status": status,
    }
    if warning:
        result["warnings"] = [
            {"warning": warning, "error_id": error_id, "error_category": 4, "error_severity": 2}
        ]
    return result


def _summary(status: str, *warnings: str) -> dict[str, Any]:
    """A test's test_summary (Diag.cpp HelperJsonAddTestSummary): no entity, every error."""
    summary: dict[str, Any] = {"status": status}
    if warnings:
        summary["warnings"] = [
            {"warning": w, "error_id": 50, "error_category": 4, "error_severity": 2}
            for w in warnings
        ]
    return summary


def dcgm4(
    memory_gpu1: str | None = "Pass",
    warning: str | None = None,
    summary: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """What `dcgmi diag -j` prints at DCGM 4.6 (dcgmi/Diag.cpp HelperJsonBuildOutput): statuses
    Pass, Skip or Fail (a DCGM warning prints as Fail); a result that did not run is left out
    (memory_gpu1=None); every test has its test_summary."""
    memory = [_gpu_result(0, "Pass")]
    if memory_gpu1 is not None:
        memory.append(_gpu_result(1, memory_gpu1, warning))
    worst = "Fail" if "Fail" in (memory_gpu1,) else "Pass"
    return {
        "DCGM Diagnostic": {
            "test_categories": [
                {
                    "category": "Deployment",
                    "tests": [
                        {
                            "name": "software",
                            "results": [_gpu_result(0, "Pass"), _gpu_result(1, "Pass")],
                            "test_summary": _summary("Pass"),
                        }
                    ],
                },
                {
                    "category": "Hardware",
                    "tests": [
                        {
                            "name": "memory",
                            "results": memory,
                            "test_summary": summary
                            or _summary(worst, *([warning] if warning else [])),
                        }
                    ],
                },
            ]
        },
        "entity_groups": [
            {
                "entity_group": "GPU",
                "entity_group_id": 1,
                "entities": [
                    {"entity_id": 0, "device_id": "2330"},
                    {"entity_id": 1, "device_id": "2330"},
                ],
            }
        ],
        "metadata": {"version": "4.6.0", "Driver Version Detected": "580.95.05"},
    }


def dcgm3() -> dict[str, Any]:
    """What `dcgmi diag -j` prints at DCGM 3.3.9 (dcgmi/Diag.cpp at v3.3.9): "gpu_id" per GPU as a
    string; the Deployment test's one result carries a numeric "gpu_id" and "warnings" entries
    keyed "warnings"; everything but Pass and Skip prints as Fail; a top-level "version"."""
    return {
        "DCGM GPU Diagnostic": {
            "test_categories": [
                {
                    "category": "Deployment",
                    "tests": [
                        {"name": "Denylist", "results": [{"status": "Pass"}]},
                        {
                            "name": "Persistence Mode",
                            "results": [
                                {
                                    "status": "Fail",
                                    "gpu_id": 1,
                                    "warnings": [
                                        {
                                            "warnings": "Persistence mode for GPU 1 is disabled.",
                                            "error_id": 20,
                                            "error_category": 1,
                                            "error_severity": 1,
                                        }
                                    ],
                                }
                            ],
                        },
                    ],
                },
                {
                    "category": "Hardware",
                    "tests": [
                        {
                            "name": "Memory",
                            "results": [
                                {
                                    "gpu_id": "0",
                                    "status": "Skip",
                                    "warnings": [{"warning": "ECC memory on GPU 0 is not active."}],
                                },
                                {
                                    "gpu_id": "1",
                                    "status": "Fail",
                                    "warnings": [{"warning": "  row   remap  "}],
                                    "info": "Allocated 95% of memory",
                                },
                            ],
                        }
                    ],
                },
            ]
        },
        "version": "3.3.9",
    }


def test_dcgm4_results_are_read_per_test_and_gpu() -> None:
    diag = parse_diag("Successfully ran diagnostic.\n" + json.dumps(dcgm4("Fail", "bad row")))
    assert diag.version == "4.6.0"
    found = {(r.test, r.gpu): (r.status, r.messages) for r in diag.results if not r.summary}
    assert found == {
        ("software", 0): ("pass", ()),
        ("software", 1): ("pass", ()),
        ("memory", 0): ("pass", ()),
        ("memory", 1): ("fail", ("bad row",)),
    }
    summaries = {r.test: r.status for r in diag.results if r.summary}
    assert summaries == {"software": "pass", "memory": "fail"}


def test_dcgm3_results_read_gpu_ids_deployment_warnings_and_the_version() -> None:
    diag = parse_diag(json.dumps(dcgm3()))
    assert diag.version == "3.3.9"
    found = {(r.test, r.gpu): (r.status, r.messages) for r in diag.results}
    assert found[("Denylist", None)] == ("pass", ())
    assert found[("Persistence Mode", 1)] == ("fail", ("Persistence mode for GPU 1 is disabled.",))
    assert found[("Memory", 0)] == ("skip", ("ECC memory on GPU 0 is not active.",))
    assert found[("Memory", 1)] == ("fail", ("row remap",))


@pytest.mark.parametrize(
    "text", ["", "Error: unable to connect to host engine", "{not json", "[]", '{"a": 1}']
)
def test_what_is_not_a_diag_report_is_an_error(text: str) -> None:
    with pytest.raises(DcgmError):
        parse_diag(text)


def _dcgmi_on_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, output: str, code: int) -> Path:
    """A `dcgmi` that prints `output` and records its arguments, first on PATH."""
    tool = tmp_path / "bin" / "dcgmi"
    tool.parent.mkdir(parents=True)
    (tmp_path / "output.txt").write_text(output)
    tool.write_text(
        f'#!/bin/sh\necho "$@" > "{tmp_path}/args.txt"\ncat "{tmp_path}/output.txt"\nexit {code}\n'
    )
    tool.chmod(tool.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", f"{tool.parent}{os.pathsep}{os.environ['PATH']}")
    return tmp_path / "args.txt"


def test_a_failing_dcgm_test_fails_the_check_with_its_gpu(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    args = _dcgmi_on_path(tmp_path, monkeypatch, json.dumps(dcgm4("Fail", "row remap")), 226)
    result = dcgm.run(replace(gpu_context(), dcgm_level=2))
    assert args.read_text().split() == ["diag", "-r", "2", "-j"]
    assert result.status is Status.FAIL
    # the summary repeats the GPU's error: said once
    assert result.message == "DCGM memory on NVML GPU 1: fail (row remap)"
    assert len(result.details["rows"]) == 4
    assert result.details["dcgmi_fail_includes_warnings"] is True


def test_a_passing_diag_passes_and_says_what_ran(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _dcgmi_on_path(tmp_path, monkeypatch, json.dumps(dcgm4()), 0)
    result = dcgm.run(gpu_context(level="full"))  # full runs -r 3 unasked
    assert result.status is Status.PASS
    assert result.message == "dcgmi diag -r 3 (DCGM 4.6.0): 2 tests, 4 pass"


def test_a_failure_attached_to_no_gpu_fails_through_the_test_summary(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every GPU's result passed, but the test's summary failed with an error DCGM tied to no
    entity: NVIDIA's reader fails it (DcgmiDiag.py:292-303), and so does this check."""
    diag = dcgm4(summary=_summary("Fail", "NVVS plugin timed out"))
    _dcgmi_on_path(tmp_path, monkeypatch, json.dumps(diag), 226)
    result = dcgm.run(replace(gpu_context(), dcgm_level=2))
    assert result.status is Status.FAIL
    assert "DCGM memory (test summary, no GPU named): fail (NVVS plugin timed out)" in (
        result.message
    )


def test_a_gpu_the_test_left_out_is_not_judged_passed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """dcgmi leaves out results that did not run: GPU 1 has no memory result here."""
    _dcgmi_on_path(tmp_path, monkeypatch, json.dumps(dcgm4(None)), 0)
    result = dcgm.run(replace(gpu_context(), dcgm_level=2))
    assert result.status is Status.WARN
    assert "DCGM memory on NVML GPU 1: not run (dcgmi printed no result)" in result.message


@pytest.mark.parametrize("status", ["FAILED", "Error", "Aborted"])
def test_a_status_it_does_not_know_is_never_a_pass(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, status: str
) -> None:
    _dcgmi_on_path(tmp_path, monkeypatch, json.dumps(dcgm4(status)), 0)
    result = dcgm.run(replace(gpu_context(), dcgm_level=1))
    assert result.status is Status.FAIL
    assert f"memory on NVML GPU 1: {status.lower()}: a DCGM status gpuaccept does not know" in (
        result.message
    )


def test_a_dcgm_3_report_is_judged_the_same(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _dcgmi_on_path(tmp_path, monkeypatch, json.dumps(dcgm3()), 226)
    result = dcgm.run(replace(gpu_context(), dcgm_level=1))
    assert result.status is Status.FAIL
    assert "DCGM Persistence Mode on NVML GPU 1: fail" in result.message
    assert "DCGM Memory on NVML GPU 1: fail (row remap)" in result.message
    assert "(DCGM 3.3.9)" not in result.message  # a failure names faults, not the version


def test_dcgmi_that_prints_no_report_is_an_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _dcgmi_on_path(tmp_path, monkeypatch, "Error: unable to establish a connection\n", 255)
    result = dcgm.run(replace(gpu_context(), dcgm_level=1))
    assert result.status is Status.ERROR
    assert "exit 255: Error: unable to establish a connection" in result.message


def test_without_dcgm_it_is_skip_never_pass(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")
    result = dcgm.run(gpu_context(level="full"))
    assert result.status is Status.SKIP
    assert "dcgmi is not on PATH" in result.message


def test_not_asked_below_full_and_never_in_cpu_mode() -> None:
    assert dcgm.run(gpu_context(level="standard")).status is Status.SKIP
    assert "not asked for" in dcgm.run(gpu_context(level="standard")).message
    assert dcgm.run(replace(gpu_context(level="full"), dcgm_level=0)).status is Status.SKIP
    assert dcgm.run(replace(cpu_context(), dcgm_level=2)).status is Status.SKIP


def test_a_warn_status_warns_where_a_dcgmi_prints_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """dcgmi's JSON prints warnings as Fail today; one that prints "Warn" (its display path,
    DDR_DISPLAY_WARN) is judged a warning, not a pass and not a failure, where no row of its
    code says otherwise (here none: it names no code)."""
    diag = dcgm4("Warn", "slow")
    diag["DCGM Diagnostic"]["test_categories"][1]["tests"][0]["results"][1].pop("warnings")
    diag["DCGM Diagnostic"]["test_categories"][1]["tests"][0]["results"][1]["warnings"] = [
        {"warning": "slow"}
    ]
    _dcgmi_on_path(tmp_path, monkeypatch, json.dumps(diag), 0)
    result = dcgm.run(replace(gpu_context(), dcgm_level=1))
    assert result.status is Status.WARN
    assert "memory on NVML GPU 1: warn (slow)" in result.message


def _whole(result: Any) -> dict[str, Any]:
    """The parts of a result a reader sees: name, area, status, message, table keys."""
    return {
        "name": result.name,
        "area": result.area,
        "status": result.status,
        "message": result.message,
        "details": sorted(result.details),
    }


_TABLE_KEYS = [
    "columns",
    "dcgm_level",
    "dcgm_version",
    "dcgmi_fail_includes_warnings",
    "ignored",
    "rows",
]


def test_every_skip_says_why_in_full(monkeypatch: pytest.MonkeyPatch) -> None:
    skip = {"name": "dcgm", "area": "HEALTH", "status": Status.SKIP, "details": []}
    assert _whole(dcgm.run(gpu_context(level="standard"))) == skip | {
        "message": "not asked for (accept --dcgm 1|2|3; level full runs -r 3)"
    }
    assert _whole(dcgm.run(replace(cpu_context(), dcgm_level=2))) == skip | {
        "message": "CPU mode: DCGM diagnoses GPUs"
    }
    monkeypatch.setenv("PATH", "/nonexistent")
    assert _whole(dcgm.run(gpu_context(level="full"))) == skip | {
        "message": "DCGM is not installed here: dcgmi is not on PATH"
    }


def test_whole_results_of_a_failing_and_a_runtime_error_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    diag = dcgm4("Fail", "bad row")
    _dcgmi_on_path(tmp_path, monkeypatch, json.dumps(diag), 226)
    result = dcgm.run(replace(gpu_context(), dcgm_level=2))
    assert _whole(result) == {
        "name": "dcgm",
        "area": "HEALTH",
        "status": Status.FAIL,
        "message": "DCGM memory on NVML GPU 1: fail (bad row)",
        "details": sorted([*_TABLE_KEYS, "findings"]),
    }
    # DCGM's own error code is the finding's cause: 50, DCGM_FR_STRESS_LEVEL, whose severity in
    # dcgm_errors.c is TRIAGE: drain
    assert result.details["findings"] == [
        {
            "status": "fail",
            "text": "DCGM memory on NVML GPU 1: fail (bad row)",
            "kind": "dcgm-error",
            "code": "50",
            "gpu": "NVML GPU 1",
        }
    ]
    plan = plan_actions([result])
    assert (plan.action, plan.recommendations[0].cause) == (
        Action.DRAIN,
        "DCGM_FR_STRESS_LEVEL: DCGM severity TRIAGE",
    )
    assert result.details["rows"][3] == {
        "category": "Hardware",
        "test": "memory",
        "gpu": 1,
        "status": "fail",
        "message": "bad row",
    }
    assert (result.details["dcgm_level"], result.details["dcgm_version"]) == (2, "4.6.0")
    failed = {"DCGM Diagnostic": {"version": "4.6.0", "runtime_error": "host engine died"}}
    _dcgmi_on_path(tmp_path / "b", monkeypatch, json.dumps(failed), 1)
    result = dcgm.run(replace(gpu_context(), dcgm_level=1))
    assert _whole(result) == {
        "name": "dcgm",
        "area": "HEALTH",
        "status": Status.FAIL,
        "message": "DCGM runtime error: host engine died",
        "details": sorted([*_TABLE_KEYS, "findings"]),
    }


def test_a_run_that_passed_no_test_is_skip_and_a_node_row_has_no_gpu(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    skipped = dcgm4("Skip")
    for test in skipped["DCGM Diagnostic"]["test_categories"]:
        for entry in test["tests"]:
            entry["results"] = [dict(r, status="Skip") for r in entry["results"]]
            entry["test_summary"] = _summary("Skip")
    _dcgmi_on_path(tmp_path, monkeypatch, json.dumps(skipped), 0)
    result = dcgm.run(replace(gpu_context(), dcgm_level=1))
    assert (result.status, result.message) == (Status.SKIP, "dcgmi diag -r 1 passed no test")
    node = {
        "DCGM GPU Diagnostic": {
            "test_categories": [
                {
                    "category": "Deployment",
                    "tests": [
                        {"name": "Denylist", "results": [{"status": "Pass"}, {"status": "Skip"}]}
                    ],
                }
            ]
        }
    }
    _dcgmi_on_path(tmp_path / "n", monkeypatch, json.dumps(node), 0)
    result = dcgm.run(replace(gpu_context(), dcgm_level=1))
    assert result.message == "dcgmi diag -r 1: 1 tests, 1 pass, 1 skip"
    assert result.details["rows"][0]["gpu"] == ""
    assert "dcgm_version" in result.details
    assert result.details["dcgm_version"] is None


def test_a_summary_in_a_status_it_does_not_know_fails(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    diag = dcgm4(summary={"status": "Aborted"})
    _dcgmi_on_path(tmp_path, monkeypatch, json.dumps(diag), 0)
    result = dcgm.run(replace(gpu_context(), dcgm_level=1))
    assert result.status is Status.FAIL
    assert result.message == (
        "DCGM memory test summary: aborted: a DCGM status gpuaccept does not know"
    )
    node_fail = dcgm4(summary=_summary("Fail"))
    _dcgmi_on_path(tmp_path / "f", monkeypatch, json.dumps(node_fail), 0)
    result = dcgm.run(replace(gpu_context(), dcgm_level=1))
    assert result.message == "DCGM memory (test summary, no GPU named): fail"


def test_the_error_when_dcgmi_says_nothing_useful_reads_in_full(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _dcgmi_on_path(tmp_path, monkeypatch, "Error: unable to establish a connection\n", 255)
    result = dcgm.run(replace(gpu_context(), dcgm_level=1))
    assert (result.name, result.area, result.status) == ("dcgm", "HEALTH", Status.ERROR)
    assert result.message.startswith("dcgmi diag: dcgmi diag printed no JSON object (exit 255")


def test_a_node_result_and_several_messages_read_in_full(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    node = {
        "DCGM GPU Diagnostic": {
            "test_categories": [
                {
                    "category": "Deployment",
                    "tests": [
                        {
                            "name": "Libraries",
                            "results": [
                                {
                                    "status": "Fail",
                                    "warnings": [
                                        {"warnings": "libcuda missing"},
                                        {"warnings": "libnvml missing"},
                                    ],
                                }
                            ],
                        }
                    ],
                }
            ]
        }
    }
    _dcgmi_on_path(tmp_path, monkeypatch, json.dumps(node), 226)
    result = dcgm.run(replace(gpu_context(), dcgm_level=1))
    assert result.message == "DCGM Libraries on node: fail (libcuda missing; libnvml missing)"


def test_a_summary_that_warns_is_not_an_unknown_status(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _dcgmi_on_path(tmp_path, monkeypatch, json.dumps(dcgm4(summary=_summary("Warn"))), 0)
    result = dcgm.run(replace(gpu_context(), dcgm_level=1))
    assert result.status is Status.PASS, result.message


def test_a_dcgmi_past_its_timeout_is_ended_with_everything_it_started(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A wrapper script's grandchild (nvvs, say) holds dcgmi's output pipe: killing dcgmi alone
    left it running and the read waiting on it."""
    import time

    from gpuaccept.probe.dcgm import run_diag
    from tests.processes import gone

    tool = tmp_path / "bin" / "dcgmi"
    tool.parent.mkdir()
    pidfile = tmp_path / "grandchild.pid"
    tool.write_text(f"#!/bin/sh\nsleep 300 &\necho $! > {pidfile}\nwait\n")
    tool.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tool.parent}{os.pathsep}{os.environ['PATH']}")
    started = time.monotonic()
    with pytest.raises(DcgmError, match="did not finish within 1 s"):
        run_diag(1, timeout_seconds=1)
    assert time.monotonic() - started < 15
    grandchild = int(pidfile.read_text())
    deadline = time.monotonic() + 5  # SIGKILL is delivered, not awaited: allow the scheduler
    while not gone(grandchild) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert gone(grandchild)


def test_a_dcgmi_wrapper_that_double_forks_is_ended_at_its_timeout_with_its_grandchild(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue #30 §7: a grandchild that double-forked away (reparented to init, in a session of
    its own) held the output pipe: the run ended 13 s after a 3 s timeout and left it running."""
    import time

    from gpuaccept.probe.dcgm import run_diag
    from tests.processes import gone

    tool = tmp_path / "bin" / "dcgmi"
    tool.parent.mkdir()
    pidfile = tmp_path / "daemon.pid"
    # ( setsid sleep & ): the sleep's parent exits at once, so no tree walk finds it
    tool.write_text(
        f"#!/bin/sh\n( setsid sh -c 'echo $$ > {pidfile}; exec sleep 300' & )\nsleep 300\n"
    )
    tool.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tool.parent}{os.pathsep}{os.environ['PATH']}")
    started = time.monotonic()
    with pytest.raises(DcgmError, match="did not finish within 1 s"):
        run_diag(1, timeout_seconds=1)
    assert time.monotonic() - started < 6
    daemon = int(pidfile.read_text())
    deadline = time.monotonic() + 5
    while not gone(daemon) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert gone(daemon)


def _memory_gpu1(status: str, *error_ids: int) -> dict[str, Any]:
    """dcgm4 whose memory result on GPU 1 carries these DCGM_FR_* codes."""
    diag = dcgm4(status, "said")
    result = diag["DCGM Diagnostic"]["test_categories"][1]["tests"][0]["results"][1]
    result["warnings"] = [
        {"warning": f"error {code}", "error_id": code, "error_category": 4, "error_severity": 1}
        for code in error_ids
    ]
    return diag


def _judge(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, diag: dict[str, Any], rules: Any = None
) -> Any:
    _dcgmi_on_path(tmp_path, monkeypatch, json.dumps(diag), 226)
    return dcgm.run(replace(gpu_context(), dcgm_level=2, action_rules=rules))


@pytest.mark.parametrize(
    ("status", "codes", "verdict", "cause"),
    [
        # DCGM_FR_TEMP_VIOLATION (42) is MONITOR (dcgm_errors.c:66): a warning dcgmi prints as Fail
        ("Fail", (42,), Status.WARN, "42"),
        # DCGM_FR_FAULTY_MEMORY (52) is ISOLATE (dcgm_errors.c:76): dcgmi's Fail, and the row's
        ("Fail", (52,), Status.FAIL, "52"),
        # the most severe row of several decides, and is the cause
        ("Fail", (42, 52), Status.FAIL, "52"),
        # a Warn whose code DCGM classes TRIAGE (DCGM_FR_XID_ERROR, 101) fails by its row
        ("Warn", (101,), Status.FAIL, "101"),
        # DCGM_FR_UNKNOWN (1) is UNKNOWN: no verdict of the row, dcgmi's Fail stands
        ("Fail", (1,), Status.FAIL, "1"),
        # a code no row has (a newer DCGM's): dcgmi's Fail stands
        ("Fail", (9999,), Status.FAIL, "9999"),
    ],
)
def test_a_result_is_judged_by_the_rows_of_its_codes(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    status: str,
    codes: tuple[int, ...],
    verdict: Status,
    cause: str,
) -> None:
    """Issue #50 §1: fail vs warn follows from the [dcgm_error] row, as for an XID."""
    result = _judge(tmp_path, monkeypatch, _memory_gpu1(status, *codes))
    assert result.status is verdict, result.message
    (found,) = [f for f in result.details["findings"] if f["gpu"] == "NVML GPU 1"]
    assert (found["kind"], found["code"]) == ("dcgm-error", cause)


def test_a_row_that_changes_dcgmi_s_verdict_says_so_and_the_plan_follows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    result = _judge(tmp_path, monkeypatch, _memory_gpu1("Fail", 42))
    assert result.message == (
        "DCGM memory on NVML GPU 1: fail (error 42); DCGM_FR_TEMP_VIOLATION: DCGM severity "
        "MONITOR: judged a warning"
    )
    plan = plan_actions([result])
    assert plan.action is Action.MONITOR


def test_a_sites_rules_change_a_dcgm_code_s_verdict_either_way(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from gpuaccept.actions import load_rules

    site = tmp_path / "rules.toml"
    site.write_text(
        "[dcgm_error]\n"
        '42 = { action = "drain" }\n'  # a temperature violation drains here
        '52 = { action = "drain", judge = "warn", why = "our RMA runs memtest itself" }\n'
        '101 = { severity = "NONE" }\n'
    )
    rules = load_rules(site)
    assert rules.dcgm_error["42"].name == "DCGM_FR_TEMP_VIOLATION"  # DCGM's name kept
    hot = _judge(tmp_path / "a", monkeypatch, _memory_gpu1("Fail", 42), rules)
    assert hot.status is Status.FAIL
    assert plan_actions([hot], rules).action is Action.DRAIN
    memory = _judge(tmp_path / "b", monkeypatch, _memory_gpu1("Fail", 52), rules)
    assert memory.status is Status.WARN
    assert "our RMA runs memtest itself: judged a warning" in memory.message
    xid = _judge(tmp_path / "c", monkeypatch, _memory_gpu1("Fail", 101), rules)
    assert xid.status is Status.PASS
    assert xid.details["ignored"] == [
        "DCGM memory on NVML GPU 1: fail (error 101); DCGM_FR_XID_ERROR: DCGM severity NONE: "
        "judged no fault"
    ]


def test_a_summary_failure_naming_no_gpu_follows_its_codes_row(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    summary = {
        "status": "Fail",
        "warnings": [{"warning": "hot", "error_id": 42, "error_category": 5, "error_severity": 1}],
    }
    result = _judge(tmp_path, monkeypatch, dcgm4(summary=summary))
    assert result.status is Status.WARN
    assert "(test summary, no GPU named): fail (hot); DCGM_FR_TEMP_VIOLATION" in result.message


def test_a_run_whose_only_result_a_row_made_a_warning_warns_not_skips(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    hot = {
        "DCGM Diagnostic": {
            "test_categories": [
                {
                    "category": "Stress",
                    "tests": [
                        {
                            "name": "targeted_stress",
                            "results": [
                                {
                                    "entity_group": "GPU",
                                    "entity_group_id": 1,
                                    "entity_id": 0,
                                    "status": "Fail",
                                    "warnings": [
                                        {
                                            "warning": "hot",
                                            "error_id": 42,
                                            "error_category": 9,
                                            "error_severity": 1,
                                        }
                                    ],
                                }
                            ],
                            "test_summary": {"status": "Fail"},
                        }
                    ],
                }
            ]
        }
    }
    result = _judge(tmp_path, monkeypatch, hot)
    assert result.status is Status.WARN, result.message
