"""dcgm: NVIDIA DCGM's own diagnostic (`dcgmi diag -r N -j`), each of its tests folded into the
report per GPU. A result dcgmi did not pass (Fail, Warn) is judged by the rows of its DCGM_FR_*
codes (data/actions.toml `[dcgm_error]`, a site's `--rules` over it), as an XID is by its row
(issue #50 §1): a code whose action takes the GPU out of service fails, a MONITOR one warns
(dcgmi's JSON prints a DCGM warning as Fail: see probe/dcgm.py), one a row ignores is said in
the details; where no row judges a code (none, or DCGM's UNKNOWN), what dcgmi printed stands. A
test summary's failure that names no GPU is judged the same; a test that did not run on a GPU
DCGM lists warns; a status this reader does not know fails. It runs when asked
(`accept --dcgm N`) and by default at level full (-r 3). Without DCGM the check is SKIP with the
reason, never PASS.

DCGM numbers GPUs as NVML does and diagnoses every GPU of the node, whatever this process was
assigned; its results say "NVML GPU n" for that reason.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any

from gpuaccept.actions import (
    ActionRules,
    Cause,
    Judge,
    builtin_rules,
    dcgm_error_action,
    dcgm_error_verdict,
)
from gpuaccept.checks.context import CheckContext
from gpuaccept.checks.judging import Findings
from gpuaccept.probe.dcgm import DcgmDiag, DcgmError, DcgmResult, dcgmi_path, run_diag
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


_SEVERITY = {"ignore": 0, "warn": 1, "fail": 2}


@dataclass(frozen=True)
class _Judged:
    verdict: Judge
    code: int | None  # the DCGM_FR_* code that decided it, the finding's cause; None: no code
    why: str  # "" where dcgmi's own status stands


def _judged(result: DcgmResult, rules: ActionRules) -> _Judged:
    """A result dcgmi did not pass (fail, warn) by the rows of its codes, the most severe
    verdict of them; a code no row judges keeps dcgmi's own status (`dcgm_error_verdict`)."""
    printed: Judge = "fail" if result.status == "fail" else "warn"
    if not result.error_ids:
        return _Judged(printed, None, "")
    verdicts = [(dcgm_error_verdict(rules, code) or printed, code) for code in result.error_ids]
    verdict, _ = max(verdicts, key=lambda pair: _SEVERITY[pair[0]])
    # the cause: of the codes that give the verdict, the one whose action is the most severe
    deciding = [code for judged, code in verdicts if judged == verdict]
    code = max(deciding, key=lambda c: _action_severity(rules, c))
    if verdict == printed:
        return _Judged(verdict, code, "")
    row = rules.dcgm_error[str(code)]
    said = (
        f"DCGM severity {row.severity}"
        if row.judge is None and row.action is None
        else (row.why or rules.origin)
    )
    return _Judged(verdict, code, f"{row.name or code}: {said}")


def _action_severity(rules: ActionRules, code: int) -> int:
    action = dcgm_error_action(rules, code)
    return -1 if action is None else action.severity


_JUDGED_AS = {"fail": "a failure", "warn": "a warning", "ignore": "no fault"}


def _file(
    findings: Findings, ignored: list[str], text: str, result: DcgmResult, judged: _Judged
) -> None:
    """The finding with DCGM's code that decided it as its cause (the tables give its action)."""
    why = f"; {judged.why}: judged {_JUDGED_AS[judged.verdict]}" if judged.why else ""
    caused: str = text + why
    if judged.code is not None:
        gpu = None if result.gpu is None else f"NVML GPU {result.gpu}"
        caused = Cause(caused, "dcgm-error", judged.code, gpu)
    if judged.verdict == "ignore":
        ignored.append(caused)
    else:
        (findings.failures if judged.verdict == "fail" else findings.warnings).append(caused)


def judge_diag(
    diag: DcgmDiag, findings: Findings, rules: ActionRules | None = None
) -> tuple[list[dict[str, Any]], list[str]]:
    """Each result of a diag into `findings` (see the module); the table's rows and the results
    their codes' rows ignore."""
    rules = rules or builtin_rules()
    ignored: list[str] = []
    rows: list[dict[str, Any]] = []
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
                text = f"DCGM {result.test} (test summary, no GPU named): fail" + (
                    f" ({message})" if message else ""
                )
                _file(findings, ignored, text, result, _judged(result, rules))
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
        if result.status in ("fail", "warn"):
            _file(findings, ignored, text, result, _judged(result, rules))
        elif result.status == "not run":
            # dcgmi leaves out what did not run: the GPU was not judged by that test
            findings.warnings.append(text)
        elif result.status not in _NOT_FAILED:
            # a status this reader does not know ("FAILED", "Error", a new one) could be a
            # failure: it is never read as a pass
            findings.failures.append(f"{text}: a DCGM status gpuaccept does not know")
    return rows, ignored


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
    rows, ignored = judge_diag(diag, findings, context.action_rules)
    if diag.runtime_error:
        findings.failures.append(f"DCGM runtime error: {diag.runtime_error}")

    findings.details = {
        "columns": _COLUMNS,
        "rows": rows,
        "dcgm_level": level,
        "dcgm_version": diag.version,
        # dcgmi's JSON prints a DCGM warning as Fail (dcgmi/Diag.cpp:845-862): a "fail" row may
        # be one; its codes' rows tell (a MONITOR code warns), and without a code it fails as it
        # fails dcgmi's own exit status
        "dcgmi_fail_includes_warnings": True,
        # results whose codes' rows ignore them: said, never failed
        "ignored": ignored,
    }
    counts = Counter(result.status for result in diag.results if not result.summary)
    # a result dcgmi did not pass is judged even where its row made it a warning or nothing
    judged = any(result.status in ("fail", "warn") for result in diag.results)
    if not findings.failures and not judged and not counts.get("pass"):
        concluded = findings.conclude("")
        return concluded.model_copy(
            update={"status": Status.SKIP, "message": f"dcgmi diag -r {level} passed no test"}
        )
    tally = ", ".join(f"{count} {status}" for status, count in sorted(counts.items()))
    tests = len({(r.category, r.test) for r in diag.results if not r.summary})
    version = f" (DCGM {diag.version})" if diag.version else ""
    return findings.conclude(f"dcgmi diag -r {level}{version}: {tests} tests, {tally}")
