"""Runs the selected checks in warm workers and gathers one RunReport.

Node checks run once; per-device checks run on every GPU at once (one worker each, results
merged into one check); rank checks use every worker as one rank of a process group; a check
that needs the GPUs idle (DCGM's diagnostic) runs after the GPU workers stop, in a worker that
owns no GPU. A check that raises, crashes its worker or outlives its timeout becomes that
check's ERROR, the worker is replaced, and the suite goes on, so a report is always written.
SIGINT/SIGTERM (raised into the suite as `Interrupted` by the CLI) stop the run: workers are
killed, the running check is ERROR "interrupted", the rest are listed as not run, and the report
is still returned.
"""

from __future__ import annotations

import signal
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

from gpuaccept.checks.context import CheckContext, RanksOutcome
from gpuaccept.errors import Interrupted
from gpuaccept.interrupts import clear as clear_interruption
from gpuaccept.interrupts import raise_if_interrupted
from gpuaccept.probe.nvml_events import GpuEvent
from gpuaccept.results import CheckResult, RunReport, Status, device_label
from gpuaccept.suite.pool import Failure, Outcome, WorkerPool
from gpuaccept.suite.selection import CheckSpec
from gpuaccept.suite.worker import HOST_SLOT, Job, Reply, resolve_target

CPU_TWIN_RANKS = 2
# Ranks give up on a collective after the level's rank timeout; the job deadline adds margin
# for process-group setup, so a hung collective is reported by the ranks when it can be.
_RANK_SETUP_MARGIN_SECONDS = 30.0


class Observer(Protocol):
    """What the CLI shows while the suite runs (nothing below the CLI prints)."""

    def started(self, spec: CheckSpec, devices: list[str]) -> None: ...

    def finished(self, result: CheckResult) -> None: ...

    def note(self, text: str) -> None: ...


@dataclass(frozen=True)
class Interruption:
    """SIGINT/SIGTERM stopped a suite: the signal, and the check it stopped (None between
    checks)."""

    error: Interrupted
    check: str | None


@dataclass(frozen=True)
class SuiteOutcome:
    report: RunReport
    interrupted: Interrupted | None = None


def skipped(spec: CheckSpec, reason: str) -> CheckResult:
    return CheckResult(name=spec.name, area=spec.area, status=Status.SKIP, message=reason)


def _error(spec: CheckSpec, message: str, seconds: float) -> CheckResult:
    return CheckResult(
        name=spec.name,
        area=spec.area,
        status=Status.ERROR,
        message=message,
        duration_seconds=seconds,
    )


def _as_result(spec: CheckSpec, outcome: Outcome, seconds: float) -> CheckResult:
    if isinstance(outcome, Failure):
        return _error(spec, outcome.message, seconds)
    if not outcome.ok:
        return _error(spec, f"the check raised {outcome.value}", seconds)
    result: CheckResult = outcome.value
    return result.model_copy(update={"duration_seconds": seconds})


_WORST_FIRST = (Status.FAIL, Status.ERROR, Status.WARN, Status.PASS, Status.SKIP)


def merge_device_results(
    spec: CheckSpec, parts: dict[str, CheckResult], seconds: float
) -> CheckResult:
    """One check's results from several devices as one result: the worst status, the messages
    of the devices that have it (each named), every measurement, details per device."""
    if len(parts) == 1:
        (only,) = parts.values()
        return only.model_copy(update={"duration_seconds": seconds})
    status = next(s for s in _WORST_FIRST if any(p.status is s for p in parts.values()))
    worst = {label: p for label, p in parts.items() if p.status is status}
    messages = list(dict.fromkeys(p.message for p in worst.values()))
    if status in (Status.PASS, Status.SKIP) and len(messages) == 1:
        message = f"{len(worst)} devices: {messages[0]}"
    else:
        message = "; ".join(
            p.message if p.message.startswith(label) else f"{label}: {p.message}"
            for label, p in worst.items()
        )
    return CheckResult(
        name=spec.name,
        area=spec.area,
        status=status,
        message=message,
        duration_seconds=seconds,
        measurements=[m for p in parts.values() for m in p.measurements],
        details={"per_device": {label: p.details for label, p in parts.items()}},
    )


class SuiteRun:
    """One acceptance run over a pool of workers (one per GPU, or the CPU twin's)."""

    def __init__(
        self,
        context: CheckContext,
        gpus: list[tuple[int, str | None]],
        timeout_seconds: float,
        observer: Observer | None = None,
    ) -> None:
        self.context = context
        self.gpus = gpus
        self.timeout_seconds = timeout_seconds
        self.observer = observer
        self.pool = WorkerPool(context.device_mode, gpus)
        self.events: list[GpuEvent] = []

    @property
    def device_slots(self) -> list[int]:
        return list(range(len(self.gpus))) if self.context.device_mode == "cuda" else [0]

    def _rank_slots(self) -> list[int]:
        return self.device_slots if self.context.device_mode == "cuda" else [0, 1]

    def _label(self, slot: int) -> str:
        return device_label(self.gpus[slot][0] if self.context.device_mode == "cuda" else None)

    def _collect(self, outcomes: dict[int, Outcome]) -> None:
        for outcome in outcomes.values():
            if isinstance(outcome, Reply):
                self.events.extend(outcome.events)

    def start_workers(self, specs: list[CheckSpec]) -> str:
        """Boot every worker the selected checks will need, all at once; say how it went.

        A worker that fails to start is retried by the first job that needs it, which then
        reports the failure as that check's ERROR.
        """
        slots = set(self.device_slots)
        if any(spec.scope == "ranks" for spec in specs):
            slots |= set(self._rank_slots())
        started = time.monotonic()
        failures = self.pool.await_ready(sorted(slots))
        what = f"{len(slots) - len(failures)} warm worker(s) ready in "
        what += f"{time.monotonic() - started:.1f} s (torch and the device context, made once)"
        if failures:
            what += "; " + "; ".join(
                f"{self._label(slot)}: {failure.message}" for slot, failure in failures.items()
            )
        return what

    def read_start_counters(self) -> None:
        """Error counters as the run starts, read in the first worker (NVML stays out of this
        process): the GPUs' and the InfiniBand/RoCE ports', for the final checks to compare with."""
        outcomes = self.pool.run(
            {0: Job("check", "start", "gpuaccept.probe.nvml_health:read_snapshot")},
            self.timeout_seconds,
        )
        self._collect(outcomes)
        outcome = outcomes[0]
        if isinstance(outcome, Reply) and outcome.ok:
            self.context = replace(self.context, start_counters=outcome.value)
        ports = self.pool.run(
            {0: Job("check", "start", "gpuaccept.checks.fabric:read_start")},
            self.timeout_seconds,
        )[0]
        if isinstance(ports, Reply) and ports.ok:
            self.context = replace(self.context, start_fabric_counters=ports.value)

    def _gather_events(self) -> None:
        """Every live worker's events so far, so a final check sees all of them and none is
        lost when the workers stop."""
        jobs = {
            slot: Job("check", "events", "gpuaccept.suite.worker:idle")
            for slot in self.pool.live_slots()
        }
        if jobs:
            self._collect(self.pool.run(jobs, self.timeout_seconds))

    def _check_job(self, spec: CheckSpec, context: CheckContext) -> Job:
        return Job("check", spec.name, spec.target, (context,))

    def run_check(self, spec: CheckSpec) -> CheckResult:
        if spec.final or spec.gpus_idle:
            self._gather_events()
        context = replace(self.context, events=tuple(self.events))
        started = time.monotonic()
        if spec.gpus_idle:
            # the GPU workers stop (their events were collected above); the next check that
            # needs one starts it afresh
            self.pool.close()
        if spec.scope == "node":
            slot = HOST_SLOT if spec.gpus_idle else 0
            outcomes = self.pool.run({slot: self._check_job(spec, context)}, self.timeout_seconds)
            self._collect(outcomes)
            return _as_result(spec, outcomes[slot], time.monotonic() - started)
        if spec.scope == "ranks":
            return self._run_ranks(spec, context, started)
        return self._run_per_device(spec, context, started)

    def _run_per_device(
        self, spec: CheckSpec, context: CheckContext, started: float
    ) -> CheckResult:
        def job(slot: int) -> Job:
            index = self.gpus[slot][0] if context.device_mode == "cuda" else None
            return self._check_job(spec, replace(context, device_index=index))

        slots = self.device_slots
        parts: dict[str, CheckResult] = {}
        batches = [[slot] for slot in slots] if spec.serial else [slots]
        for batch in batches:
            batch_started = time.monotonic()
            outcomes = self.pool.run({slot: job(slot) for slot in batch}, self.timeout_seconds)
            self._collect(outcomes)
            for slot in batch:
                parts[self._label(slot)] = _as_result(
                    spec, outcomes[slot], time.monotonic() - batch_started
                )
        return merge_device_results(spec, parts, time.monotonic() - started)

    def _run_ranks(self, spec: CheckSpec, context: CheckContext, started: float) -> CheckResult:
        assert spec.conclude is not None, f"rank check {spec.name} names no conclude function"
        slots = self._rank_slots()
        backend = "nccl" if context.device_mode == "cuda" else "gloo"
        rank_timeout = context.settings.rank_timeout_seconds
        with tempfile.TemporaryDirectory(prefix="gpuaccept-ranks-") as scratch:
            store = str(Path(scratch) / "store")
            jobs = {
                slot: Job(
                    "rank",
                    spec.name,
                    spec.target,
                    (context,),
                    rank=rank,
                    world=len(slots),
                    store=store,
                    backend=backend,
                    timeout_seconds=rank_timeout,
                )
                for rank, slot in enumerate(slots)
            }
            deadline = min(self.timeout_seconds, rank_timeout + _RANK_SETUP_MARGIN_SECONDS)
            outcomes = self.pool.run(jobs, deadline, together=True)
        self._collect(outcomes)
        problems = [
            f"rank {rank}: " + (o.message if isinstance(o, Failure) else f"raised {o.value}")
            for rank, o in ((rank, outcomes[slot]) for rank, slot in enumerate(slots))
            if isinstance(o, Failure) or not o.ok
        ]
        values: list[Any] | None = None
        if not problems:
            values = [outcomes[slot].value for slot in slots]  # type: ignore[union-attr]
        conclude: Callable[[CheckContext, RanksOutcome], CheckResult] = resolve_target(
            spec.conclude
        )
        outcome = RanksOutcome(len(slots), backend, values, "; ".join(problems) or None)
        try:
            result = conclude(context, outcome)
        except Exception as error:
            return _error(spec, f"the check raised {type(error).__name__}: {error}", 0.0)
        return result.model_copy(update={"duration_seconds": time.monotonic() - started})

    def close(self, *, kill: bool = False) -> None:
        self.pool.close(kill=kill)


def run_suite(
    specs: list[CheckSpec],
    context: CheckContext,
    timeout_seconds: float,
    gpus: list[tuple[int, str | None]],
    observer: Observer | None = None,
) -> tuple[list[CheckResult], list[GpuEvent], Interruption | None]:
    """Run `specs` in order; (results, NVML events seen, the interruption if one came)."""
    missing_gpus = context.cpu_mode and context.expected is not None and context.expected.count > 0
    run = SuiteRun(context, gpus, timeout_seconds, observer)
    results: list[CheckResult] = []
    interrupted: Interrupted | None = None
    stopped: str | None = None
    current: CheckSpec | None = None
    current_started = time.monotonic()
    try:
        started = run.start_workers([s for s in specs if not (missing_gpus and s.needs_device)])
        if observer is not None:
            observer.note(started)
        if any(spec.final for spec in specs):
            run.read_start_counters()
        for spec in specs:
            raise_if_interrupted()  # a signal whose exception was lost stops the run here
            if missing_gpus and spec.needs_device:
                result = skipped(spec, "GPUs were expected but none is usable: nothing to measure")
            else:
                current, current_started = spec, time.monotonic()
                if observer is not None:
                    labels = [run._label(s) for s in run.device_slots]
                    observer.started(spec, labels if spec.scope != "node" else [])
                result = run.run_check(spec)
                current = None
            results.append(result)
            if observer is not None:
                observer.finished(result)
        raise_if_interrupted()
    except (Interrupted, KeyboardInterrupt) as error:
        interrupted = error if isinstance(error, Interrupted) else Interrupted(signal.SIGINT)
        clear_interruption()  # handled: the run reports it and ends
        run.close(kill=True)
        for spec in specs[len(results) :]:
            if spec is current:
                stopped = spec.name
                results.append(_error(spec, f"{interrupted}", time.monotonic() - current_started))
            else:
                results.append(skipped(spec, f"not run: the run was {interrupted}"))
    finally:
        run.close(kill=interrupted is not None)
    return (
        results,
        run.events,
        None if interrupted is None else Interruption(interrupted, stopped),
    )


def run_acceptance(
    specs: list[CheckSpec],
    context: CheckContext,
    timeout_seconds: float,
    environment: dict[str, Any],
    gpus: list[tuple[int, str | None]],
    observer: Observer | None = None,
) -> SuiteOutcome:
    """Run the checks and gather them, with the environment capture, into one RunReport."""
    started = datetime.now(UTC)
    clock = time.monotonic()
    results, _, interruption = run_suite(specs, context, timeout_seconds, gpus, observer)
    report = RunReport.completed(
        command="accept",
        level=context.level,
        device_mode=context.device_mode,
        started=started,
        monotonic_start=clock,
        checks=results,
        environment=environment,
        interrupted_by=None if interruption is None else interruption.error.signum,
        interrupted_check=None if interruption is None else interruption.check,
        rules=context.action_rules,
    )
    return SuiteOutcome(report, None if interruption is None else interruption.error)
