"""`gpuaccept preflight`: a verdict in seconds before a job starts (issue #54 §2), as a Slurm Prolog
or a Kubernetes init container.

It is `accept`'s quick level (the same checks, rules and tables: commands.accept's plan and suite
are called, not copied) inside a budget: each check may run the whole budget, and when the budget
ends the checks still to come are stopped and named as not judged (a check cut by the budget is
no failure: a slow check is not a broken node). A failing node goes through `act slurm`'s round
(commands.act.run_slurm: the same guards, the same reason form, never around them), and the job
it would have run is requeued with `scontrol requeue`, so the node is drained with gpuaccept's
reason and the job goes back to the queue, not held. Why not a plain non-zero exit, as Slurm
reads a Prolog's (SchedMD/slurm at 284c3b95, doc/man/man5/slurm.conf.5:3717-3720: "If the prolog
fails (returns a non-zero exit code), this will result in the node being set to a DRAIN state
and the job being requeued. The job will be placed in a held state, unless
nohold_on_prolog_fail is configured"): the job would wait for a person, and slurmctld would drain
with its own reason "Prolog error" any node gpuaccept had not drained (src/slurmctld/
node_mgr.c:3757-3770), a node the breaker kept in service included. docs/preflight-and-sweep.md
says it for operators.

With --gang every node of the job meets the others (suite.gang): one all-reduce across them and
each node's verdict heard by all, so a job never starts on a set with a broken member.
"""

from __future__ import annotations

import math
import re
import signal
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

from gpuaccept.commands.act import BREAKER_PARTITION, MODES, Guarding
from gpuaccept.commands.options import DEVICE, RULES, opt
from gpuaccept.errors import InputError, Interrupted

if TYPE_CHECKING:
    from contextlib import AbstractContextManager

    from gpuaccept.commands.accept.plan import AcceptPlan
    from gpuaccept.commands.output import Output
    from gpuaccept.results import RunReport
    from gpuaccept.suite.gang import Gang, GangOutcome
    from gpuaccept.suite.runner import Observer

DEFAULT_BUDGET = 30.0
MAX_BUDGET = 3600.0
# Seconds of the budget kept for the gang to meet once this node's checks are done: the nodes
# finish their checks at different moments, and the last one must still find the others there.
GANG_SHARE = 0.25
# The budget's end is a timer thread's SIGUSR2 to the main thread (a real signal wakes a blocking
# wait, as SIGTERM does; not SIGALRM and its one process-wide timer, which pytest-timeout and a
# library caller may hold; SIGUSR2 is nobody else's in gpuaccept), raised into the suite as
# SIGTERM's Interrupted: suite.runner stops its workers on it, and a report's verdict knows only
# SIGINT and SIGTERM (verdict.RunVerdict). The preflight tells its own from a real one by the
# alarm having fired, and rejudges the report, so no report written says SIGTERM for it.
_ALARM = signal.SIGUSR2
_RAISED_AS = signal.SIGTERM
_JOB = re.compile(r"[0-9]{1,10}(_[0-9]{1,10})?")


@dataclass(frozen=True, kw_only=True)
class PreflightRequest:
    """One preflight as asked for. `job`: the job to requeue when this node or its gang fails (a
    Prolog's $SLURM_JOB_ID); None: nothing requeued, the exit says the verdict."""

    budget: Annotated[
        float, opt("--budget", "SECONDS", "The whole preflight's time (5-3600 s).")
    ] = DEFAULT_BUDGET
    device: Annotated[str, DEVICE] = "auto"
    only: Annotated[
        Sequence[str], opt("--only", "CHECK", "Only these checks of the quick level.")
    ] = ()
    skip: Annotated[Sequence[str], opt("--skip", "CHECK", "Leave these checks out.")] = ()
    expect_gpus: Annotated[int | None, opt("--expect-gpus", "N", "GPUs this node must have.")] = (
        None
    )
    rules: Annotated[Path | None, RULES] = None
    report_dir: Annotated[
        Path | None, opt("--report-dir", "DIR", "Write the JSON report here.")
    ] = None
    # None: not recorded (a preflight per job would flood it)
    history: Annotated[
        str | None, opt("--history", "FILE|URI", "Record the run (default: not).")
    ] = None
    act: Annotated[str, opt("--act", "MODE", "report, shadow or enforce (as `act slurm`).")] = (
        "report"
    )
    # Slurm's name for the node; None: the report's
    node: Annotated[str | None, opt("--node", "NAME", "Slurm's name for this node.")] = None
    partition: Annotated[str | None, BREAKER_PARTITION] = None
    job: Annotated[
        str | None, opt("--job", "JOBID", "Requeue this job if not fit (a Prolog's).")
    ] = None
    gang: Annotated[bool, opt("--gang", text="All-reduce with the job's other nodes.")] = False
    gang_port: Annotated[int | None, opt("--gang-port", "PORT", "The gang's port on node 0.")] = (
        None
    )
    guarding: Guarding = field(default_factory=Guarding)

    def __post_init__(self) -> None:
        for name in ("only", "skip"):
            if isinstance(getattr(self, name), str):
                raise InputError(f"--{name}: give a list of check names, not one string")
        for name in ("rules", "report_dir"):
            if isinstance(getattr(self, name), str):
                object.__setattr__(self, name, Path(getattr(self, name)))
        budget = self.budget
        if isinstance(budget, bool) or not isinstance(budget, int | float):
            raise InputError(f"--budget: a number of seconds, not {budget!r}")
        if not (math.isfinite(budget) and 5 <= budget <= MAX_BUDGET):
            raise InputError(f"--budget {budget:g}: give 5 to {MAX_BUDGET:g} seconds")
        if self.act not in MODES:
            raise InputError(f"--act {self.act!r}: give one of {', '.join(MODES)}")
        if self.job is not None and not _JOB.fullmatch(self.job):
            raise InputError(f"--job {self.job!r}: give a Slurm job id ($SLURM_JOB_ID)")
        if self.gang_port is not None and not 1024 <= self.gang_port <= 65535:
            raise InputError(f"--gang-port {self.gang_port}: give 1024 to 65535")
        for flag, given in (
            ("--record", self.guarding.record),
            ("--prometheus", self.guarding.prometheus),
        ):
            if given is not None and self.act == "report":
                raise InputError(f"{flag} holds a drain's decision: give it with --act shadow")
        if self.act != "report" and self.report_dir is None:
            raise InputError(
                f"--act {self.act} needs --report-dir: the drain is decided on the written "
                "report, and the node's earlier ones there count its repeats"
            )


@dataclass(frozen=True)
class PreflightResult:
    """How the preflight ended. exit_code: 0 the job may start (passed, or not judged), or it
    failed and its job was requeued (or would be: shadow, report); 1 failed, the job not
    requeued by gpuaccept (no --job, or the requeue failed: a Prolog's non-zero exit then has
    Slurm requeue it held); 4 failed, the guard refused the drain and no --job to requeue."""

    exit_code: int
    verdict: str  # this node's: pass, fail, not-judged (accept's fitness of its report)
    fit: bool  # the job may start: this node did not fail, nor did its gang
    report: RunReport | None
    path: Path | None = None  # the report written (--report-dir)
    not_judged: tuple[str, ...] = ()  # checks the budget cut
    gang: GangOutcome | None = None
    drained: bool = False
    requeued: bool = False
    seconds: float = 0.0


def run(request: PreflightRequest, out: Output) -> PreflightResult:
    """Check the inputs, run the quick level inside the budget, meet the gang, act and requeue."""
    from gpuaccept.commands.act import check_outputs, checked_guard, state_path
    from gpuaccept.output_files import check_output_directory

    clock = time.monotonic()
    if request.act != "report":  # every input the drain needs, refused before any check runs
        checked_guard(request.act, request.guarding)
        state_path(request.guarding.state)
        check_outputs(request.guarding.record, request.guarding.prometheus)
    if request.report_dir is not None:
        check_output_directory(request.report_dir, "--report-dir")
    gang_at = _gang(request) if request.gang else None
    checks_budget = request.budget * (1 - GANG_SHARE if request.gang else 1)
    report, cut = _checks(request, checks_budget, out)
    path = None
    if report is not None and request.report_dir is not None:
        from gpuaccept.report.json_report import write_json_report

        path = write_json_report(report, request.report_dir)
        out.line(f"[REPORT] {path}")
    verdict = "not-judged"
    if report is not None:
        from gpuaccept.report.node_verdict import fitness

        verdict = fitness(report)
    outcome = None
    if gang_at is not None:
        from gpuaccept.probe.hardware import resolve_device_mode
        from gpuaccept.suite.gang import join

        left = max(1.0, request.budget - (time.monotonic() - clock))
        outcome = join(gang_at, verdict, left, resolve_device_mode(request.device))
        _say_gang(outcome, out)
    seconds = time.monotonic() - clock
    why = _why_not_fit(verdict, outcome)
    shown = verdict.upper()
    if verdict == "not-judged" and report is not None and report.verdict.passed:
        shown = "PASS on the CPU twins (no GPU verdict)"  # verdict_fitness: a CPU pass judges none
    head = f"[PREFLIGHT] {shown} in {seconds:.1f} s of a {request.budget:g} s budget"
    out.line(head + (f"; not judged: {', '.join(cut)}" if cut else ""))
    if not why:
        return PreflightResult(0, verdict, True, report, path, cut, outcome, seconds=seconds)
    out.line(f"[PREFLIGHT] not fit for the job: {why}")
    drained, refused = False, False
    if verdict == "fail" and request.act != "report" and path is not None:
        drained, refused = _act(request, path, out)
    requeued, code = _requeue(request, verdict == "fail", refused, out)
    seconds = time.monotonic() - clock
    return PreflightResult(
        code, verdict, False, report, path, cut, outcome, drained, requeued, seconds
    )


def _gang(request: PreflightRequest) -> Gang:
    import os

    from gpuaccept.suite.gang import DEFAULT_PORT, gang_of
    from gpuaccept.suite.multinode import node_name

    port = request.gang_port
    if port is None:
        # one job's gang apart from another's on the same nodes (jobs may share a node)
        job = request.job.split("_")[0] if request.job else ""
        port = 20000 + int(job) % 20000 if job else DEFAULT_PORT
    return gang_of(os.environ, request.node or node_name(os.environ), port, request.job)


def _checks(
    request: PreflightRequest, seconds: float, out: Output
) -> tuple[RunReport | None, tuple[str, ...]]:
    """The quick level within `seconds`: its report, and the checks the budget cut (None and no
    checks when it ran out before the first)."""
    from gpuaccept.commands.accept.one_node import run_suite, write_outputs
    from gpuaccept.commands.accept.plan import plan_accept
    from gpuaccept.commands.accept.request import AcceptRequest

    accept = AcceptRequest(
        level="quick",
        only=tuple(request.only),
        skip=tuple(request.skip),
        device=request.device,
        expect_gpus=request.expect_gpus,
        # no single check outruns the budget; the budget's end cuts whatever is left
        check_timeout=max(1.0, seconds),
        rules=request.rules,
        history=request.history,
        no_history=request.history is None,
    )
    reports: list[RunReport] | None = None
    with _budget(seconds) as budget:
        out = _BudgetSaid(out, budget, seconds)
        try:
            plan = plan_accept(accept, out)
            if plan.launch is not None:
                raise InputError(
                    f"preflight runs once per node, not under {plan.launch.launcher}: "
                    "start it on each node (--gang joins them)"
                )
            reports, interrupted = run_suite(plan, out)
            budget.armed = False  # the suite is over: the budget's end cuts nothing more
        except Interrupted:
            if not budget.fired:
                raise
            if reports is None:
                said = f"the budget of {seconds:.0f} s ran out before the first check"
                out.line(f"[PREFLIGHT] {said}")
                return None, ()
            interrupted = None  # it fired as the suite returned: the run is whole
    if interrupted is not None and not budget.fired:
        write_outputs(plan, reports, interrupted, [], out)
        raise interrupted
    report = reports[-1]
    cut: tuple[str, ...] = ()
    if interrupted is not None:
        report, cut = _without_the_cut(report, plan, seconds)
    return write_outputs(plan, [report], None, [], out), cut


class _BudgetSaid:
    """`out`, but the suite's "[RUN] interrupted by SIGTERM: ..." said as the budget's end when it
    was that (the budget is raised as SIGTERM's Interrupted; no signal was sent)."""

    def __init__(self, out: Output, budget: _Budget, seconds: float) -> None:
        self._out, self._budget, self._seconds = out, budget, seconds

    def line(self, text: str) -> None:
        said = f"[RUN] interrupted by {signal.Signals(_RAISED_AS).name}:"
        if self._budget.fired and text.startswith(said):
            text = f"[RUN] the budget of {self._seconds:.0f} s ran out:" + text[len(said) :]
        self._out.line(text)

    def error(self, text: str) -> None:
        self._out.error(text)

    def summary(self, report: RunReport) -> None:
        self._out.summary(report)

    def suite_progress(self) -> AbstractContextManager[Observer]:
        return self._out.suite_progress()


def _without_the_cut(
    report: RunReport, plan: AcceptPlan, seconds: float
) -> tuple[RunReport, tuple[str, ...]]:
    """The report judged on the checks that ended: the one under way at the budget's end and
    those after it say they were not judged (not failed: `judge_run` counts neither)."""
    from gpuaccept.actions import plan_actions
    from gpuaccept.results import CheckResult, Status
    from gpuaccept.verdict import judge_run

    under_way = report.verdict.interrupted_check
    said = f"not judged: the preflight's budget of {seconds:.0f} s ran out"
    checks: list[CheckResult] = []
    cut: list[str] = []
    for check in report.checks:
        if check.name == under_way or (
            check.status is Status.SKIP and check.message.startswith("not run: the run was")
        ):
            cut.append(check.name)
            check = check.model_copy(update={"status": Status.SKIP, "message": said})
        checks.append(check)
    verdict = judge_run(
        checks, kind=report.command, device_mode=report.device_mode, level=report.level
    )
    rejudged = report.model_copy(
        update={"checks": checks, "verdict": verdict, "actions": plan_actions(checks, plan.rules)}
    )
    return rejudged, tuple(cut)


@dataclass
class _Budget:
    fired: bool = False  # its end came while armed
    armed: bool = True  # once the suite is over its end is nothing to stop


@contextmanager
def _budget(seconds: float) -> Iterator[_Budget]:
    """The budget's end raised as an `Interrupted` where the main thread is (as the CLI's
    SIGINT/SIGTERM are: noted first, held while a step must not be cut), while it is armed.
    Off the main thread no signal can be taken: each check's own timeout (the budget) is then
    the only bound."""
    from gpuaccept import interrupts

    budget = _Budget()
    if threading.current_thread() is not threading.main_thread():
        yield budget
        return

    def handler(_signum: int, _frame: object) -> None:
        if budget.fired or not budget.armed:
            return
        budget.fired = True
        interrupts.note(_RAISED_AS)
        if not interrupts.deferring():
            raise Interrupted(_RAISED_AS)

    previous = signal.signal(_ALARM, handler)
    main = threading.main_thread().ident
    assert main is not None
    timer = threading.Timer(seconds, signal.pthread_kill, (main, _ALARM))
    timer.daemon = True
    timer.start()
    try:
        yield budget
    finally:
        timer.cancel()
        timer.join()
        signal.signal(_ALARM, previous)
        if budget.fired:
            interrupts.clear()  # handled here: a later run in this process starts clean


def _why_not_fit(verdict: str, outcome: GangOutcome | None) -> str:
    if verdict == "fail":
        return "this node failed"
    if outcome is None:
        return ""
    if outcome.broken:
        return outcome.broken
    if outcome.wrong:
        return f"the gang's all-reduce summed {outcome.wrong} element(s) wrong"
    if outcome.failed:
        return f"a node of the job failed: {', '.join(outcome.failed)}"
    return ""


def _say_gang(outcome: GangOutcome, out: Output) -> None:
    if outcome.broken:
        out.line(f"[GANG] {outcome.broken}")
        return
    said = ", ".join(f"{name} {verdict}" for name, verdict in outcome.verdicts.items())
    out.line(f"[GANG] {len(outcome.verdicts)} node(s), all-reduce wrong {outcome.wrong}: {said}")


def _act(request: PreflightRequest, path: Path, out: Output) -> tuple[bool, bool]:
    """The failing node's report through `act slurm`'s round; (drained, the guard refused)."""
    from gpuaccept.commands.act import REFUSED_EXIT, SlurmRequest, run_slurm

    done = run_slurm(
        SlurmRequest(
            report=path,
            act=request.act,
            node=request.node,
            partition=request.partition,
            guarding=request.guarding,
        ),
        out,
    )
    drained = request.act == "enforce" and done.decision.action == "drain" and not done.changed
    return drained, done.exit_code == REFUSED_EXIT


def _requeue(
    request: PreflightRequest, failed: bool, refused: bool, out: Output
) -> tuple[bool, int]:
    """Requeue the job (enforce mode) or say it would be; (requeued, the exit code). A node that
    passed in a gang that did not (a peer failed or never came) requeues too, but its exit stays
    0 whatever scontrol says: the peer's own preflight requeues it as well, and a second requeue
    is refused; a non-zero exit would have Slurm drain this healthy node as "Prolog error"."""
    from gpuaccept.commands.act import REFUSED_EXIT
    from gpuaccept.errors import EnvironmentProblem

    if request.job is None:
        return False, REFUSED_EXIT if refused else 1  # the exit is the verdict: not fit
    if request.act != "enforce":
        said = f"nothing changed: --act {request.act}"
        out.line(f"[PREFLIGHT] would requeue job {request.job} ({said})")
        return False, 0
    from gpuaccept.act.slurm import requeue

    try:
        requeue(request.job)
    except EnvironmentProblem as error:
        out.error(f"preflight: job {request.job} not requeued: {error}")
        return False, 1 if failed else 0
    out.line(f"[PREFLIGHT] requeued job {request.job}: it starts elsewhere, or here once fit")
    return True, 0
