"""`act`: a run's verdict as a Slurm drain or resume, with guards (issue #31), and a person's word
on the guards' records (the breaker's reset, a regression cleared).

The pieces are elsewhere on purpose: the round's decision is pure (act.rounds, act.policy), the
records are act.ledger's, Slurm is spoken to by act.slurm. This module is the order they are
called in, the checks made before anything is asked of Slurm, and the lines said; `node-verdict`
(commands.node_verdict) shares its guards' values, their checks and the records' file.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from gpuaccept.errors import InputError

if TYPE_CHECKING:
    from gpuaccept.act.ledger import Ledger
    from gpuaccept.act.policy import Decision, Guard, Verdict
    from gpuaccept.commands.output import Output
    from gpuaccept.results import RunReport

REFUSED_EXIT = 4  # a guard refused to take a failing node out: it stays in service, loudly
MODES = ("report", "shadow", "enforce")


@dataclass(frozen=True)
class Guarding:
    """The guards' values `act slurm` and `node-verdict` share (one policy: act.policy), and
    where the records and the round's outputs go; the defaults are the CLI's."""

    resume_level: str = "standard"
    breaker_share: float = 0.02
    breaker_minutes: float = 60.0
    debounce: int = 2
    debounce_hours: float = 24.0
    replace_after: int = 3
    replace_days: float = 7.0
    inspect_after: int = 2
    state: Path | None = None  # None: $GPUACCEPT_ACT_STATE, else the data directory
    record: Path | None = None
    prometheus: Path | None = None


def state_path(state: Path | None) -> Path:
    """The records' file given, else the default; checked (InputError)."""
    from gpuaccept.act.ledger import check_state_path, default_state

    path = state or default_state()
    check_state_path(path)
    return path


def check_outputs(record: Path | None, prometheus: Path | None) -> None:
    """Refuse, before Slurm or Kubernetes is asked anything, an output that cannot be written."""
    from gpuaccept.output_files import check_output_file, refuse_collisions

    if record is not None:
        check_output_file(record, "--record")
    if prometheus is not None:
        check_output_file(prometheus, "--prometheus")
    refuse_collisions({"--record": record, "--prometheus": prometheus}, {})


def checked_guard(act: str, given: Guarding) -> Guard:
    """The guard the values give; InputError on the first one out of its range (the CLI's own
    ranges for the counts are checked last: a library caller has no click to check them)."""
    from gpuaccept.act.policy import Guard
    from gpuaccept.suite.selection import LEVELS

    if act not in MODES:
        raise InputError(f"--act {act!r}: give one of {', '.join(MODES)}")
    if given.resume_level not in LEVELS:
        raise InputError(f"--resume-level {given.resume_level!r}: give one of {', '.join(LEVELS)}")
    share, minutes = given.breaker_share, given.breaker_minutes
    if not (math.isfinite(share) and 0 <= share <= 1):
        raise InputError(f"--breaker-share {share:g}: give a fraction from 0 to 1")
    if not (math.isfinite(minutes) and 0 < minutes <= 7 * 24 * 60):
        raise InputError(f"--breaker-minutes {minutes:g}: give minutes above 0, a week at most")
    hours = given.debounce_hours
    if not (math.isfinite(hours) and 0 < hours <= 30 * 24):
        raise InputError(f"--debounce-hours {hours:g}: give hours above 0, thirty days at most")
    days = given.replace_days
    if not (math.isfinite(days) and 0 < days <= 90):
        raise InputError(f"--replace-days {days:g}: give days above 0, ninety at most")
    if not 1 <= given.debounce <= 20:
        raise InputError(f"--debounce {given.debounce}: give runs from 1 to 20")
    for flag, count in (
        ("--replace-after", given.replace_after),
        ("--inspect-after", given.inspect_after),
    ):
        if not 0 <= count <= 100:
            raise InputError(f"{flag} {count}: give incidents from 0 to 100")
    return Guard(
        share=share,
        minutes=minutes,
        resume_level=given.resume_level,
        debounce=given.debounce,
        debounce_hours=hours,
    )


# -- act slurm ------------------------------------------------------------------------------


@dataclass(frozen=True)
class SlurmRequest:
    """`act slurm`: one node's accept report, acted on in Slurm in `act` mode (report: say it,
    ask Slurm nothing; shadow: decide, change nothing; enforce: drain or resume)."""

    report: Path
    act: str = "enforce"
    node: str | None = None  # Slurm's name for it; None: the report's
    partition: str | None = None  # the nodes the breaker counts; None: all
    earlier: Path | None = None  # the node's earlier reports; None: the report's directory
    guarding: Guarding = field(default_factory=Guarding)


@dataclass(frozen=True)
class SlurmResult:
    """What was decided for the node and the exit code: 0 in service or resumed, 1 the node
    failed, 4 a guard refused its drain."""

    exit_code: int
    node: str
    verdict: Verdict
    decision: Decision  # in report mode: none, nothing acted on
    changed: str = ""  # the node changed between the decision and the act: nothing was done


def run_slurm(request: SlurmRequest, out: Output) -> SlurmResult:
    """Check every input, judge the report, decide against Slurm and the records (in shadow and
    enforce mode), act (in enforce mode), say it and write the record and metrics."""
    from gpuaccept.act.policy import Decision
    from gpuaccept.act.repeats import NodePast, gpu_uuids, node_past
    from gpuaccept.act.rounds import NodeRun, checks_run
    from gpuaccept.act.slurm import act_on_node
    from gpuaccept.suite.selection import LEVELS

    act, given, path = request.act, request.guarding, request.report
    guard = checked_guard(act, given)
    if request.earlier is not None and not request.earlier.is_dir():
        raise InputError(f"--earlier {request.earlier}: not a directory of reports")
    check_outputs(given.record, given.prometheus)
    records = state_path(given.state) if act != "report" else None
    run, verdict, level, failed, named, stack, action = _verdict(path)
    name = request.node or named
    if not name:
        raise InputError(f"report {path}: names no node: give --node")
    if level not in LEVELS:
        raise InputError(f"report {path}: level {level!r} is not one of {', '.join(LEVELS)}")
    if act == "report" or records is None:
        checks = f" ({', '.join(failed)})" if failed else ""
        out.line(
            f"[ACT] report: {name}: {verdict} at {level}{checks}, recommended action {action} "
            "(nothing acted on)"
        )
        nothing = Decision("none", name, "nothing acted on: --act report")
        _write(name, verdict, level, action, nothing, act, given)
        return SlurmResult(1 if verdict == "fail" else 0, name, verdict, nothing)
    past = NodePast()
    if verdict == "fail":
        earlier_runs = _earlier(path, request.earlier, named or name, out, gpu_uuids(run))
        past = node_past(
            run,
            earlier_runs,
            given.debounce_hours,
            given.replace_after,
            given.replace_days,
            given.inspect_after,
        )
    for offence in past.offences:
        out.line(f"[ACT] {name}: {offence.said}")
    escalated = past.action(action)
    node_run = NodeRun(
        name, verdict, level, tuple(failed), stack, escalated, past.repeats, checks_run(run)
    )
    decision, changed = act_on_node(node_run, guard, records, act, request.partition)
    if request.node and named and request.node != named:  # once Slurm has answered for it
        out.error(f"act: note: the report is of {named}; acted on Slurm's node {request.node}")
    if act == "enforce":
        if changed:
            out.line(f"[ACT] {name}: NOT acted on: it changed since it was read ({changed})")
        else:
            out.line(f"[ACT] {name}: {decision.why}")
    else:
        would = {"drain": "would drain", "resume": "would resume"}.get(decision.action)
        said = f"{would}: {decision.why}" if would else decision.why
        out.line(f"[ACT] shadow: {name}: {said} (nothing changed: --act shadow)")
    _write(name, verdict, level, escalated, decision, act, given)
    if decision.action == "refused":
        out.error(f"act: {name}: {decision.why}")
        if decision.guard != "not-ours":  # a pass on a node someone else holds is no refusal
            return SlurmResult(REFUSED_EXIT, name, verdict, decision, changed)
    return SlurmResult(1 if verdict == "fail" else 0, name, verdict, decision, changed)


def _verdict(
    report_path: Path,
) -> tuple[RunReport, Verdict, str, list[str], str | None, str, str]:
    """(the report, verdict, level, failed checks, the node the report names, its stack digest,
    its recommended action) of an accept report."""
    from gpuaccept.record.environment import stack_sha256
    from gpuaccept.report.node_verdict import fitness, node_of
    from gpuaccept.report.reading import dated_in_future, load_report
    from gpuaccept.verdict import ACCEPT

    report = load_report(report_path)
    shown = f"report {report_path}"
    if report.verdict.kind != ACCEPT:
        raise InputError(f"{shown}: not a `gpuaccept accept` report: it says nothing of a node")
    future = dated_in_future(report)
    if future is not None:
        raise InputError(f"{shown}: {future}; nothing is done on it")
    verdict = fitness(report)
    failed = list(report.verdict.failed_checks)
    action = report.action_plan.action.value
    stack = stack_sha256(report.environment)
    return report, verdict, report.level, failed, node_of(report), stack, action


def _earlier(
    path: Path, earlier: Path | None, node: str, out: Output, gpus: frozenset[str] = frozenset()
) -> list[RunReport]:
    """The node's earlier accept reports, and other hosts' where its GPUs ran; what could not be
    read is said on stderr (a damaged neighbour never changes what is done to this node beyond
    not counting)."""
    from gpuaccept.act.repeats import EARLIER_FILES_READ, earlier_reports

    reports, unreadable = earlier_reports(
        earlier or path.parent, node, path, EARLIER_FILES_READ, gpus
    )
    for line in unreadable[:3]:
        out.error(f"act: not counted: {line}")
    if len(unreadable) > 3:
        out.error(f"act: not counted: {len(unreadable) - 3} more unreadable report(s)")
    return reports


def _write(
    node: str,
    verdict: str,
    level: str,
    recommended: str,
    decision: Decision,
    mode: str,
    given: Guarding,
) -> None:
    """The node's decision in the record and the metrics, where they were asked for."""
    from datetime import datetime

    from gpuaccept.act.record import acted, write_outputs

    done = [acted(node, verdict, level, recommended, decision)]
    at = datetime.now().astimezone()
    write_outputs(done, "act slurm", mode, at, given.record, given.prometheus)


# -- a person's word on the records: the breaker's status and reset, a regression cleared ----


@dataclass(frozen=True)
class BreakerStatusRequest:
    state: Path | None = None


@dataclass(frozen=True)
class BreakerResetRequest:
    by: str  # who (recorded)
    why: str  # why (recorded)
    state: Path | None = None


@dataclass(frozen=True)
class RegressionClearRequest:
    stack: str  # the 8 hex digits a drain's [stack ...] shows
    by: str
    why: str
    state: Path | None = None


@dataclass(frozen=True)
class LedgerResult:
    """The records as they stand after the command (always exit 0: a refusal is an error)."""

    exit_code: int
    state: Path
    ledger: Ledger


def run_breaker_status(request: BreakerStatusRequest, out: Output) -> LedgerResult:
    """Say whether the breaker is tripped, the stacks held as regressed, and the last changes."""
    from gpuaccept.act.ledger import load_ledger

    path = state_path(request.state)
    ledger = load_ledger(path)
    trip = ledger.tripped
    if trip is None:
        out.line(f"breaker: not tripped ({path})")
    else:
        out.line(f"breaker: TRIPPED at {trip.at.isoformat(timespec='seconds')}: {trip.why}")
    for held in ledger.regressions:
        out.line(
            f"regression: stack {held.stack} held since {held.since.isoformat(timespec='seconds')}"
            f" ({', '.join(held.checks)}; {', '.join(held.nodes[:5])})"
        )
    for event in ledger.events[-5:]:
        stack = f" stack {event.stack}" if event.stack else ""
        out.line(
            f"  {event.at.isoformat(timespec='seconds')} {event.event}{stack} by {event.by}: "
            f"{event.why}"
        )
    return LedgerResult(0, path, ledger)


def run_breaker_reset(request: BreakerResetRequest, out: Output) -> LedgerResult:
    """Reset a tripped breaker, who and why recorded; drains may start again."""
    from gpuaccept.act.ledger import reset_breaker

    who, reason = _person(request.by, request.why)
    path = state_path(request.state)
    ledger = reset_breaker(path, who, reason)
    out.line(f"breaker: reset by {who}: {reason}")
    return LedgerResult(0, path, ledger)


def run_regression_clear(request: RegressionClearRequest, out: Output) -> LedgerResult:
    """Stop holding a stack as regressed, who and why recorded."""
    from gpuaccept.act.ledger import clear_regression

    stack = request.stack
    if not re.fullmatch(r"[0-9a-f]{8}", stack):
        raise InputError(f"STACK {stack!r}: give the 8 hex digits a drain's [stack ...] shows")
    who, reason = _person(request.by, request.why)
    path = state_path(request.state)
    ledger = clear_regression(path, stack, who, reason)
    out.line(f"regression: stack {stack} cleared by {who}: {reason}")
    return LedgerResult(0, path, ledger)


def _person(by: str, why: str) -> tuple[str, str]:
    """Who and why, as the records keep them: one printable line each."""
    for flag, value in (("--by", by), ("--why", why)):
        if not value.strip() or not value.isprintable() or len(value) > 500:
            raise InputError(f"{flag}: give a line of printable text (500 characters at most)")
    return by.strip(), why.strip()
