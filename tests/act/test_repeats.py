"""The debounce's count (issue #31 §2): a node's failing runs just before this one, read from its
earlier reports; and `act slurm` over the fleet's stand-in Slurm with them."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gpuaccept.act.repeats import consecutive_failures, earlier_reports
from gpuaccept.cli import app
from gpuaccept.errors import InputError
from gpuaccept.results import RunReport, Status
from tests.run_reports import rejudged, soft_failure


def _run(hours: float, passed: bool, node: str = "gpu01", check: str = "compute") -> RunReport:
    return soft_failure(node, hours, passed, check)


def test_the_count_runs_back_until_a_pass_and_only_over_the_same_checks() -> None:
    now = _run(10, passed=False)
    assert now.action_plan.action.value == "rerun"
    assert consecutive_failures(now, [], 24) == 0
    assert consecutive_failures(now, [_run(9, False), _run(8, False)], 24) == 2
    assert consecutive_failures(now, [_run(9, False), _run(8, True), _run(7, False)], 24) == 1
    assert consecutive_failures(now, [_run(9, True), _run(8, False)], 24) == 0
    # another check's failure ends the count: it is not the same fault repeating
    assert consecutive_failures(now, [_run(9, False, check="memory"), _run(8, False)], 24) == 0
    # outside the window, and runs that started after this one, do not count
    assert consecutive_failures(now, [_run(9, False)], 0.5) == 0
    assert consecutive_failures(now, [_run(11, False)], 24) == 0


def test_the_windows_edges_count_and_this_run_is_not_its_own_repeat() -> None:
    now = _run(10, passed=False)
    assert consecutive_failures(now, [_run(9, False)], 1.0) == 1  # exactly a window back
    assert consecutive_failures(now, [now, _run(9, False)], 24) == 1  # a copy of this run


def test_a_directory_that_cannot_be_listed_is_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def refuse(self: Path) -> None:
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(Path, "iterdir", refuse)
    with pytest.raises(InputError, match=rf"^--earlier {tmp_path}: cannot list it: Permission"):
        earlier_reports(tmp_path, "gpu01", tmp_path / "gpuaccept-accept-r.json")


def test_a_run_that_judged_nothing_is_passed_over() -> None:
    skipped = _run(9, passed=True)
    nothing = rejudged(
        skipped, checks=[c.model_copy(update={"status": Status.SKIP}) for c in skipped.checks]
    )
    now = _run(10, passed=False)
    assert consecutive_failures(now, [nothing, _run(8, False)], 24) == 1


def _write(directory: Path, report: RunReport, name: str, mtime: float) -> Path:
    path = directory / name
    path.write_text(report.model_dump_json())
    os.utime(path, (mtime, mtime))
    return path


def test_earlier_reports_are_the_nodes_newest_and_a_damaged_one_is_said(tmp_path: Path) -> None:
    this = _write(tmp_path, _run(10, False), "gpuaccept-accept-this.json", 1000)
    _write(tmp_path, _run(9, False), "gpuaccept-accept-a.json", 900)
    _write(tmp_path, _run(9, False, node="gpu02"), "gpuaccept-accept-other-node.json", 950)
    (tmp_path / "gpuaccept-accept-damaged.json").write_text("{not json")
    (tmp_path / "notes.txt").write_text("not a report")
    (tmp_path / "slurm.json").write_text("{not a report either}")  # not an accept report's name
    (tmp_path / "gpuaccept-burnin-gpu01.json").write_text("{a burn-in's, not read}")
    (tmp_path / "gpuaccept-accept-link.json").symlink_to(tmp_path / "gpuaccept-accept-a.json")
    (tmp_path / "gpuaccept-accept-dir.json").mkdir()
    os.mkfifo(tmp_path / "gpuaccept-accept-fifo.json")  # never opened: a reader would block on it
    (tmp_path / "gpuaccept-accept-zero.json").symlink_to("/dev/zero")
    with (tmp_path / "gpuaccept-accept-huge.json").open("wb") as stream:
        stream.truncate(2 * 1024**3)  # sparse: refused by its size, never read
    os.utime(tmp_path / "gpuaccept-accept-huge.json", (800, 800))
    reports, unreadable = earlier_reports(tmp_path, "gpu01", this)
    assert [r.started_at for r in reports] == [_run(9, False).started_at]
    assert len(unreadable) == 2
    assert unreadable[0].startswith(
        f"report {tmp_path / 'gpuaccept-accept-damaged.json'}: not JSON"
    )
    assert unreadable[1].startswith(f"report {tmp_path / 'gpuaccept-accept-huge.json'}: ")
    # only the newest files are read: the cost does not grow with the directory
    many, _ = earlier_reports(tmp_path, "gpu01", this, limit=1)
    assert many == []  # the newest other file is gpu02's


def test_a_slow_run_is_not_drained_and_a_second_in_a_row_is(fleet: Path, tmp_path: Path) -> None:
    reports = tmp_path / "reports"
    reports.mkdir()
    first = _write(reports, _run(1, False), "gpuaccept-accept-r1.json", 100)
    once = CliRunner().invoke(app, ["act", "slurm", str(first), "--node", "gpu01"])
    assert once.exit_code == 1, once.output
    assert "NOT drained until it fails 2 runs in a row within 24 h; this is 1 of 2" in once.stdout
    assert json.loads(fleet.read_text())["nodes"]["gpu01"]["state"] == "idle"
    second = _write(reports, _run(2, False), "gpuaccept-accept-r2.json", 200)
    twice = CliRunner().invoke(app, ["act", "slurm", str(second), "--node", "gpu01"])
    assert twice.exit_code == 1, twice.output
    node = json.loads(fleet.read_text())["nodes"]["gpu01"]
    assert node["reason"].startswith("gpuaccept quick: rerun: compute [stack ")
    # another node's slow run is counted on its own: gpu01's do not make it a repeat
    other = _write(reports, _run(3, False, node="gpu02"), "gpuaccept-accept-r3.json", 300)
    apart = CliRunner().invoke(app, ["act", "slurm", str(other), "--node", "gpu02"])
    assert "this is 1 of 2" in apart.stdout


def test_the_debounce_options_are_checked(fleet: Path, tmp_path: Path) -> None:
    path = _write(tmp_path, _run(1, False), "gpuaccept-accept-r.json", 100)
    runner = CliRunner()
    at_once = runner.invoke(app, ["act", "slurm", str(path), "--node", "gpu01", "--debounce", "1"])
    assert at_once.exit_code == 1
    assert json.loads(fleet.read_text())["nodes"]["gpu01"]["state"] != "idle"
    for bad, said in [
        (["--debounce-hours", "0"], "--debounce-hours 0: give hours above 0"),
        (["--debounce-hours", "nan"], "--debounce-hours nan"),
        (["--earlier", str(path)], f"--earlier {path}: not a directory of reports"),
    ]:
        refused = runner.invoke(app, ["act", "slurm", str(path), "--node", "gpu03", *bad])
        assert refused.exit_code == 2, refused.output
        assert said in refused.output
