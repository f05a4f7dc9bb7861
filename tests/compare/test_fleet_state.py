"""The fleet's state (compare/fleet.py), what `history fleet` prints and exits on and what the
fleet page draws: silent data corruption from each node's newest burn-in, the median's sample
floor, the MTBI window's bounds and JSON, and a history with no run yet."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from gpuaccept.cli import app
from gpuaccept.compare.fleet import JUDGED_RUNS, check_window, fleet_state
from gpuaccept.errors import InputError
from gpuaccept.store.history import History
from tests.act.test_offenders import UUID, _run
from tests.compare.test_fleet_comparison import burnin_report
from tests.run_reports import gpu_report, history_with, rejudged
from tests.store.test_history_stores import _corpus


def test_a_nodes_newest_burn_in_that_found_sdc_is_named_and_fails_the_fleet(
    tmp_path: Path,
) -> None:
    path = tmp_path / "h.sqlite"
    runs = [
        burnin_report("node-1", [700.0], hours=0, correct=False),  # SDC, then repaired:
        burnin_report("node-1", [700.0], hours=5),  # its newest burn-in is clean
        burnin_report("node-2", [700.0], hours=1),
        burnin_report("node-3", [700.0], hours=2, correct=False),  # its newest found SDC
    ]
    with History.open(path) as history:
        history.append([(r, "t") for r in runs])
        state = fleet_state(history, tolerance_percent=10.0, min_samples=3, mtbi_days=30.0)
    assert [run.hostname for run in state.sdc] == ["node-3"]
    assert state.attention  # SDC alone, with no accept run at all, calls for a person
    result = CliRunner().invoke(app, ["history", "fleet", "--history", str(path), "--json"])
    assert result.exit_code == 1, result.output
    (sdc,) = json.loads(result.stdout)["sdc"]
    assert sdc["node"] == "node-3"
    table = CliRunner().invoke(app, ["history", "fleet", "--history", str(path)])
    assert "node-3: its newest burn-in (run 4) found silent data corruption" in table.stdout


def test_the_median_needs_as_many_gpus_as_asked(tmp_path: Path) -> None:
    path = tmp_path / "h.sqlite"
    with History.open(path) as history:
        history.append(_corpus())
        flagged = fleet_state(history, tolerance_percent=10.0, min_samples=3, mtbi_days=30.0)
        # the H100s' bf16 figure has 8 GPUs: at 9 no median is trusted, nothing is flagged
        unflagged = fleet_state(history, tolerance_percent=10.0, min_samples=9, mtbi_days=30.0)
    assert [f.point.hostname for f in flagged.view.outliers] == ["node-b"]
    assert unflagged.view.outliers == []


@pytest.mark.parametrize("days", [0.5, 1.0, 3660.0])
def test_the_mtbi_window_takes_what_it_says(days: float) -> None:
    assert check_window(days) == days


@pytest.mark.parametrize("days", [0.0, -1.0, 3660.5, float("nan"), float("inf")])
def test_the_mtbi_window_refuses_the_rest(days: float) -> None:
    with pytest.raises(InputError, match="--mtbi-days"):
        check_window(days)


def test_the_mtbi_json_says_its_window_and_counts(tmp_path: Path) -> None:
    path = tmp_path / "h.sqlite"
    with History.open(path) as history:
        history.append(_corpus())
    result = CliRunner().invoke(app, ["history", "fleet", "--history", str(path), "--json"])
    mtbi = json.loads(result.stdout)["mtbi"]
    assert mtbi["until"] == "2026-11-01T16:00:00+00:00"  # the newest run's start
    assert mtbi["since"] == "2026-10-02T16:00:00+00:00"  # 30 days before
    nodes = {n["node"]: n for n in mtbi["nodes"]}
    # node-b: accept runs at 9 h (fail), 13 h (pass), 14 h (fail): 2 incidents over 5 h
    assert nodes["node-b"] == {
        "node": "node-b",
        "incidents": 2,
        "hours_observed": 5.0,
        "runs": 3,
        "mean_hours_between_incidents": 2.5,
    }
    (gpu,) = mtbi["gpus"]
    assert gpu["runs"] == 3
    assert gpu["hours_observed"] == 2.0  # its runs at 4 h (node-a), 5 h and 6 h (node-b)


def test_a_history_with_no_run_yet_has_an_empty_fleet(tmp_path: Path) -> None:
    path = tmp_path / "h.sqlite"
    with History.open(path):
        pass  # created, nothing recorded
    result = CliRunner().invoke(app, ["history", "fleet", "--history", str(path), "--json"])
    assert result.exit_code == 0, result.output
    said = json.loads(result.stdout)
    assert said["nodes"] == []
    assert said["mtbi"] == {
        "days": 30.0,
        "since": "",
        "until": "",
        "fleet_mean_hours_between_incidents_per_node": None,
        "runs_counted": JUDGED_RUNS,
        "nodes": [],
        "gpus": [],
    }


def test_the_mtbi_json_rounds_hours_to_the_thousandth() -> None:
    from gpuaccept.act.offenders import Mtbi
    from gpuaccept.compare.fleet import FleetMtbi

    third = Mtbi("node-x", 1, 1 / 3, 2)
    said = FleetMtbi("a", "b", 1.0, [third], []).as_json()
    assert said["nodes"] == [
        {
            "node": "node-x",
            "incidents": 1,
            "hours_observed": 0.333,
            "runs": 2,
            "mean_hours_between_incidents": third.mean_hours,
        }
    ]


@pytest.mark.parametrize(("tolerance", "min_gpus"), [(10.0, 3), (10.0, 9), (0.5, 1), (50.0, 3)])
def test_the_page_reads_every_figure_and_judges_as_the_store_counts(
    tmp_path: Path, tolerance: float, min_gpus: int
) -> None:
    """`history fleet` reads only the laggards (figures None); the page reads every figure: both
    say the same laggards and keep the options they were given."""
    path = tmp_path / "h.sqlite"
    with History.open(path) as history:
        history.append(_corpus())
        counted = fleet_state(
            history, tolerance_percent=tolerance, min_samples=min_gpus, mtbi_days=30.0
        ).view
        page = fleet_state(
            history,
            tolerance_percent=tolerance,
            min_samples=min_gpus,
            mtbi_days=30.0,
            every_figure=True,
        ).view
        points = history.fleet_points()
    assert counted.figures is None
    assert page.figures is not None
    assert sorted(map(repr, (f.point for f in page.figures))) == sorted(map(repr, points))
    assert page.outliers == counted.outliers
    assert [f.outlier for f in page.figures].count(True) == len(counted.outliers)
    for view in (counted, page):
        assert (view.tolerance_percent, view.min_samples) == (tolerance, min_gpus)
    # the options change what is flagged: the test would not see them dropped otherwise
    if (tolerance, min_gpus) == (0.5, 1):
        assert len(counted.outliers) > 1
    if min_gpus == 9:
        assert counted.outliers == []


def test_the_failing_nodes_actions_and_the_mtbi_most_incidents_first(tmp_path: Path) -> None:
    path = tmp_path / "h.sqlite"
    with History.open(path) as history:
        # a second GPU named once, beside the moved one named twice
        history.append([*_corpus(), (_run("node-f", 3, remap=True, uuid="GPU-Y"), "t")])
        state = fleet_state(history, tolerance_percent=10.0, min_samples=3, mtbi_days=30.0)
        wanted = {
            run.id: history.report(run.id).action_plan.action.value
            for run in state.view.nodes
            if not run.verdict.passed
        }
    assert wanted  # node-a's and node-b's newest accepts failed
    assert state.actions == wanted
    incidents = [m.incidents for m in state.mtbi.nodes]
    assert incidents == sorted(incidents, reverse=True)
    assert incidents[0] > incidents[-1]
    # the GPUs likewise: the moved one (two incidents) before the other (one)
    assert [(m.what, m.incidents) for m in state.mtbi.gpus] == [(UUID, 2), ("GPU-Y", 1)]


@pytest.fixture(params=["sqlite", "postgresql"])
def either_store(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return str(tmp_path / "history.sqlite")
    return str(request.getfixturevalue("pg_history"))


def test_the_gpus_incidents_are_read_beside_the_rest_and_alone_where_that_cannot_be(
    either_store: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    import threading

    from gpuaccept.compare.fleet import fleet_mtbi
    from gpuaccept.store.history import HistoryUnreachable

    with History.open(either_store) as history:
        history.append([*_corpus(), (_run("node-f", 3, remap=True, uuid="GPU-Y"), "t")])
        alone = fleet_mtbi(history, 30.0)  # every statement on the one connection
        assert [(m.what, m.incidents) for m in alone.gpus] == [(UUID, 2), ("GPU-Y", 1)]
        opened: list[str] = []
        another = History.another

        def counted(self: History) -> Any:
            opened.append(threading.current_thread().name)
            return another(self)

        read_by: list[str] = []
        incidents = type(history).gpu_incidents

        def reading(self: History, since: str) -> Any:
            read_by.append(threading.current_thread().name)
            return incidents(self, since)

        monkeypatch.setattr(History, "another", counted)
        monkeypatch.setattr(type(history), "gpu_incidents", reading)
        beside = fleet_state(history, tolerance_percent=10.0, min_samples=3, mtbi_days=30.0)
        # the GPUs' incidents in a thread of their own, what changed and the stacks in another
        assert sorted(name.split("_")[0] for name in opened) == ["fleet-changes", "gpu-incidents"]
        gpu_thread = [name for name in opened if name.startswith("gpu-incidents")]
        assert read_by == gpu_thread  # read there once, and not again here
        assert beside.mtbi == alone

        def refused(self: History) -> Any:  # a server at its connection limit
            raise HistoryUnreachable("history h: cannot reach it (too many clients already)")

        monkeypatch.setattr(History, "another", refused)
        read_by.clear()
        fallback = fleet_state(history, tolerance_percent=10.0, min_samples=3, mtbi_days=30.0)
        assert read_by == [threading.current_thread().name]
        assert fallback.mtbi == alone
        assert fallback.view == beside.view


def test_a_node_whose_runs_judged_no_gpu_counts_0_runs_and_says_why(tmp_path: Path) -> None:
    """Issue #53 §5: a node that passed in CPU mode read "runs 0" beside nodes with incidents,
    unexplained."""
    cpu_pass = [rejudged(gpu_report("node-c", [800.0], hours=h), device_mode="cpu") for h in (1, 2)]
    path = history_with(
        tmp_path / "h.sqlite",
        gpu_report("node-a", [500.0], hours=0, passed=False),
        gpu_report("node-a", [800.0], hours=3),
        *cpu_pass,
    )
    said = CliRunner().invoke(app, ["history", "fleet", "--history", str(path), "--json"])
    mtbi = json.loads(said.stdout)["mtbi"]
    assert {n["node"]: n["runs"] for n in mtbi["nodes"]} == {"node-a": 2, "node-c": 0}
    assert mtbi["runs_counted"] == JUDGED_RUNS
    assert "a pass in CPU mode or a run that judged nothing counts for neither" in JUDGED_RUNS
    table = CliRunner().invoke(app, ["history", "fleet", "--history", str(path)]).stdout
    [header] = [line for line in table.splitlines() if line.startswith("node ") and "MTBI" in line]
    assert "judged runs" in header
    assert f"(judged {JUDGED_RUNS})" in table
    page = tmp_path / "fleet.html"
    drawn = CliRunner().invoke(
        app, ["report", "--fleet", "--html", str(page), "--history", str(path)]
    )
    assert drawn.exit_code == 0, drawn.output
    assert "<th>judged runs</th>" in page.read_text()
    assert "a pass in CPU mode or a run that judged nothing counts for neither" in page.read_text()
