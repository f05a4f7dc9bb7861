"""`accept` against a crafted past of this very machine: the self-comparison end to end.

Kept apart from tests/compare/test_self_comparison.py, which the mutation tester runs: an
in-process `accept` there counted every mutant as killed (see pyproject.toml [tool.mutmut]).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gpuaccept.cli import app
from gpuaccept.results import Measurement, RunReport
from gpuaccept.store.history import History
from tests.run_reports import history_with, rejudged

runner = CliRunner()


def _history(tmp_path: Path, *reports: RunReport) -> Path:
    return history_with(tmp_path / "h.sqlite", *reports)


def _slowed(report: RunReport, factor: float) -> RunReport:
    """`report` as if every figure had been `factor` times better (a faster past)."""

    def better(m: Measurement) -> Measurement:
        from gpuaccept.compare.comparison import higher_is_better

        direction = higher_is_better(m.unit)
        if direction is None:
            return m
        return m.model_copy(update={"value": m.value * factor if direction else m.value / factor})

    checks = [
        c.model_copy(update={"measurements": [better(m) for m in c.measurements]})
        for c in report.checks
    ]
    return rejudged(report, checks=checks)


@pytest.mark.slow
def test_accept_on_a_node_slower_than_its_history_warns_and_fails_when_asked(
    tmp_path: Path,
) -> None:
    """The CPU twins against a crafted past of the same machine and stack that was 10x faster."""
    first = tmp_path / "first.sqlite"
    done = runner.invoke(
        app, ["accept", "--device", "cpu", "--level", "quick", "--history", str(first)]
    )
    assert done.exit_code == 0, done.output
    with History.open(first) as history:
        (run,) = history.list_runs()
        real = history.report(run.id)
    crafted = _history(tmp_path, _slowed(real, 10.0))
    reports = tmp_path / "reports"
    again = ["accept", "--device", "cpu", "--level", "quick", "--history", str(crafted)]
    warned = runner.invoke(app, [*again, "--report-dir", str(reports)])
    assert warned.exit_code == 0, warned.output
    assert "[HISTORY] WARN history" in warned.output
    assert "slower than it was" in warned.output
    [written] = list(reports.iterdir())
    stored = json.loads(written.read_text())
    assert stored["checks"][-1]["name"] == "history"
    assert stored["checks"][-1]["status"] == "warn"
    failed = runner.invoke(app, [*again, "--fail-on-drop", "--drop-tolerance", "60"])
    assert failed.exit_code == 1, failed.output
    assert "[RESULT] FAILURE: history" in failed.output
