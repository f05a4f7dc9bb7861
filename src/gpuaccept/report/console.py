"""Console lines and the summary table (the CLI prints them)."""

from __future__ import annotations

from rich.table import Table

from gpuaccept.results import CheckResult, RunReport, Status

_STATUS_STYLE = {
    Status.PASS: "green",
    Status.WARN: "yellow",
    Status.FAIL: "bold red",
    Status.ERROR: "bold red",
    Status.SKIP: "dim",
}


def check_line(check: CheckResult) -> str:
    return (
        f"[{check.area}] {check.status.value.upper()} {check.name} "
        f"({check.duration_seconds:.1f} s): {check.message}"
    )


def result_line(report: RunReport) -> str:
    if report.passed:
        return "[RESULT] SUCCESS"
    return f"[RESULT] FAILURE: {', '.join(report.failed_checks)}"


def summary_table(report: RunReport) -> Table:
    table = Table(title=f"gpuaccept {report.command} --level {report.level} ({report.device_mode})")
    for column in ("area", "check", "status", "seconds", "key figures"):
        table.add_column(column)
    for check in report.checks:
        figures = ", ".join(
            f"{'' if m.device_index is None else f'gpu{m.device_index} '}{m.name} "
            f"{m.value:.4g} {m.unit}"
            for m in check.measurements[:4]
        )
        table.add_row(
            check.area,
            check.name,
            f"[{_STATUS_STYLE[check.status]}]{check.status.value}[/]",
            f"{check.duration_seconds:.1f}",
            figures,
        )
    return table
