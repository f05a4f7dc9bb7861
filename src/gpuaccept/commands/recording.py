"""A finished run against the node's past, and into the history: what every run command does
at its end (accept, burnin, bench, train mnist, train llm)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gpuaccept.errors import InputError

if TYPE_CHECKING:
    from gpuaccept.actions import ActionRules
    from gpuaccept.commands.output import Output
    from gpuaccept.errors import Interrupted
    from gpuaccept.results import RunReport
    from gpuaccept.store.history import HistoryLocation


@dataclass(frozen=True)
class DropPolicy:
    """How a run is held against the node's own history."""

    tolerance_percent: float | None  # None: the default of the run's mode
    fail: bool


def drop_policy(
    tolerance_percent: float | None, fail: bool, *, no_history: bool = False
) -> DropPolicy:
    """The policy the options give, refused unless the tolerance is a finite 0 < PERCENT <= 1000
    (a time may well double: more than 100% is meaningful for figures where lower is better)."""
    if tolerance_percent is not None and not (
        math.isfinite(tolerance_percent) and 0 < tolerance_percent <= 1000
    ):
        raise InputError(
            f"--drop-tolerance {tolerance_percent:g}: give a percentage above 0 and at most 1000"
        )
    if no_history and (fail or tolerance_percent is not None):
        flag = "--fail-on-drop" if fail else "--drop-tolerance"
        raise InputError(f"{flag} holds the run against this node's history: not with --no-history")
    return DropPolicy(tolerance_percent, fail)


def compared_with_history(
    report: RunReport,
    target: HistoryLocation | None,
    policy: DropPolicy,
    out: Output,
    rules: ActionRules | None = None,
) -> RunReport:
    """`report` with a `history` check added: its figures against this node's own past runs
    (none without a history, or for a run that judged nothing or was interrupted)."""
    verdict = report.verdict
    if target is None or not verdict.judged or verdict.interrupted_by is not None:
        return report
    from gpuaccept.compare.self_comparison import (
        CHECK_NAME,
        compare_with_own_history,
        with_check,
    )
    from gpuaccept.report.console import check_line
    from gpuaccept.results import CheckResult, Status
    from gpuaccept.store.history import History, HistoryError

    try:
        with History.open(target) as history:
            comparison = compare_with_own_history(
                report, history, tolerance_percent=policy.tolerance_percent
            )
        check = comparison.check(fail_on_drop=policy.fail)
    except HistoryError as error:
        # the run's own outputs matter more than the comparison: say why, write them all
        check = CheckResult(
            name=CHECK_NAME,
            area="HISTORY",
            status=Status.SKIP,
            message=f"not compared with the node's past runs: {error}",
        )
    out.line(check_line(check))
    return with_check(report, check, rules)


def history_path(path: str | Path | None, disabled: bool) -> Path | None:
    """The database file a run would be recorded in (not opened): for the collision checks
    (None for a server's database, which no output file can overwrite)."""
    if disabled:
        return None
    from gpuaccept.store.history import history_location, local_file

    return local_file(history_location(path))


def history_target(path: str | Path | None, disabled: bool, out: Output) -> HistoryLocation | None:
    """The history the run will be recorded in, opened (and so checked) before the run starts.

    A corrupt or foreign database stops the command here, before minutes of measuring. A
    PostgreSQL server that cannot be reached does not: the run goes on and its report waits in
    the spool.
    """
    if disabled:
        if path is not None:
            raise InputError("--history and --no-history: give one or the other")
        return None
    from gpuaccept.store.history import History, HistoryUnreachable, history_location

    target = history_location(path)
    try:
        with History.open(target) as history:
            history.check_writable()
    except HistoryUnreachable as error:
        from gpuaccept.store.spool import check_spool

        spool = check_spool()  # the record must have somewhere to wait
        out.line(f"[HISTORY] {error}; the run goes on and its record will wait in {spool}")
    return target


def record_run(report: RunReport, target: HistoryLocation | None, out: Output) -> None:
    """Store the run (first delivering what the spool holds); a server that cannot be reached
    keeps it in the spool instead, and says so."""
    if target is None:
        return
    from gpuaccept.record.identity import identity_changes
    from gpuaccept.store.history import History, HistoryError, HistoryUnreachable
    from gpuaccept.store.spool import deliver, spool_report

    try:
        with History.open(target) as history:
            delivery = deliver(history)
            # said before it is stored (its own run would answer the lookups): a name that
            # moved to another machine, or a machine under a new name, is neither merged nor
            # split without a word
            try:
                changes = identity_changes(history, report)
            except HistoryUnreachable:
                raise
            except HistoryError as error:  # a damaged past run must not cost this run's record
                changes = [f"the node's earlier names were not checked: {error}"]
            [(run_id, _)] = history.append([(report, "run")])
    except HistoryUnreachable as error:
        kept = spool_report(report)
        out.line(
            f"[HISTORY] {error}; the run is kept in {kept} until a later run or "
            "`gpuaccept history push` delivers it"
        )
        return
    for line in delivery.lines():
        out.line(f"[HISTORY] {line}")
    for change in changes:
        out.line(f"[HISTORY] warning: {change}")
    out.line(f"[HISTORY] run {run_id} recorded in {target}")


def finish_run(
    report: RunReport,
    history: HistoryLocation | None,
    drop: DropPolicy,
    report_dir: Path | None,
    out: Output,
) -> RunReport:
    """A training run's end: held against the node's past, written to --report-dir, recorded,
    its verdict said; the report as written (its verdict's exit code is the command's)."""
    from gpuaccept.report.console import result_line

    report = compared_with_history(report, history, drop, out)
    if report_dir is not None:
        from gpuaccept.report.json_report import write_json_report

        out.line(f"[REPORT] {write_json_report(report, report_dir)}")
    record_run(report, history, out)
    out.line(result_line(report))
    return report


@dataclass(frozen=True)
class StoppedRun:
    """What a training command knows of its run when a signal stops it."""

    command: str  # as the report names it: train-mnist, train-llm
    level: str
    check: str  # the one check it runs (mnist, workload), reported as the one interrupted
    area: str
    device_mode: str
    started: datetime
    monotonic_start: float


def finish_interrupted(
    stopped: Interrupted,
    run: StoppedRun,
    environment: dict[str, Any],
    report_dir: Path | None,
    history: HistoryLocation | None,
    out: Output,
    *,
    lead: bool = True,
) -> int:
    """A training run stopped by SIGTERM (preemption, scancel, an eviction) or Ctrl-C: written
    and recorded as INTERRUPTED (never a failure, never a pass); the exit code, 128 + the
    signal. Only the lead rank writes; every rank exits the same way."""
    import time

    from gpuaccept.report.console import result_line
    from gpuaccept.results import CheckResult, RunReport, Status

    if lead:
        out.line(f"[TRAIN] {stopped}: stopped, writing what finished")
        check = CheckResult(
            name=run.check,
            area=run.area,
            status=Status.ERROR,
            message=str(stopped),
            duration_seconds=time.monotonic() - run.monotonic_start,
        )
        report = RunReport.completed(
            command=run.command,
            level=run.level,
            device_mode=run.device_mode,
            started=run.started,
            monotonic_start=run.monotonic_start,
            checks=[check],
            environment=environment,
            interrupted_by=stopped.signum,
            interrupted_check=run.check,
        )
        if report_dir is not None:
            from gpuaccept.report.json_report import write_json_report

            out.line(f"[REPORT] {write_json_report(report, report_dir)}")
        record_run(report, history, out)
        out.line(result_line(report))
    return stopped.exit_code
