"""node_exporter textfile metrics for a run, written with prometheus-client's exposition code."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.exposition import generate_latest
from prometheus_client.registry import Collector, CollectorRegistry

from gpuaccept.actions import Action
from gpuaccept.output_files import write_bytes_atomically
from gpuaccept.record.identity import node_name_of
from gpuaccept.results import Outcome, RunReport, Status, Verdict


class _RunCollector(Collector):
    def __init__(self, report: RunReport) -> None:
        self.report = report

    def collect(self) -> Iterator[Metric]:
        # Verdicts and statuses are state sets (one series per state, 1 on the current one),
        # never labels on the value gauges: a series keeps its identity when a verdict flips, so
        # alerts and graphs stay continuous.
        report = self.report
        verdict = report.verdict
        node = node_name_of(report) or ""
        run = {"command": report.command, "level": report.level, "mode": report.device_mode}
        run_labels = [*run, "node"]
        run_values = [*run.values(), node]

        passed = GaugeMetricFamily(
            "gpuaccept_run_passed",
            "1 when the run's verdict is pass (a NOT JUDGED or interrupted run is 0)",
            labels=run_labels,
        )
        passed.add_metric(run_values, float(verdict.passed))
        outcome = GaugeMetricFamily(
            "gpuaccept_run_verdict",
            "The run's verdict as a state set: 1 on the state it ended in",
            labels=[*run_labels, "verdict"],
        )
        for state in Outcome:
            outcome.add_metric(
                [*run_values, state.value.replace(" ", "_")], float(verdict.outcome is state)
            )
        acceptance = GaugeMetricFamily(
            "gpuaccept_run_node_acceptance",
            "1 when the verdict speaks for the node's fitness (accept on the GPUs); 0 for a "
            "benchmark, a training run, or CPU mode (the CPU twins: not a GPU acceptance)",
            labels=run_labels,
        )
        acceptance.add_metric(run_values, float(verdict.is_node_acceptance))
        started = GaugeMetricFamily(
            "gpuaccept_run_start_time_seconds",
            "When the run started (Unix time)",
            labels=run_labels,
        )
        started.add_metric(run_values, datetime.fromisoformat(report.started_at).timestamp())
        duration = GaugeMetricFamily(
            "gpuaccept_run_duration_seconds", "How long the run took", labels=run_labels
        )
        duration.add_metric(run_values, report.duration_seconds)
        plan = report.action_plan
        action = GaugeMetricFamily(
            "gpuaccept_run_action",
            "The node's recommended action as a state set (none, monitor, rerun, reset-gpu, "
            "reboot-node, drain, replace): 1 on the most severe of its findings' actions",
            labels=[*run_labels, "action"],
        )
        for choice in Action:
            action.add_metric([*run_values, choice.value], float(plan.action is choice))
        yield from (passed, outcome, acceptance, started, duration, action)

        check_labels = [*run_labels, "check", "area"]
        check_passed = GaugeMetricFamily(
            "gpuaccept_check_passed",
            "1 when the check passed (warnings and skips count as passed)",
            labels=check_labels,
        )
        check_status = GaugeMetricFamily(
            "gpuaccept_check_status",
            "The check's status as a state set: 1 on the status it ended with",
            labels=[*check_labels, "status"],
        )
        check_seconds = GaugeMetricFamily(
            "gpuaccept_check_duration_seconds", "How long the check took", labels=check_labels
        )
        figure_labels = [*check_labels, "metric", "unit", "gpu", "gpu_name"]
        value = GaugeMetricFamily(
            "gpuaccept_measurement_value",
            "A measured figure, in the unit its label names",
            labels=figure_labels,
        )
        within = GaugeMetricFamily(
            "gpuaccept_measurement_within_reference",
            "1 when the figure is within its reference, 0 when not (figures without a "
            "reference have no series)",
            labels=figure_labels,
        )
        floor = GaugeMetricFamily(
            "gpuaccept_measurement_reference_floor",
            "The lowest value the reference accepts for this figure",
            labels=figure_labels,
        )
        check_action = GaugeMetricFamily(
            "gpuaccept_check_action",
            "The check's recommended action as a state set: 1 on the most severe of its "
            "findings' actions",
            labels=[*check_labels, "action"],
        )
        for check in report.checks:
            labels = [*run_values, check.name, check.area]
            check_passed.add_metric(labels, float(not check.status.is_failure))
            chosen = plan.for_check(check.name)
            for choice in Action:
                check_action.add_metric([*labels, choice.value], float(chosen is choice))
            for status in Status:
                check_status.add_metric([*labels, status.value], float(check.status is status))
            check_seconds.add_metric(labels, check.duration_seconds)
            # A metric is one series per GPU; a repeated name keeps the last figure.
            newest = {(m.name, m.device_index): m for m in check.measurements}
            for m in newest.values():
                # a figure of the whole node names no device; a CPU twin's names the CPU
                gpu = (
                    str(m.device_index)
                    if m.device_index is not None
                    else ("cpu" if m.device_name else "node")
                )
                figure = [*labels, m.name, m.unit, gpu, m.device_name or ""]
                value.add_metric(figure, m.value)
                if m.verdict is not Verdict.UNCHECKED:
                    within.add_metric(figure, float(m.verdict is Verdict.PASS))
                if m.reference is not None:
                    floor.add_metric(figure, m.reference.floor)
        yield from (check_passed, check_status, check_action, check_seconds, value, within, floor)


def render_prometheus(report: RunReport) -> str:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_RunCollector(report))
    return generate_latest(registry).decode("utf-8")


def write_prometheus(report: RunReport, path: Path) -> None:
    """Atomically, so node_exporter never scrapes half a file (temporary names do not end .prom)."""
    write_bytes_atomically(path, render_prometheus(report).encode("utf-8"))
