"""`dcgmi diag -r N -j`: run NVIDIA DCGM's diagnostic and read its JSON, per test and per GPU.

DCGM publishes no stable schema, so both shapes seen in DCGM's repository are read:
- DCGM 4: {"DCGM Diagnostic": {"test_categories": [{"category", "tests": [{"name", "results":
  [{"entity_group": "GPU", "entity_id": 0, "status": "Pass", "warnings": [{"warning", ...}],
  "info": [...]}], "test_summary": {"status"}}]}], "runtime_error"?}, "metadata": {"version"}}
- DCGM 3: {"DCGM GPU Diagnostic": {"test_categories": [{"category", "tests": [{"name",
  "results": [{"gpu_ids": "0,1" | "gpu_id": "0", "status": "PASS", "warnings": [...] | "..."}]}]}]}}
Statuses are "Pass", "Fail", "Warn", "Skip", "Not Run" in either case.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from dataclasses import dataclass, field
from typing import Any

DCGM_LEVELS = (1, 2, 3, 4)
# DCGM's own durations (FIELD-NOTES): r1 seconds, r2 ~2 min, r3 ~15 min, r4 longer.
_TIMEOUT_SECONDS = {1: 300.0, 2: 900.0, 3: 3600.0, 4: 3 * 3600.0}


class DcgmError(Exception):
    """dcgmi could not run, or said something that is not a diagnostic report."""


@dataclass(frozen=True)
class DcgmResult:
    category: str
    test: str
    gpu: int | None  # None: the result is for the node (or DCGM named no GPU)
    status: str  # "pass", "fail", "warn", "skip", "not run"
    messages: tuple[str, ...] = ()


@dataclass
class DcgmDiag:
    results: list[DcgmResult] = field(default_factory=list)
    version: str | None = None
    runtime_error: str | None = None


def _status(raw: Any) -> str:
    return str(raw or "not run").strip().lower()


def _messages(result: dict[str, Any]) -> tuple[str, ...]:
    found: list[str] = []
    warnings = result.get("warnings", [])
    if isinstance(warnings, str):
        warnings = [warnings]
    for warning in warnings if isinstance(warnings, list) else []:
        text = warning.get("warning") if isinstance(warning, dict) else warning
        if text:
            found.append(" ".join(str(text).split()))
    return tuple(found)


def _gpus(result: dict[str, Any]) -> list[int | None]:
    if "entity_id" in result:
        group = str(result.get("entity_group", "GPU")).upper()
        return [int(result["entity_id"])] if group == "GPU" else [None]
    ids = result.get("gpu_ids", result.get("gpu_id"))
    if ids is None:
        return [None]
    parts = [part.strip() for part in str(ids).split(",") if part.strip()]
    return [int(part) for part in parts if part.isdigit()] or [None]


def parse_diag(text: str) -> DcgmDiag:
    """The tests and per-GPU results in `dcgmi diag -j` output; DcgmError if it is not one."""
    start = text.find("{")
    try:
        document = json.loads(text[start:]) if start >= 0 else None
    except json.JSONDecodeError as error:
        raise DcgmError(f"dcgmi diag printed JSON that does not parse: {error}") from None
    if not isinstance(document, dict):
        raise DcgmError("dcgmi diag printed no JSON object")
    body = document.get("DCGM Diagnostic", document.get("DCGM GPU Diagnostic"))
    if not isinstance(body, dict):
        raise DcgmError("dcgmi diag JSON has no 'DCGM Diagnostic' section")
    metadata: dict[str, Any] = document.get("metadata") or {}
    if not isinstance(metadata, dict):
        metadata = {}
    diag = DcgmDiag(
        version=str(metadata.get("version") or body.get("version") or "") or None,
        runtime_error=str(body["runtime_error"]) if body.get("runtime_error") else None,
    )
    for category in body.get("test_categories") or []:
        if not isinstance(category, dict):
            continue
        for test in category.get("tests") or []:
            if not isinstance(test, dict):
                continue
            for result in test.get("results") or []:
                if not isinstance(result, dict):
                    continue
                for gpu in _gpus(result):
                    diag.results.append(
                        DcgmResult(
                            category=str(category.get("category", "")),
                            test=str(test.get("name", "")),
                            gpu=gpu,
                            status=_status(result.get("status")),
                            messages=_messages(result),
                        )
                    )
    if not diag.results and diag.runtime_error is None:
        raise DcgmError("dcgmi diag JSON holds no test result")
    return diag


def dcgmi_path() -> str | None:
    return shutil.which("dcgmi")


def run_diag(level: int, timeout_seconds: float | None = None) -> DcgmDiag:
    """Run `dcgmi diag -r level -j`; its exit status is ignored when it printed a report (it is
    non-zero when a test fails, which the report says per test)."""
    if level not in DCGM_LEVELS:
        raise DcgmError(f"DCGM diag level must be one of 1-4 (got {level})")
    executable = dcgmi_path()
    if executable is None:
        raise DcgmError("dcgmi is not on PATH")
    timeout = timeout_seconds or _TIMEOUT_SECONDS[level]
    try:
        done = subprocess.run(
            [executable, "diag", "-r", str(level), "-j"],
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
    except subprocess.TimeoutExpired:
        raise DcgmError(f"dcgmi diag -r {level} did not finish within {timeout:g} s") from None
    except OSError as error:
        raise DcgmError(f"dcgmi could not run: {error}") from None
    try:
        return parse_diag(done.stdout)
    except DcgmError as error:
        said = (done.stderr or done.stdout).strip().splitlines()
        detail = f": {said[0][:200]}" if said else ""
        raise DcgmError(f"{error} (exit {done.returncode}{detail})") from None
