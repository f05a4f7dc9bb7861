"""`gpuaccept accept`: the acceptance suite."""

from __future__ import annotations

import math
import time
from datetime import UTC, datetime
from enum import StrEnum
from pathlib import Path

import typer

from gpuaccept.cli.options import finite_number
from gpuaccept.cli.recording import HISTORY, NO_HISTORY, history_target, record_run
from gpuaccept.errors import CheckFailed, InputError, Interrupted
from gpuaccept.suite.selection import LEVELS, check_names, select_checks


class Level(StrEnum):
    quick = "quick"
    standard = "standard"
    full = "full"


class DeviceChoice(StrEnum):
    auto = "auto"
    cuda = "cuda"
    cpu = "cpu"


def _finite_seconds(value: float | None) -> float | None:
    if value is not None and not math.isfinite(value):
        raise typer.BadParameter(f"must be a finite number of seconds (got {value})")
    return value


_CHECKS = ", ".join(check_names())
_LEVELS = "[" + "|".join(LEVELS) + "]"


def accept(
    level: Level = typer.Option(
        Level.standard,
        "--level",
        metavar=_LEVELS,
        help="quick (seconds), standard (a minute) or full (stress, minutes).",
    ),
    only: list[str] = typer.Option(
        [], "--only", metavar="CHECK", help=f"Run only this check (repeatable): {_CHECKS}."
    ),
    skip: list[str] = typer.Option(
        [], "--skip", metavar="CHECK", help="Leave out this check (repeatable)."
    ),
    device: DeviceChoice = typer.Option(
        DeviceChoice.auto,
        "--device",
        metavar="[auto|cuda|cpu]",
        help="auto (GPU when usable), cuda, or cpu (the CPU twins).",
    ),
    expect_gpus: int | None = typer.Option(
        None,
        "--expect-gpus",
        min=0,
        metavar="N",
        help="GPUs that must be usable; default: what the scheduler assigned.",
    ),
    baseline: Path | None = typer.Option(
        None,
        "--baseline",
        metavar="FILE",
        help="TOML file of reference figures overriding the shipped ones.",
    ),
    record_baseline: Path | None = typer.Option(
        None,
        "--record-baseline",
        metavar="FILE",
        help="Measure a known-good node and write its figures (median of runs) as a baseline.",
    ),
    baseline_runs: int = typer.Option(
        3, "--baseline-runs", min=1, metavar="N", help="Runs whose median --record-baseline takes."
    ),
    report_dir: Path | None = typer.Option(
        None,
        "--report-dir",
        metavar="DIR",
        help="Write the JSON report (with environment capture) here, as a new file.",
    ),
    junit: Path | None = typer.Option(None, "--junit", metavar="FILE", help="Write JUnit XML."),
    check_timeout: float | None = typer.Option(
        None,
        "--check-timeout",
        min=1,
        metavar="SECONDS",
        callback=_finite_seconds,
        help="Seconds each check may take (default per level).",
    ),
    dcgm: int | None = typer.Option(
        None,
        "--dcgm",
        min=0,
        max=4,
        metavar="N",
        help="Run DCGM's `dcgmi diag -r N` (1-4) and fold its tests in; 0: never. "
        "Default: -r 3 at level full, off otherwise.",
    ),
    min_busbw: float | None = typer.Option(
        None,
        "--min-busbw",
        min=0,
        metavar="GBPS",
        callback=finite_number,
        help="Fail the all-reduce below 0.9 x this bus bandwidth (GB/s), like "
        "NCCL_TESTS_MIN_BW; accept runs one size, so it is nccl-tests -b SIZE -e SIZE "
        "(bench collectives compares the average over its sweep).",
    ),
    pairwise: bool = typer.Option(
        False,
        "--pairwise",
        help="Across nodes (torchrun or srun): all-reduce between every pair of nodes and "
        "name the slow or failing node.",
    ),
    history: Path | None = HISTORY,
    no_history: bool = NO_HISTORY,
) -> None:
    """Run the acceptance suite on the GPUs this process was given.

    Exit 0: fit (warnings allowed); 1: a check failed, or nothing could be judged; 2: bad input;
    3: environment error; 130/143: interrupted by SIGINT/SIGTERM (the report is still written).
    """
    from gpuaccept import references as refs
    from gpuaccept.output_files import check_output_directory, check_output_file
    from gpuaccept.probe.hardware import nvml_module_name
    from gpuaccept.probe.kernel_log import check_kernel_log_setting
    from gpuaccept.suite.multinode import detect_launch

    nvml_module_name()
    check_kernel_log_setting()
    launch = detect_launch()
    if launch is not None and (junit is not None or record_baseline is not None):
        flag = "--junit" if junit is not None else "--record-baseline"
        raise InputError(
            f"{flag} is for one node: under {launch.launcher} each node writes its "
            "own JSON report (--report-dir)"
        )
    if pairwise and launch is None:
        raise InputError(
            "--pairwise compares nodes: run accept under torchrun or srun across nodes "
            "(slurm/accept-multinode.sbatch, k8s/multinode-indexed-job.yaml)"
        )
    asked = ("dcgm",) if dcgm else ()
    specs = select_checks(level.value, only, [*skip, "dcgm"] if dcgm == 0 else skip, asked)
    table = refs.load_shipped_references()
    if baseline is not None:
        table = table.with_overrides(refs.load_baseline(baseline))
    if report_dir is not None:
        check_output_directory(report_dir, "--report-dir")
    if junit is not None:
        check_output_file(junit, "--junit")
    if record_baseline is not None:
        check_output_file(record_baseline, "--record-baseline")
    from gpuaccept.cli.recording import history_path as recorded_in
    from gpuaccept.output_files import refuse_collisions

    refuse_collisions(
        {
            "--history": recorded_in(history, no_history),
            "--junit": junit,
            "--record-baseline": record_baseline,
        },
        {"--baseline": baseline},
    )
    history_path = history_target(history, no_history)
    if launch is None:
        from gpuaccept.distributed.children import start_server

        start_server()  # its torch import runs beside this process's own

    from gpuaccept.checks.context import CheckContext
    from gpuaccept.cli.progress import suite_display
    from gpuaccept.cli.signals import interrupts_as_exceptions
    from gpuaccept.probe.hardware import (
        ExpectedGpus,
        expected_gpu_count,
        list_cuda_gpus,
        resolve_device_mode,
    )
    from gpuaccept.record.environment import capture_environment
    from gpuaccept.report.console import (
        CPU_MODE_LINE,
        environment_line,
        result_line,
        summary_table,
    )
    from gpuaccept.results import RunReport
    from gpuaccept.suite import DEFAULT_TIMEOUT_SECONDS, level_settings, run_acceptance
    from gpuaccept.suite.runner import skipped

    expected = (
        ExpectedGpus(expect_gpus, "--expect-gpus")
        if expect_gpus is not None
        else expected_gpu_count()
    )
    if launch is not None:
        from gpuaccept.cli.multinode import accept_across_nodes

        accept_across_nodes(
            launch,
            specs,
            level=level.value,
            device=device.value,
            expected=expected,
            table=table,
            report_dir=report_dir,
            history_path=history_path,
            dcgm=dcgm,
            min_busbw=min_busbw,
            pairwise=pairwise,
        )
        return
    with interrupts_as_exceptions():
        mode = resolve_device_mode(device.value)
        gpus = [(gpu.index, gpu.uuid) for gpu in list_cuda_gpus()] if mode == "cuda" else []
        context = CheckContext(
            level=level.value,
            device_mode=mode,
            settings=level_settings(level.value, mode),
            references=refs.without_metrics(table) if record_baseline else table,
            expected=expected,
            dcgm_level=dcgm,
            min_busbw_gbps=min_busbw,
        )
        reports: list[RunReport] = []
        interrupted = None
        capture_started, capture_clock = datetime.now(UTC), time.monotonic()
        try:
            environment = capture_environment()
        except Interrupted as stopped:
            # a signal before any check ran: the report still says so, every check not run
            interrupted, environment = stopped, {}
            typer.echo(f"[RUN] {stopped}: stopped before the first check, writing the report")
            reports.append(
                RunReport.completed(
                    command="accept",
                    level=level.value,
                    device_mode=mode,
                    started=capture_started,
                    monotonic_start=capture_clock,
                    checks=[skipped(spec, f"not run: the run was {stopped}") for spec in specs],
                    environment=environment,
                    interrupted_by=stopped.signum,
                )
            )
        else:
            typer.echo(environment_line(f"gpuaccept accept --level {level.value}", environment))
            if mode == "cpu":
                typer.echo(CPU_MODE_LINE)
        timeout = check_timeout or DEFAULT_TIMEOUT_SECONDS[level.value]
        runs = 0 if interrupted is not None else (baseline_runs if record_baseline else 1)
        for run in range(runs):
            if runs > 1:
                typer.echo(f"[BASELINE] run {run + 1} of {runs}")
            with suite_display() as display:
                outcome = run_acceptance(specs, context, timeout, environment, gpus, display)
            reports.append(outcome.report)
            if outcome.interrupted is not None:
                interrupted = outcome.interrupted
                typer.echo(f"[RUN] {interrupted}: stopped the checks, writing what finished")
                break
        report = reports[-1]

        if report_dir is not None:
            from gpuaccept.report.json_report import write_json_report

            typer.echo(f"[REPORT] {write_json_report(report, report_dir)}")
        if junit is not None:
            from gpuaccept.report.junit import write_junit

            write_junit(report, junit)
            typer.echo(f"[REPORT] {junit}")
        for run_report in reports:
            record_run(run_report, history_path)
        import sys

        if sys.stdout.isatty():
            from rich.console import Console

            Console().print(summary_table(report))
        if interrupted is not None:
            typer.echo(result_line(report))
            raise typer.Exit(report.verdict.exit_code)
        if record_baseline is not None:
            unfit = [r.verdict for r in reports if not r.verdict.passed]
            if unfit:
                raise CheckFailed(
                    f"not recording a baseline: a run of this node ended {unfit[0].label}"
                )
            figures = refs.baseline_figures(reports)
            if not figures:
                raise InputError("no referenceable figure was measured: nothing to record")
            refs.write_baseline(
                record_baseline, figures, note=f"median of {runs} run(s), level {level.value}"
            )
            typer.echo(f"[BASELINE] wrote {record_baseline}")
        typer.echo(result_line(report))
        if report.verdict.exit_code:
            raise typer.Exit(report.verdict.exit_code)
