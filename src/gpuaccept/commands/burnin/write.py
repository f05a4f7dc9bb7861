"""A judged burn-in's end: held against the fleet and the node's own past, written, recorded,
its verdict said."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from gpuaccept.commands.burnin.plan import BurnInJob
    from gpuaccept.commands.output import Output
    from gpuaccept.errors import Interrupted
    from gpuaccept.results import RunReport


def write(
    job: BurnInJob, report: RunReport, stopped: Interrupted | None, out: Output
) -> tuple[RunReport, Path | None]:
    """The report as written and recorded (its verdict's exit code is the command's), and the
    JSON report's path in --report-dir. An interrupted run is compared with nothing: its
    figures are a part of a run."""
    from gpuaccept.commands.recording import compared_with_history, drop_policy, record_run
    from gpuaccept.report.console import action_lines, check_line, result_line

    if stopped is None and report.verdict.judged and job.history_path is not None:
        report = compared_with_fleet(report, job)
    for check in report.checks:
        out.line(check_line(check))
    if stopped is None:
        report = compared_with_history(
            report, job.history_path, drop_policy(None, False), out, job.rules
        )
    written = None
    if job.report_dir is not None:
        from gpuaccept.report.json_report import write_json_report

        written = write_json_report(report, job.report_dir)
        out.line(f"[REPORT] {written}")
    if job.junit is not None:
        from gpuaccept.report.junit import write_junit

        write_junit(report, job.junit)
        out.line(f"[REPORT] {job.junit}")
    record_run(report, job.history_path, out)
    out.summary(report)
    for line in action_lines(report):
        out.line(line)
    out.line(result_line(report))
    return report, written


def compared_with_fleet(report: RunReport, job: BurnInJob) -> RunReport:
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
