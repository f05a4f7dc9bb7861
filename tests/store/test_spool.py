"""Nothing lost when the fleet's store is down (issue #33 §2): a run whose PostgreSQL history
cannot be reached still passes or fails on its own, keeps its record in the spool, and a later
run or `gpuaccept history push` delivers it, once. A real server (tests/pg_server.py)."""

from __future__ import annotations

import json
import multiprocessing
import os
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from gpuaccept.cli import app
from gpuaccept.store.history import History
from gpuaccept.store.spool import deliver, pending, spool_report
from tests.run_reports import gpu_report

ACCEPT = ["accept", "--device", "cpu", "--only", "stack"]


def _down(pg_server: Any) -> str:
    """A URI of the test server's host on a port where nothing listens."""
    return f"postgresql://gpuaccept@127.0.0.1:1/{pg_server.port}"


@pytest.fixture
def spool(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    directory = tmp_path / "spool"
    monkeypatch.setenv("GPUACCEPT_SPOOL", str(directory))
    return directory


def test_a_run_whose_history_is_down_is_kept_and_pushed_once(
    pg_server: Any, pg_history: str, spool: Path
) -> None:
    runner = CliRunner()
    run = runner.invoke(app, [*ACCEPT, "--history", _down(pg_server)])
    assert run.exit_code == 0, run.output  # the node's verdict, not the store's
    assert "cannot reach it" in run.stdout
    assert "the run goes on" in run.stdout
    (kept,) = pending(spool)
    assert f"the run is kept in {kept}" in run.stdout
    report = json.loads(kept.read_text())
    assert report["command"] == "accept"

    pushed = runner.invoke(app, ["history", "push", "--history", pg_history])
    assert pushed.exit_code == 0, pushed.output
    assert "pushed 1 run(s)" in pushed.stdout
    assert pending(spool) == []
    listed = runner.invoke(app, ["history", "list", "--history", pg_history, "--json"])
    (stored,) = json.loads(listed.stdout)
    assert stored["started_at"] == report["started_at"]
    again = runner.invoke(app, ["history", "push", "--history", pg_history])
    assert again.exit_code == 0
    assert "nothing to push" in again.stdout


def test_a_later_run_delivers_the_spool_before_its_own(pg_history: str, spool: Path) -> None:
    waiting = gpu_report("gpu07", [790.0])
    spool_report(waiting, spool)
    run = CliRunner().invoke(app, [*ACCEPT, "--history", pg_history])
    assert run.exit_code == 0, run.output
    assert "spool " in run.stdout
    assert ": run 1" in run.stdout
    assert "run 2 recorded in" in run.stdout
    assert pending(spool) == []
    with History.open(pg_history, create=False) as history:
        assert next(r.hostname for r in history.list_runs(oldest_first=True)) == "gpu07"


def test_a_spooled_file_that_is_no_report_is_left_in_place_and_said(
    tmp_path: Path, spool: Path
) -> None:
    spool_report(gpu_report("gpu01", [790.0]), spool)
    (spool / "zz-garbage.json").write_bytes(b"\x00not json")
    (spool / "notes.txt").write_text("not ours: not read")
    history = tmp_path / "h.sqlite"
    result = CliRunner().invoke(app, ["history", "push", "--history", str(history)])
    assert result.exit_code == 2
    assert "zz-garbage.json: not delivered, left in place: not JSON" in result.stdout
    (line,) = result.stderr.strip().splitlines()
    assert "1 spooled file(s) are not reports" in line
    assert [p.name for p in pending(spool)] == ["zz-garbage.json"]
    assert (spool / "notes.txt").exists()
    with History.open(history, create=False) as store:
        assert store.count() == 1


def test_a_run_already_stored_is_not_stored_twice(tmp_path: Path, spool: Path) -> None:
    report = gpu_report("gpu01", [790.0])
    history = tmp_path / "h.sqlite"
    with History.open(history) as store:
        store.append([(report, "run")])
        spool_report(report, spool)
        delivery = deliver(store, spool)
        assert [(run_id, new) for _, run_id, new in delivery.delivered] == [(1, False)]
        assert store.count() == 1
    assert pending(spool) == []


def test_a_spool_that_cannot_take_the_run_stops_it_before_it_starts(
    pg_server: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    monkeypatch.setenv("GPUACCEPT_SPOOL", str(blocker))
    result = CliRunner().invoke(app, [*ACCEPT, "--history", _down(pg_server)])
    assert result.exit_code == 2, result.output
    assert "[stack]" not in result.stdout  # no check ran
    (line,) = result.stderr.strip().splitlines()
    assert "spool" in line
    assert "GPUACCEPT_SPOOL" in line


@pytest.mark.parametrize("form", ["directory", "fifo", "garbage"])
def test_push_to_a_hostile_history_keeps_the_spool(form: str, tmp_path: Path, spool: Path) -> None:
    spool_report(gpu_report("gpu01", [790.0]), spool)
    target = tmp_path / "history"
    if form == "directory":
        target.mkdir()
    elif form == "fifo":
        os.mkfifo(target)
    else:
        target.write_bytes(bytes(range(256)) * 8)
    result = CliRunner().invoke(app, ["history", "push", "--history", str(target)])
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    assert len(result.stderr.strip().splitlines()) == 1
    assert len(pending(spool)) == 1


def test_no_credential_reaches_the_report_or_the_log(
    pg_server: Any, pg_history: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the password through libpq's environment, not the password file
    monkeypatch.setenv("PGPASSFILE", str(tmp_path / "none"))
    monkeypatch.setenv("PGPASSWORD", pg_server.password)
    reports = tmp_path / "reports"
    result = CliRunner().invoke(
        app, [*ACCEPT, "--history", pg_history, "--report-dir", str(reports)]
    )
    assert result.exit_code == 0, result.output
    assert "recorded in postgresql://" in result.stdout
    (written,) = reports.glob("*.json")
    for text in (result.output, written.read_text()):
        assert pg_server.password not in text
    with History.open(pg_history, create=False) as history:
        (run,) = history.list_runs()
        assert pg_server.password not in history.report(run.id).model_dump_json()


def _append_many(uri: str, passfile: str, hosts: list[str], start: Any) -> list[int]:
    os.environ["PGPASSFILE"] = passfile
    start.wait()
    with History.open(uri) as history:
        return [
            run_id for run_id, _ in history.append([(gpu_report(h, [790.0]), "t") for h in hosts])
        ]


def test_many_writers_at_once_lose_nothing_and_store_nothing_twice(
    pg_server: Any, pg_history: str
) -> None:
    """24 processes open an empty database at the same instant (its tables are created once)
    and append 10 runs each, half of them runs other writers append too."""
    context = multiprocessing.get_context("spawn")
    start = context.Manager().Event()
    jobs = [
        [f"node-{w:02d}-{i}" for i in range(5)] + [f"shared-{(w + i) % 12}" for i in range(5)]
        for w in range(24)
    ]
    with context.Pool(24) as pool:
        waiting = [
            pool.apply_async(_append_many, (pg_history, str(pg_server.passfile), hosts, start))
            for hosts in jobs
        ]
        start.set()
        ids = [job.get(timeout=120) for job in waiting]
    unique = {h for hosts in jobs for h in hosts}
    with History.open(pg_history, create=False) as history:
        runs = history.list_runs()
        assert len(runs) == len(unique) == 24 * 5 + 12
        assert sorted(r.hostname for r in runs) == sorted(unique)
        assert len(history.points()) == 2 * len(unique)  # one matmul, one train figure each
    # every writer was told the id its run has, new or not
    by_host = {r.hostname: r.id for r in runs}
    for hosts, got in zip(jobs, ids, strict=True):
        assert got == [by_host[h] for h in hosts]
