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

from gpuaccept.checks import dcgm
from gpuaccept.probe.dcgm import DcgmError, parse_diag
from gpuaccept.results import Status
from tests.checks.conftest import cpu_context, gpu_context


def _gpu_result(gpu: int, status: str, warning: str | None = None) -> dict[str, Any]:
    result: dict[str, Any] = {
        "entity_group": "GPU",
        "entity_group_id": 1,
        "entity_id": gpu,
        "status": status,
    }
    if warning:
        result["warnings"] = [
            {"warning": warning, "error_id": 50, "error_category": 4, "error_severity": 2}
        ]
    return result


def dcgm4(memory_gpu1: str = "Pass", warning: str | None = None) -> dict[str, Any]:
    """DCGM 4's shape (testing/python3/dcgm_diag_schema.json in NVIDIA/DCGM)."""
    return {
        "DCGM Diagnostic": {
            "test_categories": [
                {
                    "category": "Deployment",
                    "tests": [
                        {
                            "name": "software",
                            "results": [_gpu_result(0, "Pass"), _gpu_result(1, "Pass")],
                            "test_summary": {"status": "Pass"},
                        }
                    ],
                },
                {
                    "category": "Hardware",
                    "tests": [
                        {
                            "name": "memory",
                            "results": [
                                _gpu_result(0, "Pass"),
                                _gpu_result(1, memory_gpu1, warning),
                            ],
                            "test_summary": {"status": memory_gpu1},
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
        "metadata": {"version": "4.2.3", "Driver Version Detected": "580.95.05"},
    }


def dcgm3() -> dict[str, Any]:
    """DCGM 3's shape (testing/TestDiagManagerStrings.h in NVIDIA/DCGM)."""
    return {
        "DCGM GPU Diagnostic": {
            "test_categories": [
                {
                    "category": "Deployment",
                    "tests": [
                        {"name": "Denylist", "results": [{"gpu_ids": "0,1", "status": "PASS"}]}
                    ],
                },
                {
                    "category": "Hardware",
                    "tests": [
                        {
                            "name": "memory",
                            "results": [
                                {
                                    "gpu_ids": "0",
                                    "status": "SKIP",
                                    "warnings": [{"warning": "ECC memory on GPU 0 is not active."}],
                                },
                                {"gpu_ids": "1", "status": "FAIL", "warnings": "  row   remap  "},
                            ],
                        }
                    ],
                },
            ]
        }
    }


def test_dcgm4_results_are_read_per_test_and_gpu() -> None:
    diag = parse_diag("Successfully ran diagnostic.\n" + json.dumps(dcgm4("Fail", "bad row")))
    assert diag.version == "4.2.3"
    found = {(r.test, r.gpu): (r.status, r.messages) for r in diag.results}
    assert found == {
        ("software", 0): ("pass", ()),
        ("software", 1): ("pass", ()),
        ("memory", 0): ("pass", ()),
        ("memory", 1): ("fail", ("bad row",)),
    }


def test_dcgm3_results_expand_gpu_id_lists() -> None:
    diag = parse_diag(json.dumps(dcgm3()))
    found = {(r.test, r.gpu): (r.status, r.messages) for r in diag.results}
    assert found[("Denylist", 0)] == found[("Denylist", 1)] == ("pass", ())
    assert found[("memory", 0)] == ("skip", ("ECC memory on GPU 0 is not active.",))
    assert found[("memory", 1)] == ("fail", ("row remap",))


@pytest.mark.parametrize(
    "text", ["", "Error: unable to connect to host engine", "{not json", "[]", '{"a": 1}']
)
def test_what_is_not_a_diag_report_is_an_error(text: str) -> None:
    with pytest.raises(DcgmError):
        parse_diag(text)


def _dcgmi_on_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, output: str, code: int) -> Path:
    """A `dcgmi` that prints `output` and records its arguments, first on PATH."""
    tool = tmp_path / "bin" / "dcgmi"
    tool.parent.mkdir()
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
    assert result.message == "DCGM memory on NVML GPU 1: fail (row remap)"
    assert len(result.details["rows"]) == 4


def test_a_passing_diag_passes_and_says_what_ran(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _dcgmi_on_path(tmp_path, monkeypatch, json.dumps(dcgm4()), 0)
    result = dcgm.run(gpu_context(level="full"))  # full runs -r 3 unasked
    assert result.status is Status.PASS
    assert result.message == "dcgmi diag -r 3 (DCGM 4.2.3): 2 tests, 4 pass"


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


def test_a_warning_warns(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _dcgmi_on_path(tmp_path, monkeypatch, json.dumps(dcgm4("Warn", "slow")), 0)
    result = dcgm.run(replace(gpu_context(), dcgm_level=1))
    assert result.status is Status.WARN
    assert "memory on NVML GPU 1: warn (slow)" in result.message


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
