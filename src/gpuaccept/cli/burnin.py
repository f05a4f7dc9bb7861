"""`gpuaccept burnin`: hours of load on every GPU of the node, judged window by window."""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from gpuaccept.cli.accept import DeviceChoice
from gpuaccept.cli.recording import HISTORY, NO_HISTORY, drop_policy, history_target
from gpuaccept.errors import InputError, Interrupted

if TYPE_CHECKING:
    from gpuaccept.actions import ActionRules
    from gpuaccept.burnin.checkpoint import CheckpointLock
    from gpuaccept.burnin.plan import BurnInPlan, BurnInProgress, WindowFigures
    from gpuaccept.burnin.run import BurnInSettings
    from gpuaccept.results import RunReport
    from gpuaccept.store.history import HistoryLocation

_STRESSORS = "gemm-bf16, gemm-fp32, hbm, host-transfer, all-reduce"
# The CPU twin's workers share the machine's cores and memory: equal workers measured ±15% apart
# in the memory windows on the 2-core development machine (GEMMs within 2%), and 26.8% apart in
# CI while the rest of the suite ran beside them, so its default tolerance is 50%, as the CPU
# twins' drop tolerance against the history is (compare/self_comparison.py).
CPU_STRAGGLER_TOLERANCE_PERCENT = 50.0


def burnin(
    duration: str = typer.Option(
        ...,
        "--duration",
        metavar="DURATION",
        help="How long to load the GPUs: 10m, 24h, 1h30m, 3d (72 h).",
        rich_help_panel="What to run",
    ),
    window: str | None = typer.Option(
        None,
        "--window",
        metavar="DURATION",
        show_default="5m, or the whole --duration when shorter",
        help="Length of one judged window; each window runs one stressor.",
        rich_help_panel="What to run",
    ),
    schedule: str | None = typer.Option(
        None,
        "--schedule",
        metavar="S1,S2,...",
        help=f"The stressors' rotation, one per window (default: all of {_STRESSORS}; "
        "all-reduce only with several GPUs).",
        rich_help_panel="What to run",
    ),
    device: DeviceChoice = typer.Option(
        DeviceChoice.auto,
        "--device",
        metavar="[auto|cuda|cpu]",
        help="auto (GPU when usable), cuda, or cpu (the CPU twin).",
        rich_help_panel="What to run",
    ),
    cpu_devices: int = typer.Option(
        3,
        "--cpu-devices",
        min=2,
        max=64,
        metavar="N",
        help="CPU twin: how many workers stand in for GPUs (3 have a majority and a median).",
        rich_help_panel="What to run",
    ),
    seed: int = typer.Option(
        0,
        "--seed",
        min=0,
        max=2**31 - 1,
        metavar="N",
        help="Seed of every device's work.",
        rich_help_panel="What to run",
    ),
    checkpoint: Path | None = typer.Option(
        None,
        "--checkpoint",
        metavar="FILE",
        help="Save progress here after each window; a restarted job given the same file "
        "resumes at the next window (HTCondor eviction, Slurm preemption).",
        rich_help_panel="Outputs",
    ),
    checkpoint_every: int | None = typer.Option(
        None,
        "--checkpoint-every",
        min=1,
        metavar="N",
        help="With --checkpoint-exit-code: windows run before each exit.",
        rich_help_panel="Outputs",
    ),
    checkpoint_exit_code: int | None = typer.Option(
        None,
        "--checkpoint-exit-code",
        min=4,
        max=255,
        metavar="CODE",
        help="After every --checkpoint-every windows (but the last), exit CODE with the "
        "checkpoint written (HTCondor's checkpoint_exit_code: the job is restarted and "
        "resumes).",
        rich_help_panel="Outputs",
    ),
    straggler_tolerance: float | None = typer.Option(
        None,
        "--straggler-tolerance",
        metavar="PERCENT",
        show_default="10 on GPUs (gpu-fryer's), 50 on the CPU twin",
        help="A device this much below the node's median in a window is a straggler; also "
        "the most a device's rate may drift down over the run.",
        rich_help_panel="Judging",
    ),
    report_dir: Path | None = typer.Option(
        None,
        "--report-dir",
        metavar="DIR",
        help="Write the JSON report (with the time series) here, as a new file.",
        rich_help_panel="Outputs",
    ),
    junit: Path | None = typer.Option(
        None, "--junit", metavar="FILE", help="Write JUnit XML.", rich_help_panel="Outputs"
    ),
    rules: Path | None = typer.Option(
        None,
        "--rules",
        metavar="FILE",
        help="TOML of the site's action tables over the built-in ones (docs/actions.md).",
        rich_help_panel="Judging",
    ),
    history: str | None = HISTORY,
    no_history: bool = NO_HISTORY,
) -> None:
    """Keep every GPU of the node busy for --duration with a rotation of stressors, and judge
    each window: wrong bits, hard events, lost GPUs, stragglers, drift.

    Exit 0: passed (warnings allowed); 1: a window failed; 2: bad input; 3: environment error;
    130/143: interrupted (the report says so; the checkpoint keeps the finished windows).
    """
    from gpuaccept.cli.signals import interrupts_as_exceptions

    job = _plan(
        duration=duration,
        window=window,
        schedule=schedule,
        device=device.value,
        cpu_devices=cpu_devices,
        seed=seed,
        checkpoint=checkpoint,
        checkpoint_every=checkpoint_every,
        checkpoint_exit_code=checkpoint_exit_code,
        straggler_tolerance=straggler_tolerance,
        report_dir=report_dir,
        junit=junit,
        history=history,
        no_history=no_history,
        rules=rules,
    )
    with interrupts_as_exceptions():
        report, stop = _run(job)
        if report is None:  # a scheduler's checkpoint, not an outcome: no report yet
            assert job.checkpoint_exit_code is not None, "only --checkpoint-every stops early"
            raise typer.Exit(job.checkpoint_exit_code)
        _write(job, report, stop)


@dataclass(frozen=True)
class BurnInJob:
    """Everything a burn-in needs, checked before anything runs."""

    settings: BurnInSettings
    progress: BurnInProgress
    names: dict[str, str]
    report_dir: Path | None
    junit: Path | None
    history_path: HistoryLocation | None
    checkpoint_exit_code: int | None = None
    lock: CheckpointLock | None = None  # held until the process ends
    rules: ActionRules | None = None  # the site's action tables (--rules); None: built-in


def _plan(
    *,
    duration: str,
    window: str | None,
    schedule: str | None,
    device: str,
    cpu_devices: int,
    seed: int,
    checkpoint: Path | None,
    checkpoint_every: int | None,
    checkpoint_exit_code: int | None,
    straggler_tolerance: float | None,
    report_dir: Path | None,
    junit: Path | None,
    history: str | None,
    no_history: bool,
    rules: Path | None = None,
) -> BurnInJob:
    """Refuse every input that could be wrong, before any work (exit 2 with one line)."""
    from gpuaccept.actions import load_rules
    from gpuaccept.burnin.floors import reference_floors
    from gpuaccept.burnin.judging import DEFAULT_STRAGGLER_TOLERANCE_PERCENT
    from gpuaccept.burnin.plan import (
        DEFAULT_WINDOW_SECONDS,
        BurnInPlan,
        BurnInProgress,
        parse_duration,
    )
    from gpuaccept.burnin.run import BurnInSettings
    from gpuaccept.cli.recording import history_path as recorded_in
    from gpuaccept.output_files import check_output_directory, check_output_file, refuse_collisions
    from gpuaccept.probe.hardware import (
        check_nvml_init_timeout_setting,
        list_cuda_gpus,
        resolve_device_mode,
    )
    from gpuaccept.probe.sysfs import check_sysfs_root_setting
    from gpuaccept.references import load_shipped_references

    check_sysfs_root_setting()  # the ports' counters are read around every window
    check_nvml_init_timeout_setting()  # the GPUs' health is read around every window
    duration_seconds = parse_duration(duration, "--duration")
    window_seconds = (
        min(DEFAULT_WINDOW_SECONDS, duration_seconds)
        if window is None
        else parse_duration(window, "--window")
    )
    rotation = None
    if schedule is not None:
        rotation = [name.strip() for name in schedule.split(",")]
        if not all(rotation):
            raise InputError(f"--schedule {schedule!r}: an empty stressor name")
    if straggler_tolerance is not None and not (
        math.isfinite(straggler_tolerance) and 0 < straggler_tolerance < 100
    ):
        raise InputError(
            f"--straggler-tolerance {straggler_tolerance:g}: give a percentage above 0 and "
            "below 100"
        )
    if checkpoint_exit_code is not None and checkpoint is None:
        raise InputError("--checkpoint-exit-code needs --checkpoint")
    if (checkpoint_every is None) != (checkpoint_exit_code is None):
        raise InputError("--checkpoint-every and --checkpoint-exit-code go together")
    if report_dir is not None:
        check_output_directory(report_dir, "--report-dir")
    if junit is not None:
        check_output_file(junit, "--junit")
    if checkpoint is not None:
        check_output_file(checkpoint, "--checkpoint")
    action_rules = load_rules(rules) if rules is not None else None
    refuse_collisions(
        {
            "--history": recorded_in(history, no_history),
            "--junit": junit,
            "--checkpoint": checkpoint,
        },
        {"--rules": rules},
    )
    mode = resolve_device_mode(device)
    gpus = list_cuda_gpus() if mode == "cuda" else []
    plan = BurnInPlan.build(
        duration_seconds, window_seconds, len(gpus) if mode == "cuda" else cpu_devices, rotation
    )
    tolerance = straggler_tolerance or (
        CPU_STRAGGLER_TOLERANCE_PERCENT if mode == "cpu" else DEFAULT_STRAGGLER_TOLERANCE_PERCENT
    )
    settings = BurnInSettings(
        plan=plan,
        device_mode=mode,
        gpus=[(gpu.index, gpu.uuid) for gpu in gpus],
        cpu_devices=cpu_devices,
        seed=seed,
        straggler_tolerance_percent=tolerance,
        checkpoint=checkpoint,
        windows_per_run=checkpoint_every,
        floors=reference_floors(
            load_shipped_references(), [(f"gpu{gpu.index}", gpu.name, None) for gpu in gpus]
        ),
        rules=action_rules,
    )
    lock = None
    if checkpoint is not None:
        from gpuaccept.burnin.checkpoint import CheckpointLock, refuse_a_reported_burnin, resume
        from gpuaccept.store.history import history_location

        lock = CheckpointLock(checkpoint).acquire()  # before reading: no one writes it meanwhile
        try:
            progress = resume(checkpoint, settings.binding)
            if progress.next_window >= plan.window_count and not no_history:
                refuse_a_reported_burnin(
                    checkpoint, progress, settings.binding.node.hostname, history_location(history)
                )
        except InputError:
            lock.release()
            raise
    else:
        progress = BurnInProgress(plan=plan.fingerprint(), devices=settings.devices)
    from gpuaccept.distributed.children import start_server

    start_server()  # its torch import runs beside this process's own
    return BurnInJob(
        settings=settings,
        progress=progress,
        names={f"gpu{gpu.index}": gpu.name for gpu in gpus},
        report_dir=report_dir,
        junit=junit,
        history_path=history_target(history, no_history),
        checkpoint_exit_code=checkpoint_exit_code,
        lock=lock,
        rules=action_rules,
    )


class _Lines:
    """The burn-in's progress in the job log: a line as each window starts and ends."""

    def __init__(self, plan: BurnInPlan) -> None:
        self.plan = plan

    def window_started(self, window: int, stressor: str, seconds: float) -> None:
        from gpuaccept.burnin.plan import spoken_duration

        typer.echo(
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
        typer.echo(
            f"[BURNIN] window {figures.window + 1}/{self.plan.window_count} {figures.stressor}: "
            f"{said}; {found} failure(s), {len(figures.warnings)} warning(s); "
            f"{spoken_duration(round(load_seconds))} of "
            f"{spoken_duration(self.plan.duration_seconds)} done"
        )
        for text in figures.failures:
            typer.echo(f"[BURNIN]   FAIL {text}")


def _run(job: BurnInJob) -> tuple[RunReport | None, Interrupted | None]:
    """The windows not done yet, and the report of the whole burn-in so far (None when the run
    stopped for the scheduler's checkpoint, with windows left to run)."""
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
        typer.echo(
            environment_line(
                f"gpuaccept burnin --duration {spoken_duration(plan.duration_seconds)}", environment
            )
        )
        if settings.device_mode == "cpu":
            typer.echo(CPU_MODE_LINE)
        for line in plan.describe():
            typer.echo(line)
        typer.echo(f"[BURNIN] on {', '.join(settings.devices)}, seed {settings.seed}")
        if progress.next_window >= plan.window_count:
            typer.echo(
                "[BURNIN] the checkpoint holds every window of this plan: judged again from "
                "their figures"
            )
        elif progress.windows:
            typer.echo(
                f"[BURNIN] resuming at window {progress.next_window + 1} of {plan.window_count}: "
                f"{spoken_duration(round(progress.load_seconds))} of load done before, its "
                f"{len(progress.windows)} window(s) judged again from their figures"
            )
        stop = run_burnin(settings, progress, _Lines(plan))
        if stop is not None:
            stopped = stop.error
            where = f" in window {stop.window + 1}" if stop.window is not None else ""
            kept = (
                f"; {settings.checkpoint} keeps the {len(progress.windows)} finished window(s)"
                if settings.checkpoint is not None
                else ""
            )
            typer.echo(f"[BURNIN] {stopped}{where}: stopped, writing what finished{kept}")
        elif progress.next_window < plan.window_count:
            typer.echo(
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


def _write(job: BurnInJob, report: RunReport, stopped: Interrupted | None) -> None:
    import sys

    from gpuaccept.cli.recording import compared_with_history, record_run
    from gpuaccept.report.console import action_lines, check_line, result_line, summary_text

    if stopped is None and report.verdict.judged and job.history_path is not None:
        report = _compared_with_fleet(report, job)
    for check in report.checks:
        typer.echo(check_line(check))
    if stopped is None:
        report = compared_with_history(
            report, job.history_path, drop_policy(None, False), job.rules
        )
    if job.report_dir is not None:
        from gpuaccept.report.json_report import write_json_report

        typer.echo(f"[REPORT] {write_json_report(report, job.report_dir)}")
    if job.junit is not None:
        from gpuaccept.report.junit import write_junit

        write_junit(report, job.junit)
        typer.echo(f"[REPORT] {job.junit}")
    record_run(report, job.history_path)
    if not sys.stdout.isatty():
        typer.echo(summary_text(report))
    for line in action_lines(report):
        typer.echo(line)
    typer.echo(result_line(report))
    if report.verdict.exit_code:
        raise typer.Exit(report.verdict.exit_code)


def _compared_with_fleet(report: RunReport, job: BurnInJob) -> RunReport:
    """The report with its GPUs held against the same model on other nodes (the history)."""
    from gpuaccept.compare.fleet_comparison import CHECK_NAME, compare_with_fleet
    from gpuaccept.compare.self_comparison import with_check
    from gpuaccept.results import CheckResult, Status
    from gpuaccept.store.history import History, HistoryError

    assert job.history_path is not None
    try:
        with History.open(job.history_path) as history:
            check = compare_with_fleet(report, history, job.settings.straggler_tolerance_percent)
    except HistoryError as error:
        check = CheckResult(
            name=CHECK_NAME,
            area="BURNIN",
            status=Status.SKIP,
            message=f"not compared with other nodes: {error}",
        )
    return with_check(report, check, job.rules)
