"""Mean time between incidents per node and per GPU (issue #31 §4): the hours a node or GPU was
observed over its incidents; a GPU followed by its UUID across hosts; `history fleet` shows both
within a window that ends at the history's newest run."""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from pathlib import Path

from typer.testing import CliRunner

from gpuaccept.act.offenders import Mtbi, gpu_mtbi, node_mtbi
from gpuaccept.cli import app
from gpuaccept.store.history import History
from tests.act.test_offenders import UUID, _run

T = "2026-11-0{}T{:02d}:00:00+00:00"


def test_a_nodes_mtbi_is_its_observed_hours_over_its_incidents() -> None:
    """gpu01: fail, fail (one stretch), pass, fail, pass over 40 hours: 2 incidents, 20 h.
    gpu02: passes only: no mean. A run that judged nothing is neither observed nor counted."""
    runs = [
        ("gpu01", T.format(1, 0), True),
        ("gpu01", T.format(1, 1), True),
        ("gpu01", T.format(1, 10), False),
        ("gpu01", T.format(1, 20), True),
        ("gpu01", T.format(2, 16), False),
        ("gpu02", T.format(1, 0), False),
        ("gpu02", T.format(1, 5), None),
        ("gpu02", T.format(1, 8), False),
    ]
    first, second = node_mtbi(runs)
    assert first == Mtbi("gpu01", 2, 40.0, 5)
    assert first.mean_hours == 20.0
    assert second == Mtbi("gpu02", 0, 8.0, 2)
    assert second.mean_hours is None


def test_one_failing_run_alone_has_no_mean() -> None:
    (only,) = node_mtbi([("gpu03", T.format(1, 0), True)])
    assert (only.incidents, only.hours, only.mean_hours) == (1, 0.0, None)


def test_a_gpus_mtbi_follows_it_across_hosts() -> None:
    """GPU X named in run 1 on gpu01, not in run 2 there, moved: named in run 3 on gpu02; GPU Y
    took part in run 1 only, never named: no incident (it is listed as the runs say)."""
    took_part = [
        ("GPU-X", 1, T.format(1, 0), "gpu01", "SN1"),
        ("GPU-X", 2, T.format(1, 12), "gpu01", "SN1"),
        ("GPU-X", 3, T.format(2, 12), "gpu02", "SN1"),
        ("GPU-Y", 1, T.format(1, 0), "gpu01", "SN2"),
    ]
    x, y = gpu_mtbi([("GPU-X", 1), ("GPU-X", 3)], took_part)
    assert x == Mtbi("GPU-X", 2, 36.0, 3, ("gpu01", "gpu02"), "SN1")
    assert x.mean_hours == 18.0
    assert (y.what, y.incidents) == ("GPU-Y", 0)
    # a run of the GPU that named another GPU is a pass for this one
    (alone,) = gpu_mtbi([("GPU-Z", 2)], [took_part[0], took_part[1]])
    assert alone.what == "GPU-X"
    assert alone.incidents == 0


def test_history_fleet_shows_mtbi_per_node_and_gpu(tmp_path: Path) -> None:
    """The same GPU remediated on gpu01, repaired, then moved to gpu02 and remediated there:
    2 incidents of the GPU over two hosts; gpu01 has 1, gpu02 has 1. Runs older than the
    window count for nothing."""
    runs = [
        _run("gpu01", -1000, remap=True),  # 41 days before the newest run: outside 30 days
        _run("gpu01", 0, remap=True),
        _run("gpu01", 24, remap=False),
        _run("gpu02", 48, remap=False, uuid="GPU-other"),
        _run("gpu02", 96, remap=True),  # the GPU now on gpu02
        _run("gpu02", 120, remap=False),
    ]
    database = tmp_path / "history.db"
    with History.open(database) as history:
        history.append([(report, "test") for report in runs])
    result = CliRunner().invoke(app, ["history", "fleet", "--history", str(database), "--json"])
    assert result.exit_code == 0, result.output
    mtbi = json.loads(result.stdout)["mtbi"]
    assert mtbi["days"] == 30
    nodes = {n["node"]: n for n in mtbi["nodes"]}
    assert nodes["gpu01"]["incidents"] == 1
    assert nodes["gpu01"]["hours_observed"] == 24.0
    assert nodes["gpu01"]["mean_hours_between_incidents"] == 24.0
    assert nodes["gpu02"]["incidents"] == 1
    assert nodes["gpu02"]["hours_observed"] == 72.0
    assert mtbi["fleet_mean_hours_between_incidents_per_node"] == 48.0  # 96 h over 2
    (gpu,) = mtbi["gpus"]
    assert gpu["uuid"] == UUID
    assert gpu["hosts"] == ["gpu01", "gpu02"]
    assert gpu["incidents"] == 2
    assert gpu["serial"] == "SN1"
    assert gpu["hours_observed"] == 120.0
    table = CliRunner().invoke(app, ["history", "fleet", "--history", str(database)])
    assert "2 of 2 node(s) had one; the fleet's per node 2.0 d" in table.stdout
    assert UUID in table.stdout
    # a window of two days sees gpu02's incident only
    narrow = CliRunner().invoke(
        app, ["history", "fleet", "--history", str(database), "--json", "--mtbi-days", "2"]
    )
    short = json.loads(narrow.stdout)["mtbi"]
    assert {n["node"]: n["incidents"] for n in short["nodes"]} == {"gpu02": 1}
    assert short["gpus"][0]["incidents"] == 1


def test_the_window_is_checked(tmp_path: Path) -> None:
    database = tmp_path / "history.db"
    with History.open(database) as history:
        history.append([(_run("gpu01", 0, remap=True), "test")])
    for bad in ("0", "-1", "nan", "99999"):
        result = CliRunner().invoke(
            app, ["history", "fleet", "--history", str(database), "--mtbi-days", bad]
        )
        assert result.exit_code == 2, result.output
        assert f"--mtbi-days {bad}" in result.stderr or "--mtbi-days" in result.stderr


def test_a_gpu_is_named_by_stored_plans_and_by_plans_of_older_reports(tmp_path: Path) -> None:
    """A run as gpuaccept stores it today (its actions in the report) names the GPU from its
    stored plan; a report from before actions were stored is planned from its checks: both
    name it, so the GPU's two failures with a pass between are two incidents."""
    old = _run("gpu01", 0, remap=True)
    new = _run("gpu02", 10, remap=True)
    stored = new.model_copy(update={"actions": new.action_plan})
    assert stored.actions is not None
    assert old.actions is None
    with History.open(tmp_path / "h.db") as history:
        history.append([(old, "test"), (_run("gpu03", 5, False), "test"), (stored, "test")])
        (gpu,) = history.gpu_incidents("2026-10-01T00:00:00+00:00")
        assert gpu[:2] == (UUID, 2)
        assert gpu[3:5] == (3, ("gpu01", "gpu03", "gpu02"))
        late = (datetime.fromisoformat(stored.started_at) - timedelta(minutes=1)).isoformat()
        (gpu,) = history.gpu_incidents(late)
        assert gpu[:2] == (UUID, 1)
        assert gpu[3] == 1


def test_a_node_that_judged_nothing_was_not_observed() -> None:
    (idle,) = node_mtbi([("gpu04", T.format(1, 0), None), ("gpu04", T.format(2, 0), None)])
    assert (idle.incidents, idle.hours, idle.runs, idle.mean_hours) == (0, 0.0, 0, None)


def test_a_gpus_runs_are_ordered_by_time_not_by_run_id() -> None:
    """Reports imported late get higher run ids than newer runs: the stretch of failures is
    read in time order (named at hours 0 and 24 with a pass at 12 between: two incidents, not
    one stretch), its hosts listed in the order it was on them, and a GPU without a captured
    serial has none."""
    took_part = [
        ("GPU-X", 9, T.format(1, 0), "gpu01", None),
        ("GPU-X", 2, T.format(1, 12), "gpu01", None),
        ("GPU-X", 1, T.format(2, 0), "gpu02", None),
    ]
    (x,) = gpu_mtbi([("GPU-X", 9), ("GPU-X", 1)], took_part)
    assert (x.incidents, x.hours, x.serial) == (2, 24.0, None)
    assert x.hosts == ("gpu01", "gpu02")  # first seen first, in time


def test_runs_of_one_instant_keep_their_order() -> None:
    """A node's runs that started at the same instant are taken in the order given (the store's),
    not sorted by their outcome: fail, pass, then fail again is two incidents."""
    runs = [("n", T.format(1, 0), True), ("n", T.format(1, 0), False), ("n", T.format(1, 5), True)]
    (node,) = node_mtbi(runs)
    assert node.incidents == 2
    # a GPU's runs of one instant in the order they were stored (run id), whatever the order
    # they are handed over in: run 3 (named), run 5 (not), run 7 (named): two incidents
    took_part = [
        ("GPU-X", 5, T.format(1, 0), "h", "SN"),
        ("GPU-X", 3, T.format(1, 0), "h", "SN"),
        ("GPU-X", 7, T.format(1, 5), "h", "SN"),
    ]
    (gpu,) = gpu_mtbi([("GPU-X", 3), ("GPU-X", 7)], took_part)
    assert gpu.incidents == 2
