"""`history show`: one stored run, its checks and figures (or the whole report as JSON)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated

from gpuaccept.commands.history.common import HISTORY, opened, run_id
from gpuaccept.commands.options import arg, opt

if TYPE_CHECKING:
    from gpuaccept.commands.output import Output
    from gpuaccept.results import RunReport


@dataclass(frozen=True, kw_only=True)
class ShowRequest:
    # the run id as typed: read once the history is open (common.run_id)
    run: Annotated[str, arg("Run id (see `gpuaccept history list`).")]
    history: Annotated[str | None, HISTORY] = None
    as_json: Annotated[bool, opt("--json", text="Print the stored report as JSON.")] = False


@dataclass(frozen=True)
class ShowResult:
    report: RunReport
    exit_code: int = 0


def run(request: ShowRequest, out: Output) -> ShowResult:
    from gpuaccept.naming import floor_verdict_text
    from gpuaccept.record.identity import node_name_of
    from gpuaccept.report.console import action_lines, check_line, result_line
    from gpuaccept.results import device_label

    with opened(request.history) as store:
        report = store.report(run_id(request.run))
    if request.as_json:
        out.line(report.model_dump_json(indent=2))
        return ShowResult(report)
    out.line(
        f"run {request.run}: gpuaccept {report.command} --level {report.level} "
        f"({report.device_mode}) on {node_name_of(report)}, started {report.started_at}, "
        f"{report.duration_seconds:.1f} s"
    )
    for check in report.checks:
        out.line(check_line(check))
        for m in check.measurements:
            device = device_label(m.device_index)
            out.line(f"    {device} {m.name} {m.value:.4g} {m.unit} ({floor_verdict_text(m)})")
    for line in action_lines(report):
        out.line(line)
    out.line(result_line(report))
    return ShowResult(report)
