"""An accept run on this node's GPUs: the suite (several runs for --record-baseline), then every
output it was asked for.

The run's lines go through `out`; the verdict decides the exit, which the caller gives. A signal
does not lose the run: the checks that finished are written, the rest say they were not run.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from gpuaccept.commands.recording import compared_with_history, record_run
from gpuaccept.errors import CheckFailed, InputError, Interrupted

if TYPE_CHECKING:
    from gpuaccept.commands.accept.plan import AcceptPlan
    from gpuaccept.commands.output import Output
    from gpuaccept.results import RunReport


def run_suite(plan: AcceptPlan, out: Output) -> tuple[list[RunReport], Interrupted | None]:
    """The suite on this node's GPUs (several runs for --record-baseline); the reports, and the
    interruption that stopped them, if one did."""
    from gpuaccept import references as refs
    from gpuaccept.checks.context import CheckContext
    from gpuaccept.probe.hardware import list_cuda_gpus, resolve_device_mode
    from gpuaccept.record.environment import capture_environment
    from gpuaccept.report.console import CPU_MODE_LINE, environment_line
    from gpuaccept.results import RunReport
    from gpuaccept.suite import DEFAULT_TIMEOUT_SECONDS, level_settings, run_acceptance
    from gpuaccept.suite.runner import skipped

    mode = resolve_device_mode(plan.device)
    gpus = [(gpu.index, gpu.uuid) for gpu in list_cuda_gpus()] if mode == "cuda" else []
    context = CheckContext(
        level=plan.level,
        device_mode=mode,
        settings=level_settings(plan.level, mode),
        references=refs.without_metrics(plan.table) if plan.record_baseline else plan.table,
        expected=plan.expected,
        dcgm_level=plan.dcgm,
        min_busbw_gbps=plan.min_busbw,
        min_other_busbw_gbps=plan.min_other_busbw,
        node=plan.node,
        action_rules=plan.rules,
    )
    reports: list[RunReport] = []
    capture_started, capture_clock = datetime.now(UTC), time.monotonic()
    try:
        environment = capture_environment()
    except Interrupted as stopped:
        # a signal before any check ran: the report still says so, every check not run
        out.line(f"[RUN] {stopped}: stopped before the first check, writing the report")
        reports.append(
            RunReport.completed(
                command="accept",
                level=plan.level,
                device_mode=mode,
                started=capture_started,
                monotonic_start=capture_clock,
                checks=[skipped(spec, f"not run: the run was {stopped}") for spec in plan.specs],
                environment={},
                interrupted_by=stopped.signum,
                rules=plan.rules,
            )
        )
        return reports, stopped
    out.line(environment_line(f"gpuaccept accept --level {plan.level}", environment))
    if mode == "cpu":
        out.line(CPU_MODE_LINE)
    timeout = plan.check_timeout or DEFAULT_TIMEOUT_SECONDS[plan.level]
    runs = plan.baseline_runs if plan.record_baseline else 1
    for run in range(runs):
        if runs > 1:
            out.line(f"[BASELINE] run {run + 1} of {runs}")
        with out.suite_progress() as display:
            outcome = run_acceptance(plan.specs, context, timeout, environment, gpus, display)
        reports.append(outcome.report)
        if outcome.interrupted is not None:
            out.line(f"[RUN] {outcome.interrupted}: stopped the checks, writing what finished")
            return reports, outcome.interrupted
    return reports, None


def write_outputs(
    plan: AcceptPlan,
    reports: list[RunReport],
    interrupted: Interrupted | None,
    written: list[RunReport],
    out: Output,
) -> RunReport:
    """Every output the run was asked for, the history and the baseline; the final report, whose
    verdict gives the exit. It is added to `written` as soon as it is complete, so a caller that
    prints it (--json) has it even when a later step (the baseline, a signal) raises."""
    from gpuaccept.report.console import action_lines, result_line

    if interrupted is None:
        reports = [
            compared_with_history(r, plan.history_path, plan.drop, out, plan.rules) for r in reports
        ]
    report = reports[-1]
    written.append(report)
    if plan.report_dir is not None:
        from gpuaccept.report.json_report import write_json_report

        out.line(f"[REPORT] {write_json_report(report, plan.report_dir)}")
    if plan.junit is not None:
        from gpuaccept.report.junit import write_junit

        write_junit(report, plan.junit)
        out.line(f"[REPORT] {plan.junit}")
    for run_report in reports:
        record_run(run_report, plan.history_path, out)
    out.summary(report)
    if interrupted is None and plan.record_baseline is not None:
        _record_baseline(plan, plan.record_baseline, reports, out)
    for line in action_lines(report):
        out.line(line)
    if plan.evidence is not None and interrupted is None:
        _evidence(report, plan.evidence, out)
    out.line(result_line(report))
    return report


def _record_baseline(plan: AcceptPlan, path: Path, reports: list[RunReport], out: Output) -> None:
    """--record-baseline: the median figures of runs that all passed (a node that failed one is
    no reference for others)."""
    from gpuaccept import references as refs

    unfit = [r.verdict for r in reports if not r.verdict.passed]
    if unfit:
        raise CheckFailed(f"not recording a baseline: a run of this node ended {unfit[0].label}")
    figures = refs.baseline_figures(reports)
    if not figures:
        raise InputError("no referenceable figure was measured: nothing to record")
    refs.write_baseline(path, figures, note=f"median of {len(reports)} run(s), level {plan.level}")
    out.line(f"[BASELINE] wrote {path}")


def _evidence(report: RunReport, directory: Path, out: Output) -> None:
    """The vendor archive of a failure that takes something out of service; a failure to write
    it is said and changes no verdict or exit (the report is written already)."""
    from gpuaccept.errors import GpuacceptError
    from gpuaccept.evidence.bundle import wanted, write_evidence
    from gpuaccept.report.node_verdict import node_of

    if not wanted(report):
        return
    out.line("[EVIDENCE] collecting (nvidia-smi -q, nvidia-bug-report.sh: minutes at most)")
    try:
        found = write_evidence(report, node_of(report) or "node", directory)
    except GpuacceptError as error:
        out.error(f"[EVIDENCE] not written: {error}")
        return
    missing = "; ".join(f"{name}: {why}" for name, why in found.missing.items())
    out.line(f"[EVIDENCE] {found.path} ({len(found.members) + 1} files)")
    if missing:
        out.line(f"[EVIDENCE] not collected: {missing}")
    if found.cut:
        out.line("[EVIDENCE] cut: " + "; ".join(f"{n}: {w}" for n, w in found.cut.items()))
