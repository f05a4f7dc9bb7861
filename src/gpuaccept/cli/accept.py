"""`gpuaccept accept`: the acceptance suite."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from gpuaccept.cli.recording import HISTORY, NO_HISTORY, history_target, record_run
from gpuaccept.errors import CheckFailed, InputError

if TYPE_CHECKING:
    from gpuaccept.results import CheckResult


def _ensure_writable_dir(directory: Path, flag: str) -> None:
    """Fail before a long run, not after it, when an output cannot be written."""
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise InputError(f"{flag} {directory}: cannot create: {error.strerror}") from None
    if not os.access(directory, os.W_OK):
        raise InputError(f"{flag} {directory}: not writable")


def accept(
    level: str = typer.Option(
        "standard", "--level", help="quick (seconds), standard (minutes) or full (stress)."
    ),
    only: list[str] = typer.Option([], "--only", help="Run only this check (repeatable)."),
    skip: list[str] = typer.Option([], "--skip", help="Leave out this check (repeatable)."),
    device: str = typer.Option(
        "auto", "--device", help="auto (GPU when usable), cuda, or cpu (the CPU twins)."
    ),
    expect_gpus: int | None = typer.Option(
        None,
        "--expect-gpus",
        min=0,
        help="GPUs that must be usable; default: what the scheduler assigned.",
    ),
    baseline: Path | None = typer.Option(
        None, "--baseline", help="TOML file of reference figures overriding the shipped ones."
    ),
    record_baseline: Path | None = typer.Option(
        None,
        "--record-baseline",
        help="Measure a known-good node and write its figures (median of runs) as a baseline.",
    ),
    baseline_runs: int = typer.Option(
        3, "--baseline-runs", min=1, help="Runs whose median --record-baseline takes."
    ),
    report_dir: Path | None = typer.Option(
        None, "--report-dir", help="Write the JSON report (with environment capture) here."
    ),
    junit: Path | None = typer.Option(None, "--junit", help="Write JUnit XML here."),
    check_timeout: float | None = typer.Option(
        None, "--check-timeout", min=1, help="Seconds each check may take (default per level)."
    ),
    history: Path | None = HISTORY,
    no_history: bool = NO_HISTORY,
) -> None:
    """Run the acceptance suite on the GPUs this process was given.

    Exit 0: fit (warnings allowed); 1: a check failed; 2: bad input; 3: environment error.
    """
    from gpuaccept import references as refs
    from gpuaccept import suite
    from gpuaccept.distributed.local_ranks import refuse_external_launch

    refuse_external_launch()
    specs = suite.select_checks(level, only, skip)
    table = refs.load_shipped_references()
    if baseline is not None:
        table = table.with_overrides(refs.load_baseline(baseline))
    if report_dir is not None:
        _ensure_writable_dir(report_dir, "--report-dir")
    for path, flag in ((junit, "--junit"), (record_baseline, "--record-baseline")):
        if path is not None:
            _ensure_writable_dir(path.parent, flag)
    history_path = history_target(history, no_history)

    from gpuaccept.checks.context import CheckContext
    from gpuaccept.probe.hardware import ExpectedGpus, expected_gpu_count, resolve_device_mode
    from gpuaccept.record.environment import capture_environment
    from gpuaccept.report.console import check_line, result_line, summary_table

    mode = resolve_device_mode(device)
    expected = (
        ExpectedGpus(expect_gpus, "--expect-gpus")
        if expect_gpus is not None
        else expected_gpu_count()
    )
    context = CheckContext(
        level=level,
        device_mode=mode,
        settings=suite.level_settings(level, mode),
        references=refs.without_metrics(table) if record_baseline else table,
        expected=expected,
    )
    environment = capture_environment()
    torch_info = environment.get("torch") or {}
    gpus = environment.get("gpus") or []
    build = f"CUDA {torch_info['cuda']}" if torch_info.get("cuda") else "CPU build"
    typer.echo(
        f"[ENV] gpuaccept accept --level {level}: torch {torch_info.get('version')} "
        f"({build}), {len(gpus)} GPU(s) "
        f"{', '.join(sorted({g['name'] for g in gpus}))}".rstrip()
    )
    if mode == "cpu":
        typer.echo(
            "[ENV] CPU mode: the checks run their CPU twins. This exercises the code, "
            "it is NOT a GPU acceptance."
        )
    timeout = check_timeout or suite.DEFAULT_TIMEOUT_SECONDS[level]

    def show(result: CheckResult) -> None:
        typer.echo(check_line(result))

    runs = baseline_runs if record_baseline else 1
    reports = []
    for run in range(runs):
        if runs > 1:
            typer.echo(f"[BASELINE] run {run + 1} of {runs}")
        reports.append(suite.run_acceptance(specs, context, timeout, environment, show))
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
    if sys.stdout.isatty():
        from rich.console import Console

        Console().print(summary_table(report))
    failed = sorted({name for r in reports for name in r.failed_checks})
    if record_baseline is not None:
        if failed:
            raise CheckFailed(
                f"not recording a baseline: check(s) failed on this node: {', '.join(failed)}"
            )
        figures = refs.baseline_figures(reports)
        if not figures:
            raise InputError("no referenceable figure was measured: nothing to record")
        refs.write_baseline(
            record_baseline, figures, note=f"median of {runs} run(s), level {level}"
        )
        typer.echo(f"[BASELINE] wrote {record_baseline}")
    typer.echo(result_line(report))
    if not report.passed:
        raise typer.Exit(1)
