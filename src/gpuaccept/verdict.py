"""The verdict of a run: computed once from its checks, stored in the report and the history,
and rendered (never re-derived) by every writer, `history fleet`, `node-verdict` and the job
scripts.

A verdict says what the run was (accept, bench or train-mnist; on the GPU or the CPU twins;
which level), whether anything was judged, which checks failed, and, for an interrupted run,
the check under way and the signal. Only a GPU `accept` speaks for a node's fitness
(`RunVerdict.is_node_acceptance`): a benchmark or a training run says how fast something went,
and a CPU run exercises the code.
"""

from __future__ import annotations

import signal
from collections.abc import Mapping, Sequence
from enum import StrEnum
from typing import Literal, Protocol, TypeVar

from pydantic import BaseModel, ConfigDict, Field, model_validator


class Status(StrEnum):
    """A check's status."""

    PASS = "pass"
    WARN = "warn"  # passed, with something an operator should look at
    FAIL = "fail"  # the node is not fit: a figure below its reference, a wrong result
    ERROR = "error"  # the check itself could not complete (exception, timeout, crash)
    SKIP = "skip"  # not run, with the reason in the message

    @property
    def is_failure(self) -> bool:
        return self in (Status.FAIL, Status.ERROR)


class Outcome(StrEnum):
    """What a run amounts to. Only PASS exits 0."""

    PASS = "pass"
    FAIL = "fail"  # a check failed or could not complete
    NOT_JUDGED = "not judged"  # every check was skipped: nothing was judged, which is no pass
    INTERRUPTED = "interrupted"  # SIGINT/SIGTERM stopped the run; no verdict on the rest


class JudgedCheck(Protocol):
    """What the verdict reads of a check (CheckResult has it)."""

    @property
    def name(self) -> str: ...

    @property
    def status(self) -> Status: ...

    @property
    def not_judged(self) -> Mapping[str, str]: ...


ACCEPT = "accept"
# The signals a run may be interrupted by, and their names as stored.
_SIGNALS = {sig.name: sig for sig in (signal.SIGINT, signal.SIGTERM)}


class RunVerdict(BaseModel):
    """The one verdict of a run. Build it with `judge_run`."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    outcome: Outcome
    kind: str = Field(description="the command: accept, bench, train-mnist or burnin")
    mode: str = Field(description="'gpu', or 'cpu' for the CPU twins (never a GPU acceptance)")
    level: str
    judged: bool = Field(description="whether any check was judged (not every one skipped)")
    failed_checks: list[str] = Field(
        default_factory=list, description="checks that failed or could not complete"
    )
    interrupted_check: str | None = Field(
        default=None, description="the check under way when the run was interrupted"
    )
    interrupted_by: str | None = Field(default=None, description="SIGINT or SIGTERM")
    not_judged: dict[str, str] = Field(
        default_factory=dict,
        description="what the run's checks measured but did not judge ('workload speed'), and "
        "why: said beside the outcome, which it never changes (a healthy node still passes)",
    )

    @model_validator(mode="after")
    def _consistent(self) -> RunVerdict:
        if self.mode not in ("gpu", "cpu"):
            raise ValueError(f"mode must be 'gpu' or 'cpu' (got {self.mode!r})")
        interrupted = self.outcome is Outcome.INTERRUPTED
        if interrupted != (self.interrupted_by is not None):
            raise ValueError("interrupted_by is given exactly when the outcome is interrupted")
        if self.interrupted_by is not None and self.interrupted_by not in _SIGNALS:
            raise ValueError(f"interrupted_by must be one of {sorted(_SIGNALS)}")
        if self.interrupted_check is not None and not interrupted:
            raise ValueError("interrupted_check is given only when the outcome is interrupted")
        if self.outcome is Outcome.PASS and (self.failed_checks or not self.judged):
            raise ValueError("a pass has no failed check and judged something")
        if self.outcome is Outcome.FAIL and not self.failed_checks:
            raise ValueError("a failure names the checks that failed")
        if self.outcome is Outcome.NOT_JUDGED and (self.judged or self.failed_checks):
            raise ValueError("a run that judged nothing has no failed check")
        return self

    @property
    def passed(self) -> bool:
        return self.outcome is Outcome.PASS

    @property
    def cpu_mode(self) -> bool:
        return self.mode == "cpu"

    @property
    def is_node_acceptance(self) -> bool:
        """Whether this verdict may say a node is fit or unfit: a GPU `accept` alone."""
        return self.kind == ACCEPT and self.mode == "gpu"

    @property
    def exit_code(self) -> int:
        """0 pass; 1 failed or nothing judged; 128 + signal when interrupted."""
        if self.interrupted_by is not None:
            return 128 + int(_SIGNALS[self.interrupted_by])
        return 0 if self.passed else 1

    @property
    def label(self) -> str:
        """One cell of a table: `PASS`, `PASS (CPU mode)`, `FAIL (a,b)`, `NOT JUDGED`,
        `INTERRUPTED (transfer)`."""
        cpu = " (CPU mode)" if self.cpu_mode else ""
        if self.outcome is Outcome.PASS and self.not_judged:
            return f"PASS, {', '.join(self.not_judged)} NOT JUDGED{cpu}"
        if self.outcome is Outcome.PASS:
            return f"PASS{cpu}"
        if self.outcome is Outcome.FAIL:
            return f"FAIL ({','.join(self.failed_checks)}){cpu}"
        if self.outcome is Outcome.NOT_JUDGED:
            return f"NOT JUDGED{cpu}"
        during = f" ({self.interrupted_check})" if self.interrupted_check else ""
        return f"INTERRUPTED{during}{cpu}"

    @property
    def sentence(self) -> str:
        """The verdict as one line of prose, the console's `[RESULT]` line after the tag."""
        cpu_note = (
            " in CPU mode: the CPU twins ran; this exercised the code, it is NOT a GPU acceptance"
            if self.kind == ACCEPT
            else " in CPU mode: this ran on the CPU and says nothing of a GPU"
        )
        unjudged = "".join(f"; {what} NOT JUDGED: {why}" for what, why in self.not_judged.items())
        if self.outcome is Outcome.PASS:
            return "SUCCESS" + (cpu_note if self.cpu_mode else "") + unjudged
        if self.outcome is Outcome.FAIL:
            return f"FAILURE: {', '.join(self.failed_checks)}{unjudged}"
        if self.outcome is Outcome.NOT_JUDGED:
            return "NOT JUDGED: every selected check was skipped (see the reasons above)"
        during = f" during {self.interrupted_check}" if self.interrupted_check else ""
        before = (
            f"; failed before it: {', '.join(self.failed_checks)}" if self.failed_checks else ""
        )
        return f"INTERRUPTED by {self.interrupted_by}{during}; no verdict on the rest{before}"


def mode_of(device_mode: str) -> str:
    """A report's device mode ('cuda', 'cpu') as the verdict's mode ('gpu', 'cpu')."""
    return "cpu" if device_mode == "cpu" else "gpu"


def judge_run(
    checks: Sequence[JudgedCheck],
    *,
    kind: str,
    device_mode: str,
    level: str,
    interrupted_by: int | str | None = None,
    interrupted_check: str | None = None,
) -> RunVerdict:
    """The verdict of a run whose checks ended as `checks`.

    An interrupted run's check under way is not counted as failed (it was stopped, not judged);
    the checks that failed before the signal still are.
    """
    if isinstance(interrupted_by, int):
        interrupted_by = signal.Signals(interrupted_by).name
    if interrupted_check is not None and interrupted_by is None:
        raise ValueError("interrupted_check needs interrupted_by")
    failed = [
        check.name
        for check in checks
        if check.status.is_failure and check.name != interrupted_check
    ]
    # the check under way was not judged, whatever status the runner gave it
    judged = any(
        check.status is not Status.SKIP and check.name != interrupted_check for check in checks
    )
    # what a finished check measured without judging it: said with the verdict, never a pass of
    # it, never a failure of the node (issue #52)
    not_judged = {
        f"{check.name} {what}": why
        for check in checks
        if check.name != interrupted_check
        for what, why in check.not_judged.items()
    }
    if interrupted_by is not None:
        outcome = Outcome.INTERRUPTED
    elif failed:
        outcome = Outcome.FAIL
    elif judged:
        outcome = Outcome.PASS
    else:
        outcome = Outcome.NOT_JUDGED
    return RunVerdict(
        outcome=outcome,
        kind=kind,
        mode=mode_of(device_mode),
        level=level,
        judged=judged,
        failed_checks=failed,
        interrupted_check=interrupted_check,
        interrupted_by=interrupted_by,
        not_judged=not_judged,
    )


# The check `--history` adds to a run: its figures against the node's own past (compare/
# self_comparison.py writes it)
HISTORY_CHECK = "history"

_Check = TypeVar("_Check", bound=JudgedCheck)


def verdict_fitness(verdict: RunVerdict) -> Literal["pass", "fail", "not-judged"]:
    """`fitness` of a run's verdict (as the history keeps it beside each run)."""
    if verdict.outcome is Outcome.FAIL:
        return "fail"
    if verdict.outcome is Outcome.PASS and verdict.is_node_acceptance:
        return "pass"
    return "not-judged"


def drop_check(checks: Sequence[_Check]) -> _Check | None:
    """A run's own `history` check when it found the node slower than it was (WARN or FAIL)."""
    for check in checks:
        if check.name == HISTORY_CHECK and check.status in (Status.WARN, Status.FAIL):
            return check
    return None
