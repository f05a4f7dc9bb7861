"""dcgm: NVIDIA DCGM's own diagnostic (`dcgmi diag -r N -j`), each of its tests folded into the
report per GPU. What dcgmi prints as Fail fails (its JSON prints DCGM warnings as Fail too: see
probe/dcgm.py); a test summary's failure that names no GPU fails; a test that did not run on a
GPU DCGM lists warns; a status this reader does not know fails. It runs when asked
(`accept --dcgm N`) and by default at level full (-r 3). Without DCGM the check is SKIP with the
reason, never PASS.

DCGM numbers GPUs as NVML does and diagnoses every GPU of the node, whatever this process was
assigned; its results say "NVML GPU n" for that reason.
"""

from __future__ import annotations

from collections import Counter

from gpuaccept.actions import Cause
from gpuaccept.checks.context import CheckContext
from gpuaccept.checks.judging import Findings
from gpuaccept.probe.dcgm import DcgmError, DcgmResult, dcgmi_path, run_diag
from gpuaccept.results import CheckResult, Status

DEFAULT_FULL_LEVEL = 3
# The statuses dcgmi prints (probe/dcgm.py) that are not failures; "fail" and "warn" are judged.
_NOT_FAILED = frozenset({"pass", "skip", "not run"})

_COLUMNS = [
    ["category", "category"],
    ["test", "DCGM test"],
    ["gpu", "NVML GPU"],
    ["status", "status"],
    ["message", "message"],
]


def _caused(text: str, result: DcgmResult) -> str:
    """The finding with DCGM's own error code as its cause, when dcgmi gave one: the most severe
    of its codes is not known here (the tables are), so the first is kept and every code stays
    in the message's table row."""
    if not result.error_ids:
        return text
    gpu = None if result.gpu is None else f"NVML GPU {result.gpu}"
    return Cause(text, "dcgm-error", result.error_ids[0], gpu)


def level_for(context: CheckContext) -> int:
    """The -r level to run: the one asked for, else 3 at level full, else 0 (not run)."""
    if context.dcgm_level is not None:
        return context.dcgm_level
    return DEFAULT_FULL_LEVEL if context.level == "full" else 0


def _skip(message: str) -> CheckResult:
    return CheckResult(name="dcgm", area="HEALTH", status=Status.SKIP, message=message)


def run(context: CheckContext) -> CheckResult:
    level = level_for(context)
    if level == 0:
        return _skip("not asked for (accept --dcgm 1|2|3; level full runs -r 3)")
    if context.cpu_mode:
        return _skip("CPU mode: DCGM diagnoses GPUs")
    if dcgmi_path() is None:
        return _skip("DCGM is not installed here: dcgmi is not on PATH")
    findings = Findings("dcgm", "HEALTH")
    try:
        diag = run_diag(level)
    except DcgmError as error:
        return CheckResult(
            name="dcgm", area="HEALTH", status=Status.ERROR, message=f"dcgmi diag: {error}"
        )
    rows = []
    failed_tests = {
        (r.category, r.test) for r in diag.results if not r.summary and r.status == "fail"
    }
    for result in diag.results:
        where = "node" if result.gpu is None else f"NVML GPU {result.gpu}"
        message = "; ".join(result.messages)
        if result.summary:
            # the test's overall result: its failure is judged only when no GPU's result said it
            # (an error DCGM attached to no GPU); a passing summary adds nothing to the table
            if result.status == "fail" and (result.category, result.test) not in failed_tests:
                findings.failures.append(
                    _caused(
                        f"DCGM {result.test} (test summary, no GPU named): fail"
                        + (f" ({message})" if message else ""),
                        result,
                    )
                )
            elif result.status not in _NOT_FAILED | {"fail", "warn"}:
                findings.failures.append(
                    f"DCGM {result.test} test summary: {result.status}: a DCGM status "
                    "gpuaccept does not know"
                )
            continue
        rows.append(
            {
                "category": result.category,
                "test": result.test,
                "gpu": "" if result.gpu is None else result.gpu,
                "status": result.status,
                "message": message,
            }
        )
        text = f"DCGM {result.test} on {where}: {result.status}" + (
            f" ({message})" if message else ""
        )
        if result.status == "fail":
            findings.failures.append(_caused(text, result))
        elif result.status == "warn":
            findings.warnings.append(_caused(text, result))
        elif result.status == "not run":
            # dcgmi leaves out what did not run: the GPU was not judged by that test
            findings.warnings.append(text)
        elif result.status not in _NOT_FAILED:
            # a status this reader does not know ("FAILED", "Error", a new one) could be a
            # failure: it is never read as a pass
            findings.failures.append(f"{text}: a DCGM status gpuaccept does not know")
    if diag.runtime_error:
        findings.failures.append(f"DCGM runtime error: {diag.runtime_error}")

    findings.details = {
        "columns": _COLUMNS,
        "rows": rows,
        "dcgm_level": level,
        "dcgm_version": diag.version,
        # dcgmi's JSON prints a DCGM warning as Fail (dcgmi/Diag.cpp:845-862): a "fail" row may
        # be one; it fails here as it fails dcgmi's own exit status
        "dcgmi_fail_includes_warnings": True,
    }
    counts = Counter(result.status for result in diag.results if not result.summary)
    if not findings.failures and not counts.get("pass"):
        concluded = findings.conclude("")
        return concluded.model_copy(
            update={"status": Status.SKIP, "message": f"dcgmi diag -r {level} passed no test"}
        )
    tally = ", ".join(f"{count} {status}" for status, count in sorted(counts.items()))
    tests = len({(r.category, r.test) for r in diag.results if not r.summary})
    version = f" (DCGM {diag.version})" if diag.version else ""
    return findings.conclude(f"dcgmi diag -r {level}{version}: {tests} tests, {tally}")
