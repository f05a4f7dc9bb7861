"""node_exporter textfile metrics for a run, written with prometheus-client's exposition code."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.exposition import generate_latest
from prometheus_client.registry import Collector, CollectorRegistry

from gpuaccept.output_files import write_bytes_atomically
from gpuaccept.results import RunReport, Status


class _RunCollector(Collector):
    def __init__(self, report: RunReport) -> None:
        self.report = report

    def collect(self) -> Iterator[Metric]:
        report = self.report
        node = report.hostname or ""
        run = {"command": report.command, "level": report.level, "mode": report.device_mode}
        run_labels = [*run, "node"]
        run_values = [*run.values(), node]

        passed = GaugeMetricFamily(
            "gpuaccept_run_passed", "1 when every check of the run passed", labels=run_labels
        )
        passed.add_metric(run_values, float(report.passed))
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
        yield from (passed, started, duration)

        check_labels = [*run_labels, "check", "area"]
        check_passed = GaugeMetricFamily(
            "gpuaccept_check_passed",
            "1 when the check passed (warnings and skips count as passed)",
            labels=[*check_labels, "status"],
        )
        check_seconds = GaugeMetricFamily(
            "gpuaccept_check_duration_seconds", "How long the check took", labels=check_labels
        )
        value = GaugeMetricFamily(
            "gpuaccept_measurement_value",
            "A measured figure, in the unit its label names",
            labels=[*check_labels, "metric", "unit", "gpu", "gpu_name", "verdict"],
        )
        floor = GaugeMetricFamily(
            "gpuaccept_measurement_reference_floor",
            "The lowest value the reference accepts for this figure",
            labels=[*check_labels, "metric", "unit", "gpu", "gpu_name"],
        )
        for check in report.checks:
            labels = [*run_values, check.name, check.area]
            check_passed.add_metric(
                [*labels, check.status.value],
                float(check.status not in (Status.FAIL, Status.ERROR)),
            )
            check_seconds.add_metric(labels, check.duration_seconds)
            # A metric is one series per GPU; a repeated name keeps the last figure.
            newest = {(m.name, m.device_index): m for m in check.measurements}
            for m in newest.values():
                gpu = "cpu" if m.device_index is None else str(m.device_index)
                figure = [*labels, m.name, m.unit, gpu, m.device_name or ""]
                value.add_metric([*figure, m.verdict.value], m.value)
                if m.reference is not None:
                    floor.add_metric(figure, m.reference.floor)
        yield from (check_passed, check_seconds, value, floor)


def render_prometheus(report: RunReport) -> str:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_RunCollector(report))
    return generate_latest(registry).decode("utf-8")


def write_prometheus(report: RunReport, path: Path) -> None:
    """Atomically, so node_exporter never scrapes half a file (temporary names do not end .prom)."""
    write_bytes_atomically(path, render_prometheus(report).encode("utf-8"))
