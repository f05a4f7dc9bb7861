"""NVIDIA DCGM's diagnostic (NVIDIA/DCGM@72fa3feaa67d716a75323a8f47c34ff3ee73f824), case by case.

Each input is what `dcgmi diag -j` prints (dcgmi/Diag.cpp HelperJsonBuildOutput and
HelperJsonAddResult, in the form testing/python3/dcgm_diag_schema.json publishes: per entity a
`status` and `warnings` of {warning, error_id, error_category, error_severity}, each test's
`test_summary`) for a run that one of DCGM's own tests makes and asserts on; DCGM's verdict is
what that test asserts (the file and line cited). Ours is the dcgm check's verdict under the
built-in tables: a result dcgmi did not pass is judged by its DCGM_FR_* code's `[dcgm_error]`
row, whose severity is dcgmlib/src/dcgm_errors.c's (ISOLATE, TRIAGE, CONFIG, RESET fail;
MONITOR warns; issue #50 §1). Where they differ, `why` says why on purpose.

Where DCGM disagrees with itself, we follow its error table: dcgmi's JSON prints a DCGM warning
as Fail (HelperDisplayDiagResult with DDR_NO_DISPLAY_WARN, dcgmi/Diag.cpp:845-862), and its exit
status fails the run on it, while the same error's own severity (dcgm_errors.c, and the
`error_severity` dcgmi prints beside it) says the GPU can work.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, NamedTuple

import pytest

from gpuaccept.actions import Action, builtin_rules, load_rules, plan_actions
from gpuaccept.checks import dcgm
from gpuaccept.checks.judging import Findings
from gpuaccept.probe.dcgm import parse_diag
from gpuaccept.results import Status

# dcgmlib/dcgm_errors.h:177-186 (dcgmErrorSeverity_t) and :190-206 (the categories used here)
MONITOR, ISOLATE, TRIAGE, RESET = 1, 2, 4, 6
THERMAL, MEMORY, NVLINK, XID, OTHER = 9, 10, 11, 5, 15


def _error(code: int, category: int, severity: int, text: str) -> dict[str, Any]:
    return {
        "warning": text,
        "error_id": code,
        "error_category": category,
        "error_severity": severity,
    }


def _gpu(gpu: int, status: str, *errors: dict[str, Any], info: str = "") -> dict[str, Any]:
    result: dict[str, Any] = {
        "entity_group": "GPU",
        "entity_group_id": 1,
        "entity_id": gpu,
        "status": status,
    }
    if errors:
        result["warnings"] = list(errors)
    if info:
        result["info"] = [info]
    return result


def _dcgmi(category: str, test: str, *results: dict[str, Any]) -> str:
    """dcgmi's JSON for one test on GPUs 0 and 1: the test's summary carries every error and
    fails when any result does (HelperJsonAddTestSummary)."""
    errors = [e for r in results for e in r.get("warnings", [])]
    failed = any(r["status"] == "Fail" for r in results)
    summary: dict[str, Any] = {"status": "Fail" if failed else "Pass"}
    if errors:
        summary["warnings"] = errors
    document = {
        "DCGM Diagnostic": {
            "test_categories": [
                {
                    "category": "Deployment",
                    "tests": [
                        {
                            "name": "software",
                            "results": [_gpu(0, "Pass"), _gpu(1, "Pass")],
                            "test_summary": {"status": "Pass"},
                        }
                    ],
                },
                {
                    "category": category,
                    "tests": [{"name": test, "results": list(results), "test_summary": summary}],
                },
            ]
        },
        "entity_groups": [
            {
                "entity_group": "GPU",
                "entity_group_id": 1,
                "entities": [
                    {"entity_id": 0, "device_id": "2335", "serial_num": "1650924060001"},
                    {"entity_id": 1, "device_id": "2335", "serial_num": "1650924060002"},
                ],
            }
        ],
        "metadata": {"version": "4.6.0", "Driver Version Detected": "580.95.05"},
    }
    return json.dumps(document)


class Case(NamedTuple):
    name: str
    output: str  # what dcgmi diag -j prints
    dcgm: str  # DCGM's verdict as its test asserts it: fail or pass
    ours: str  # fail, warn or pass
    gpus: tuple[str, ...]  # the GPUs our findings name
    why: str = ""


TEMP = "Temperature 120 C on GPU 0 exceeded the limit"
CASES = [
    Case(
        "test_dcgm_diag.py:1404-1540 helper_per_gpu_responses_dcgmi (memtest, GPU 0 at 1000 C): "
        "GPU 0 'Fail' with DCGM_FR_TEMP_VIOLATION, error_severity MONITOR; GPU 1 'Pass'; dcgmi "
        "exits DCGM_ST_NVVS_ERROR",
        _dcgmi(
            "Stress",
            "memtest",
            _gpu(0, "Fail", _error(42, THERMAL, MONITOR, TEMP)),
            _gpu(1, "Pass"),
        ),
        "fail",
        "warn",
        ("NVML GPU 0",),
        "DCGM_FR_TEMP_VIOLATION is MONITOR in DCGM's own table (dcgm_errors.c:66): 'can perform "
        "workload, but needs to be monitored' (dcgm_errors.h:180), and dcgmi prints that severity "
        "beside the Fail; its JSON prints DCGM warnings as Fail (Diag.cpp:845-862). The row acts "
        "(issue #50 §1): a warning with `monitor`; a site that fails it sets `42 = { action = "
        '"drain" }` (test_a_sites_row_turns_dcgm_s_warning_into_a_failure)',
    ),
    Case(
        "test_dcgm_diag.py:240-262 helper_check_diag_high_temp_fail (diagnostic, GPU 0 at 120 C): "
        "'Expected a failure' with DCGM_FR_TEMP_VIOLATION",
        _dcgmi(
            "Hardware",
            "diagnostic",
            _gpu(0, "Fail", _error(42, THERMAL, MONITOR, TEMP)),
            _gpu(1, "Pass"),
        ),
        "fail",
        "warn",
        ("NVML GPU 0",),
        "as above: DCGM_FR_TEMP_VIOLATION is MONITOR (dcgm_errors.c:66)",
    ),
    Case(
        "test_dcgm_diag.py:207-229 test_multiple_xid_errors (diagnostic, XIDs 97 and 98 on GPU 0):"
        " two DCGM_FR_XID_ERROR errors on GPU 0",
        _dcgmi(
            "Hardware",
            "diagnostic",
            _gpu(
                0,
                "Fail",
                _error(101, XID, TRIAGE, "Detected XID 97 for GPU 0"),
                _error(101, XID, TRIAGE, "Detected XID 98 for GPU 0"),
            ),
            _gpu(1, "Pass"),
        ),
        "fail",
        "fail",
        ("NVML GPU 0",),
    ),
    Case(
        "test_dcgm_diag.py:765-800 test_dcgm_diag_pcie_failure_effective_ber (pcie, effective BER"
        " 1.1e-12 on GPU 0): DCGM_DIAG_RESULT_FAIL with DCGM_FR_NVLINK_EFFECTIVE_BER_THRESHOLD",
        _dcgmi(
            "Integration",
            "pcie",
            _gpu(0, "Fail", _error(119, NVLINK, ISOLATE, "NVLink effective BER 1.1e-12")),
            _gpu(1, "Pass"),
        ),
        "fail",
        "fail",
        ("NVML GPU 0",),
    ),
    Case(
        "test_dcgm_diag.py:1711-1735 test_dcgm_diag_output (memtest, a failure injected on GPU 1):"
        " GPU 1 fails with DCGM_FR_MEMORY_MISMATCH, GPU 0 has no error",
        _dcgmi(
            "Stress",
            "memtest",
            _gpu(0, "Pass"),
            _gpu(1, "Fail", _error(58, MEMORY, ISOLATE, "memtest miscompare on GPU 1")),
        ),
        "fail",
        "fail",
        ("NVML GPU 1",),
    ),
    Case(
        "test_diag_nccl_tests_plugin.py:91-106 test_diag_nccl_tests_pass_output_nonzero_exit: "
        "nccl_tests FAIL with DCGM_FR_NCCL_ERROR",
        _dcgmi(
            "Integration",
            "nccl_tests",
            _gpu(0, "Fail", _error(129, OTHER, RESET, "nccl-tests exited with 1")),
            _gpu(1, "Pass"),
        ),
        "fail",
        "fail",
        ("NVML GPU 0",),
    ),
    Case(
        "test_dcgmi.py:3026-3052 test_dcgmi_diag_ignore_error_codes (memory, an XID injected, "
        "ignoreErrorCodes '*:*'): PASS or SKIP, the error said as 'Suppressed error:' info "
        "(test_dcgmi.py:3011)",
        _dcgmi(
            "Hardware",
            "memory",
            _gpu(0, "Pass", info="Suppressed error: Detected XID 43 for GPU 0"),
            _gpu(1, "Pass"),
        ),
        "pass",
        "pass",
        (),
    ),
]


def _ours(output: str) -> tuple[str, tuple[str, ...], Findings]:
    findings = Findings("dcgm", "HEALTH")
    dcgm.judge_diag(parse_diag(output), findings)
    verdict = "fail" if findings.failures else "warn" if findings.warnings else "pass"
    named = tuple(sorted({str(getattr(f, "gpu", "")) for f in findings.failures}))
    if not findings.failures:
        named = tuple(sorted({str(getattr(f, "gpu", "")) for f in findings.warnings}))
    return verdict, named, findings


@pytest.mark.parametrize("case", CASES, ids=lambda case: case.name[:80])
def test_dcgm_case(case: Case) -> None:
    verdict, named, _ = _ours(case.output)
    assert verdict == case.ours
    assert named == case.gpus
    assert (case.dcgm == case.ours) or case.why, "a difference from DCGM needs its reason"


def test_the_rows_cited_are_dcgm_s_table() -> None:
    """The severities the cases above carry are the built-in rows' (dcgm_errors.c lines)."""
    rows = builtin_rules().dcgm_error
    assert {
        code: (rows[code].name, rows[code].severity, rows[code].line)
        for code in (
            "42",
            "58",
            "101",
            "119",
            "129",
        )
    } == {
        "42": ("DCGM_FR_TEMP_VIOLATION", "MONITOR", 66),
        "58": ("DCGM_FR_MEMORY_MISMATCH", "ISOLATE", 82),
        "101": ("DCGM_FR_XID_ERROR", "TRIAGE", 125),
        "119": ("DCGM_FR_NVLINK_EFFECTIVE_BER_THRESHOLD", "ISOLATE", 143),
        "129": ("DCGM_FR_NCCL_ERROR", "RESET", 153),
    }


def test_a_sites_row_turns_dcgm_s_warning_into_a_failure(tmp_path: Path) -> None:
    """Where we differ from DCGM on purpose (a MONITOR code warns), a site's `--rules` row
    restores DCGM's Fail, and the plan takes its action."""
    site = tmp_path / "rules.toml"
    site.write_text('[dcgm_error]\n42 = { action = "drain" }\n')
    rules = load_rules(site)
    findings = Findings("dcgm", "HEALTH")
    dcgm.judge_diag(parse_diag(CASES[0].output), findings, rules)
    result = findings.conclude("")
    assert result.status is Status.FAIL
    assert plan_actions([result], rules).action is Action.DRAIN
