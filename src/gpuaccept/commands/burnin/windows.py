"""The burn-in's windows run (the loop is `gpuaccept.burnin.run`), said line by line, and judged
into the run's report."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from gpuaccept.errors import Interrupted

if TYPE_CHECKING:
    from gpuaccept.burnin.plan import BurnInPlan, WindowFigures
    from gpuaccept.commands.burnin.plan import BurnInJob
    from gpuaccept.commands.output import Output
    from gpuaccept.results import RunReport


class WindowLines:
    """The burn-in's progress in the job log: a line as each window starts and ends."""

    def __init__(self, plan: BurnInPlan, out: Output) -> None:
        self.plan = plan
        self.out = out

    def window_started(self, window: int, stressor: str, seconds: float) -> None:
        from gpuaccept.burnin.plan import spoken_duration

        self.out.line(
            f"[BURNIN] window {window + 1}/{self.plan.window_count}: {stressor} for "
            f"{spoken_duration(seconds)}"
        )

    def window_finished(self, figures: WindowFigures, load_seconds: float) -> None:
        from gpuaccept.burnin.plan import spoken_duration

        rates = figures.throughput
        if rates:
            slowest = min(rates, key=lambda d: rates[d])
            median = sorted(rates.values())[len(rates) // 2]
            said = f"median {median:.4g} {figures.unit}, slowest {slowest} {rates[slowest]:.4g}"
        else:
            said = "no device reported"
        found = len(figures.failures)
        self.out.line(
            f"[BURNIN] window {figures.window + 1}/{self.plan.window_count} {figures.stressor}: "
            f"{said}; {found} failure(s), {len(figures.warnings)} warning(s); "
            f"{spoken_duration(round(load_seconds))} of "
            f"{spoken_duration(self.plan.duration_seconds)} done"
        )
        for text in figures.failures:
            self.out.line(f"[BURNIN]   FAIL {text}")


def run_windows(job: BurnInJob, out: Output) -> tuple[RunReport | None, Interrupted | None]:
    """The windows not done yet, and the report of the whole burn-in so far (None when the run
    stopped for the scheduler's checkpoint, with windows left to run); the signal that stopped
    it, if one did (the report then says so)."""
    from gpuaccept.burnin.checks import burnin_checks
    from gpuaccept.burnin.plan import spoken_duration
    from gpuaccept.burnin.run import run_burnin
    from gpuaccept.record.environment import capture_environment
    from gpuaccept.report.console import CPU_MODE_LINE, environment_line
    from gpuaccept.results import RunReport

    settings, progress, plan = job.settings, job.progress, job.settings.plan
    # a resumed burn-in is reported as one run: from its first process's start, for the time its
    # processes ran (not the time a restarted job waited in the queue between them)
    started, clock = progress.started_at, time.monotonic() - progress.run_seconds()
    stopped: Interrupted | None = None
    environment: dict[str, Any] = {}
    try:
        environment = capture_environment()
    except Interrupted as error:
        stopped = error
    if stopped is None:
        out.line(
            environment_line(
                f"gpuaccept burnin --duration {spoken_duration(plan.duration_seconds)}", environment
            )
        )
        if settings.device_mode == "cpu":
            out.line(CPU_MODE_LINE)
        for line in plan.describe():
            out.line(line)
        out.line(f"[BURNIN] on {', '.join(settings.devices)}, seed {settings.seed}")
        if progress.next_window >= plan.window_count:
            out.line(
                "[BURNIN] the checkpoint holds every window of this plan: judged again from "
                "their figures"
            )
        elif progress.windows:
            out.line(
                f"[BURNIN] resuming at window {progress.next_window + 1} of {plan.window_count}: "
                f"{spoken_duration(round(progress.load_seconds))} of load done before, its "
                f"{len(progress.windows)} window(s) judged again from their figures"
            )
        stop = run_burnin(settings, progress, WindowLines(plan, out))
        if stop is not None:
            stopped = stop.error
            where = f" in window {stop.window + 1}" if stop.window is not None else ""
            kept = (
                f"; {settings.checkpoint} keeps the {len(progress.windows)} finished window(s)"
                if settings.checkpoint is not None
                else ""
            )
            out.line(f"[BURNIN] {stopped}{where}: stopped, writing what finished{kept}")
        elif progress.next_window < plan.window_count:
            out.line(
                f"[BURNIN] checkpoint after window {progress.next_window} written; exiting "
                f"{job.checkpoint_exit_code} so the scheduler saves it and restarts the job"
            )
            return None, None
    checks = burnin_checks(
        progress,
        plan,
        device_mode=settings.device_mode,
        straggler_tolerance_percent=settings.straggler_tolerance_percent,
        names=job.names,
        seconds=time.monotonic() - clock,
    )
    report = RunReport.completed(
        command="burnin",
        level=spoken_duration(plan.duration_seconds),
        device_mode=settings.device_mode,
        started=started,
        monotonic_start=clock,
        checks=checks,
        environment=environment,
        interrupted_by=None if stopped is None else stopped.signum,
        rules=job.rules,
    )
    return report, stopped
