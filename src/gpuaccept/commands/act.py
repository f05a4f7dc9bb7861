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
from typing import TYPE_CHECKING, Annotated

from gpuaccept.commands.options import arg, opt
from gpuaccept.errors import InputError

if TYPE_CHECKING:
    from gpuaccept.act.ledger import Ledger
    from gpuaccept.act.policy import Decision, Guard, Verdict
    from gpuaccept.commands.output import Output
    from gpuaccept.results import RunReport

REFUSED_EXIT = 4  # a guard refused to take a failing node out: it stays in service, loudly
MODES = ("report", "shadow", "enforce")


# -- the guards of `act slurm` and `node-verdict` (one policy: act.policy), and where their
# records and outputs go (the person's `act breaker` and `act regression` commands take --state)

BREAKER_PARTITION = opt("--partition", "NAME", "The nodes the breaker counts (default: all).")
RESUME_LEVEL = opt(
    "--resume-level",
    "LEVEL",
    "The level a node gpuaccept took out (drain, taint) must pass to return to service.",
)
BREAKER_SHARE = opt(
    "--breaker-share",
    "FRACTION",
    "At most this share of the nodes (at least one) taken out by gpuaccept within "
    "--breaker-minutes; past it a failing node is left in service and the exit is 4.",
)
BREAKER_MINUTES = opt("--breaker-minutes", "MINUTES", "The breaker's window.")
ACT_STATE = opt(
    "--state",
    "FILE",
    "gpuaccept's records of the breaker's trip and the regressions it holds (JSON; default "
    "$GPUACCEPT_ACT_STATE, else the data directory beside the history). Share one file between "
    "every node's health check (shared storage) so that the breaker counts the whole cluster.",
)
_DEBOUNCE = (
    "A failure whose recommended action is only a rerun takes the node out when it failed "
    "K runs in a row (1: at once); hard faults at once."
)
_REPLACE_AFTER = (
    "A node, or a GPU by its UUID, failing in N incidents within --replace-days is a "
    "repeat offender: its action becomes replace (0: never)."
)
_INSPECT_AFTER = (
    "A node, or a GPU by its UUID, failing in N incidents within --replace-days is drained "
    "for a person to inspect it (its repair did not hold), before --replace-after makes it "
    "replace (0: never). A failure that only a rerun was recommended for is never replaced."
)
_PROMETHEUS = (
    "Write the decisions as node_exporter textfile metrics: gpuaccept_act_decision, "
    "gpuaccept_act_refused{guard=breaker|regression}."
)


@dataclass(frozen=True, kw_only=True)
class Guarding:
    """The guards' values `act slurm` and `node-verdict` share (one policy: act.policy), and
    where the records and the round's outputs go; the defaults are the CLI's."""

    resume_level: Annotated[str, RESUME_LEVEL] = "standard"
    breaker_share: Annotated[float, BREAKER_SHARE] = 0.02
    breaker_minutes: Annotated[float, BREAKER_MINUTES] = 60.0
    debounce: Annotated[int, opt("--debounce", "K", _DEBOUNCE, least=1, most=20)] = 2
    debounce_hours: Annotated[
        float, opt("--debounce-hours", "HOURS", "The runs in a row count within this.")
    ] = 24.0
    replace_after: Annotated[
        int, opt("--replace-after", "N", _REPLACE_AFTER, least=0, most=100)
    ] = 3
    replace_days: Annotated[
        float, opt("--replace-days", "DAYS", "The repeat offenders' window.")
    ] = 7.0
    inspect_after: Annotated[
        int, opt("--inspect-after", "N", _INSPECT_AFTER, least=0, most=100)
    ] = 2
    # None: $GPUACCEPT_ACT_STATE, else the data directory
    state: Annotated[Path | None, ACT_STATE] = None
    record: Annotated[
        Path | None,
        opt(
            "--record",
            "FILE",
            "Write what was decided for each node, and why, as JSON (replaced atomically).",
        ),
    ] = None
    prometheus: Annotated[Path | None, opt("--prometheus", "FILE", _PROMETHEUS)] = None


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


_SLURM_MODES = (
    "report: say the verdict, ask Slurm nothing, change nothing; shadow: decide against Slurm's "
    "state and say what it would do, change nothing; enforce: drain or resume."
)
_EARLIER = (
    "Where the node's earlier accept reports are (default: the report's directory; the newest "
    "192 files are read)."
)


@dataclass(frozen=True, kw_only=True)
class SlurmRequest:
    """`act slurm`: one node's accept report, acted on in Slurm in `act` mode (report: say it,
    ask Slurm nothing; shadow: decide, change nothing; enforce: drain or resume)."""

    report: Annotated[Path, arg("The node's `gpuaccept accept` JSON report.")]
    # Slurm's name for it; None: the report's
    node: Annotated[
        str | None, opt("--node", "NAME", "Slurm's name for the node (default: the report's).")
    ] = None
    act: Annotated[str, opt("--act", "MODE", _SLURM_MODES)] = "enforce"
    partition: Annotated[str | None, BREAKER_PARTITION] = None  # the nodes the breaker counts
    # the node's earlier reports; None: the report's directory
    earlier: Annotated[Path | None, opt("--earlier", "DIR", _EARLIER)] = None
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


BY = opt("--by", "NAME", "Who does it (recorded).")
WHY = opt("--why", "TEXT", "Why (recorded).")


@dataclass(frozen=True, kw_only=True)
class BreakerStatusRequest:
    state: Annotated[Path | None, ACT_STATE] = None


@dataclass(frozen=True, kw_only=True)
class BreakerResetRequest:
    by: Annotated[str, BY]  # who (recorded)
    why: Annotated[str, WHY]  # why (recorded)
    state: Annotated[Path | None, ACT_STATE] = None


@dataclass(frozen=True, kw_only=True)
class RegressionClearRequest:
    # the 8 hex digits a drain's [stack ...] shows
    stack: Annotated[str, arg("The stack's 8-digit digest.")]
    by: Annotated[str, BY]
    why: Annotated[str, WHY]
    state: Annotated[Path | None, ACT_STATE] = None


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
