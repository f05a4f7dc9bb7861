"""The fleet's MTBI as textfile metrics (issue #53 §4): `report --fleet --prometheus FILE` writes
what the history's window counts (compare.fleet.fleet_mtbi), per node by the `node` label every
gpuaccept metric carries, per GPU by UUID, and the fleet's, for the Grafana dashboard's MTBI
panels (grafana/gpuaccept-fleet.json)."""

from __future__ import annotations

from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families
from typer.testing import CliRunner

from gpuaccept.cli import app
from gpuaccept.commands.output import Collected
from gpuaccept.commands.report import ReportRequest, run
from gpuaccept.compare.fleet import fleet_mtbi
from gpuaccept.errors import InputError
from gpuaccept.store.history import History
from tests.act.test_offenders import UUID, _run
from tests.run_reports import gpu_report, history_with, soft_failure


def _history(path: Path) -> Path:
    n1 = [(0, True), (10, False), (12, False), (20, True), (30, False), (40, True)]
    return history_with(
        path,
        *(soft_failure("n1", hours, passed=passed) for hours, passed in n1),
        gpu_report("n2", [790.0], hours=0),
        gpu_report("n2", [790.0], hours=40),
        soft_failure("n3", 39),
        # a GPU whose health check found a row remapping pending: named for reset-gpu
        _run("n4", 5, remap=False),
        _run("n4", 6, remap=True),
        _run("n4", 8, remap=False),
    )


def _samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def test_the_fleet_mtbi_is_written_as_the_history_counts_it(tmp_path: Path) -> None:
    db = _history(tmp_path / "h.sqlite")
    target = tmp_path / "textfiles" / "gpuaccept-fleet.prom"
    out = Collected()
    result = run(ReportRequest(source=None, fleet=True, prometheus=target, history=str(db)), out)
    assert result.exit_code == 0
    assert result.written == [target]
    assert out.text() == f"[REPORT] {target}\n"
    samples = _samples(target.read_text())

    def node(metric: str, name: str) -> float | None:
        return samples.get((f"gpuaccept_fleet_node_{metric}", (("node", name),)))

    # n1: passes at 0, 20 and 40 h, fails from 10 to 12 h and at 30 h: two incidents in 40 h
    assert (node("incidents", "n1"), node("observed_hours", "n1")) == (2, 40)
    assert (node("judged_runs", "n1"), node("mtbi_hours", "n1")) == (6, 20)
    # n2 never failed: no mean, and no series that would read as a mean of 0
    assert (node("incidents", "n2"), node("observed_hours", "n2")) == (0, 40)
    assert node("mtbi_hours", "n2") is None
    # n3 failed its one run: an incident, but no time observed to spread it over
    assert (node("incidents", "n3"), node("observed_hours", "n3")) == (1, 0)
    assert node("mtbi_hours", "n3") is None
    with History.open(db, create=False) as store:
        mtbi = fleet_mtbi(store, 30)
    assert samples[("gpuaccept_fleet_mtbi_hours", ())] == mtbi.fleet_hours()
    assert samples[("gpuaccept_fleet_mtbi_window_days", ())] == 30
    gpus = {
        dict(labels)["uuid"]: (value, dict(labels))
        for (name, labels), value in samples.items()
        if name == "gpuaccept_fleet_gpu_incidents"
    }
    assert set(gpus) == {m.what for m in mtbi.gpus} == {UUID}
    assert gpus[UUID] == (1, {"uuid": UUID, "serial": "SN1", "host": "n4"})
    assert (
        samples[
            ("gpuaccept_fleet_gpu_mtbi_hours", (("host", "n4"), ("serial", "SN1"), ("uuid", UUID)))
        ]
        == 3
    )
    for m in mtbi.gpus:
        value, labels = gpus[m.what]
        assert value == m.incidents
        assert labels["host"] == m.hosts[-1]


def test_the_page_and_the_metrics_are_written_together(tmp_path: Path) -> None:
    db = _history(tmp_path / "h.sqlite")
    page, metrics = tmp_path / "fleet.html", tmp_path / "fleet.prom"
    result = CliRunner().invoke(
        app,
        ["report", "--fleet", "--html", str(page), "--prometheus", str(metrics),
         "--history", str(db), "--mtbi-days", "1"],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "<html" in page.read_text()
    samples = _samples(metrics.read_text())
    assert samples[("gpuaccept_fleet_mtbi_window_days", ())] == 1
    # a day before the newest run (40 h): n1's runs at 20, 30 and 40 h, one incident in 20 h
    assert samples[("gpuaccept_fleet_node_incidents", (("node", "n1"),))] == 1
    assert samples[("gpuaccept_fleet_node_mtbi_hours", (("node", "n1"),))] == 20


def test_nothing_is_written_when_an_output_is_wrong(tmp_path: Path) -> None:
    db = _history(tmp_path / "h.sqlite")
    page = tmp_path / "fleet.html"
    with pytest.raises(InputError, match="--prometheus"):
        run(
            ReportRequest(source=None, fleet=True, html=page, prometheus=tmp_path, history=str(db)),
            Collected(),
        )
    assert not page.exists()
    with pytest.raises(InputError, match="--fleet writes its page"):
        ReportRequest(source=None, fleet=True, markdown=tmp_path / "f.md")
