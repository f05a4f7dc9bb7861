"""`dcgmi diag -r N -j`: run NVIDIA DCGM's diagnostic and read its JSON, per test and per GPU.

DCGM publishes no stable schema; this reads what dcgmi's own source prints:
- DCGM 4 (dcgmi/Diag.cpp at 4.6, HelperJsonBuildOutput): {"DCGM Diagnostic": {"test_categories":
  [{"category", "tests": [{"name", "results": [{"entity_group", "entity_group_id", "entity_id",
  "status", "warnings": [{"warning", "error_id", ...}], "info": [...]}], "test_summary":
  {"status", "warnings"}}]}]}, "entity_groups": [{"entity_group", "entities": [{"entity_id"}]}],
  "metadata": {"version"}}. `test_summary` is the test's overall result with every error, those
  attached to no GPU included (HelperJsonAddTestSummary); NVIDIA's own reader
  (testing/python3/DcgmiDiag.py:292-303) fails on it too.
- DCGM 3.3.9 (dcgmi/Diag.cpp at v3.3.9): {"DCGM GPU Diagnostic": {"test_categories": [...]},
  "version"}: per-GPU results carry "gpu_id" as a string, the Deployment tests one result whose
  "gpu_id" (a number, only when an error names a GPU) and "warnings": [{"warnings": msg}].
- A failed run: {"DCGM Diagnostic": {"version", "runtime_error"}}.
Statuses: "Pass", "Skip", "Fail". The JSON prints a DCGM *warning* as "Fail"
(HelperDisplayDiagResult with DDR_NO_DISPLAY_WARN, Diag.cpp:845-862 and Diag.h:74-75; 3.3.9
prints everything but Pass and Skip as "Fail"), so what dcgmi calls Fail is judged a failure,
as dcgmi's own exit status does.
dcgmi leaves out results that did not run (Diag.cpp:1063); a GPU DCGM lists with no result for a
test is read here as "not run", never as passed.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import uuid
from dataclasses import dataclass, field
from pathlib import Path
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
    status: str  # "pass", "fail", "warn", "skip", "not run", or what dcgmi printed, lowered
    messages: tuple[str, ...] = ()
    summary: bool = False  # the test's test_summary (its overall result, every error)
    # DCGM_FR_* codes of its warnings (dcgm_errors.h), which the action tables read
    error_ids: tuple[int, ...] = ()


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
        # DCGM 4 and 3.3.9's per-GPU entries say "warning"; 3.3.9's Deployment ones "warnings"
        text = (
            warning.get("warning", warning.get("warnings"))
            if isinstance(warning, dict)
            else warning
        )
        if text:
            found.append(" ".join(str(text).split()))
    return tuple(found)


def _error_ids(result: dict[str, Any]) -> tuple[int, ...]:
    """The `error_id`s of a result's warnings (DCGM 4): whole numbers below 10,000 only."""
    warnings = result.get("warnings")
    found = []
    for warning in warnings if isinstance(warnings, list) else []:
        raw = warning.get("error_id") if isinstance(warning, dict) else None
        text = str(raw).strip() if isinstance(raw, int | str) and not isinstance(raw, bool) else ""
        if text.isdigit() and int(text) < 10_000:
            found.append(int(text))
    return tuple(found)


def _gpu_number(raw: Any) -> int | None:
    text = str(raw).strip()
    return int(text) if text.isdigit() else None


def _gpus(result: dict[str, Any]) -> list[int | None]:
    if "entity_id" in result:
        group = str(result.get("entity_group", "GPU")).upper()
        return [_gpu_number(result["entity_id"])] if group == "GPU" else [None]
    ids = result.get("gpu_ids", result.get("gpu_id"))
    if ids is None:
        return [None]
    parts = [part.strip() for part in str(ids).split(",") if part.strip()]
    return [int(part) for part in parts if part.isdigit()] or [None]


def _listed_gpus(document: dict[str, Any]) -> set[int]:
    """The GPUs DCGM 4 says it diagnosed (entity_groups); empty when it does not say."""
    listed: set[int] = set()
    for group in document.get("entity_groups") or []:
        if not isinstance(group, dict) or str(group.get("entity_group", "")).upper() != "GPU":
            continue
        for entity in group.get("entities") or []:
            number = _gpu_number(entity.get("entity_id")) if isinstance(entity, dict) else None
            if number is not None:
                listed.add(number)
    return listed


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
    version = metadata.get("version") or document.get("version") or body.get("version")
    diag = DcgmDiag(
        version=str(version) if version else None,
        runtime_error=str(body["runtime_error"]) if body.get("runtime_error") else None,
    )
    listed = _listed_gpus(document)
    for category in body.get("test_categories") or []:
        if not isinstance(category, dict):
            continue
        name = str(category.get("category", ""))
        for test in category.get("tests") or []:
            if not isinstance(test, dict):
                continue
            test_name = str(test.get("name", ""))
            seen: set[int] = set()
            for result in test.get("results") or []:
                if not isinstance(result, dict):
                    continue
                for gpu in _gpus(result):
                    if gpu is not None:
                        seen.add(gpu)
                    diag.results.append(
                        DcgmResult(
                            name,
                            test_name,
                            gpu,
                            _status(result.get("status")),
                            _messages(result),
                            error_ids=_error_ids(result),
                        )
                    )
            summary = test.get("test_summary")
            if isinstance(summary, dict):
                diag.results.append(
                    DcgmResult(
                        name,
                        test_name,
                        None,
                        _status(summary.get("status")),
                        _messages(summary),
                        summary=True,
                        error_ids=_error_ids(summary),
                    )
                )
                # a test that ran on some GPUs: those DCGM lists without a result did not run it
                for gpu in sorted(listed - seen) if seen else ():
                    diag.results.append(
                        DcgmResult(name, test_name, gpu, "not run", ("dcgmi printed no result",))
                    )
    if not diag.results and diag.runtime_error is None:
        raise DcgmError("dcgmi diag JSON holds no test result")
    return diag


def dcgmi_path() -> str | None:
    return shutil.which("dcgmi")


def _descendants(root: int) -> list[int]:
    """Every process below `root`, from /proc's parent links (Linux)."""
    children: dict[int, list[int]] = {}
    for stat_file in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError, ValueError, IndexError):
            # the command name may hold spaces and parentheses: the parent pid follows the last ")"
            fields = stat_file.read_text().rsplit(")", 1)[1].split()
            children.setdefault(int(fields[1]), []).append(int(stat_file.parent.name))
    found, todo = [], [root]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


# Set in dcgmi's environment, inherited by all it starts: a process that double-forked away
# from the tree (reparented to init, even in a session of its own) still carries it.
RUN_MARK = "GPUACCEPT_DCGM_RUN"


def _marked(token: str) -> set[int]:
    """The processes whose environment carries this run's mark (those this user may read)."""
    needle = f"{RUN_MARK}={token}".encode()
    found = set()
    for environ in Path("/proc").glob("[0-9]*/environ"):
        try:
            if needle in environ.read_bytes().split(b"\0"):
                found.add(int(environ.parent.name))
        except (OSError, ValueError):
            continue
    return found


def _kill_tree(process: subprocess.Popen[str], token: str) -> None:
    """dcgmi and everything it started (a wrapper's grandchild, nvvs, one that double-forked
    away), found by parentage and by the run's mark. dcgmi stays in the worker's process group,
    so the suite's own kill of a hung worker reaches it too."""
    # Stopped first, tree walked again until no new process shows up, then killed: a process
    # that forked between the walk and the kill would otherwise outlive it (it did, once, on a
    # loaded machine). A stopped process cannot fork; SIGKILL ends it stopped or not.
    stopped: set[int] = set()
    while found := {process.pid, *_descendants(process.pid), *_marked(token)} - stopped:
        for pid in found:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGSTOP)
        stopped |= found
    for pid in stopped:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)
    with contextlib.suppress(Exception):
        process.communicate(timeout=10)


def run_diag(level: int, timeout_seconds: float | None = None) -> DcgmDiag:
    """Run `dcgmi diag -r level -j`; its exit status is ignored when it printed a report (it is
    non-zero when a test fails, which the report says per test)."""
    if level not in DCGM_LEVELS:
        raise DcgmError(f"DCGM diag level must be one of 1-4 (got {level})")
    executable = dcgmi_path()
    if executable is None:
        raise DcgmError("dcgmi is not on PATH")
    timeout = timeout_seconds or _TIMEOUT_SECONDS[level]
    token = uuid.uuid4().hex
    try:
        process = subprocess.Popen(
            [executable, "diag", "-r", str(level), "-j"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, RUN_MARK: token},
        )
    except OSError as error:
        raise DcgmError(f"dcgmi could not run: {error}") from None
    try:
        stdout, stderr = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        _kill_tree(process, token)  # killing the direct child alone left its children running
        raise DcgmError(f"dcgmi diag -r {level} did not finish within {timeout:g} s") from None
    except BaseException:
        _kill_tree(process, token)  # SIGINT/SIGTERM of the run: nothing of DCGM's outlives it
        raise
    done = subprocess.CompletedProcess(process.args, process.returncode, stdout, stderr)
    try:
        return parse_diag(done.stdout)
    except DcgmError as error:
        said = (done.stderr or done.stdout).strip().splitlines()
        detail = f": {said[0][:200]}" if said else ""
        raise DcgmError(f"{error} (exit {done.returncode}{detail})") from None
