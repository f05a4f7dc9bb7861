"""A fleet's store never hangs a run (issue #33 §2, "nothing lost when a component is down"): a
PostgreSQL session that holds what a run needs (a node frozen half-way through its append, a
DBA's maintenance of the tables) ends the run's wait within a bound, the run keeps its report
in the spool, and a session frozen inside a transaction is ended by the server, its locks with
it. A real server (tests/pg_server.py); the bounds are shortened here to keep the tests short.
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from gpuaccept.cli import app
from gpuaccept.store import history_pg
from gpuaccept.store.history import History, HistoryUnreachable
from gpuaccept.store.spool import pending
from tests.run_reports import gpu_report

pytestmark = pytest.mark.timeout(120)  # a wait that hangs fails here, not after 600 s

ACCEPT = ["accept", "--device", "cpu", "--only", "stack"]


@pytest.fixture
def short_bounds(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(
        history_pg,
        "SESSION_BOUNDS",
        {
            "lock_timeout": "1s",
            "statement_timeout": "20s",
            "idle_in_transaction_session_timeout": "1s",
        },
    )


def _session(server: Any, uri: str) -> Any:
    import psycopg

    return psycopg.connect(uri, passfile=str(server.passfile), autocommit=True)


def _stored(uri: str) -> int:
    with History.open(uri) as history:
        return history.count()


@pytest.mark.usefixtures("short_bounds")
def test_a_table_held_by_maintenance_ends_reads_and_writes_in_one_line(
    pg_server: Any, pg_history: str
) -> None:
    with History.open(pg_history) as history:
        history.append([(gpu_report("node-a", [790.0]), "t")])
    holder = _session(pg_server, pg_history)
    holder.autocommit = False
    holder.execute("LOCK TABLE runs IN ACCESS EXCLUSIVE MODE")  # as VACUUM FULL takes it
    try:
        for attempt in (
            lambda history: history.list_runs(node="node-a"),
            lambda history: history.append([(gpu_report("node-b", [791.0]), "t")]),
        ):
            started = time.monotonic()
            with (
                pytest.raises(HistoryUnreachable, match="lock timeout") as raised,
                History.open(pg_history) as history,
            ):
                attempt(history)
            assert time.monotonic() - started < 10
            assert "\n" not in str(raised.value)
            assert "another session holds" in str(raised.value)
    finally:
        holder.rollback()
        holder.close()
    assert _stored(pg_history) == 1  # the refused append left nothing behind


@pytest.mark.usefixtures("short_bounds")
def test_a_run_behind_a_writer_stopped_half_way_keeps_its_report_in_the_spool(
    pg_server: Any, pg_history: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    spool = tmp_path / "spool"
    monkeypatch.setenv("GPUACCEPT_SPOOL", str(spool))
    runner = CliRunner()
    with History.open(pg_history) as history:
        history.append([(gpu_report("node-a", [790.0]), "t")])
    holder = _session(pg_server, pg_history)
    # another node's append holds the append lock and goes no further
    holder.execute("SELECT pg_advisory_lock(%s)", (history_pg._APPEND_LOCK,))
    try:
        started = time.monotonic()
        run = runner.invoke(app, [*ACCEPT, "--history", pg_history])
        assert time.monotonic() - started < 60
    finally:
        holder.close()
    assert run.exit_code == 0, run.output  # the node's verdict, not the store's
    assert "lock timeout" in run.stdout
    (kept,) = pending(spool)
    assert f"the run is kept in {kept}" in run.stdout
    started_at = json.loads(kept.read_text())["started_at"]
    assert _stored(pg_history) == 1
    pushed = runner.invoke(app, ["history", "push", "--history", pg_history])
    assert pushed.exit_code == 0, pushed.output
    assert _stored(pg_history) == 2
    listed = runner.invoke(app, ["history", "list", "--history", pg_history, "--json"])
    newest = json.loads(listed.stdout)[0]
    assert newest["started_at"] == started_at
    assert pending(spool) == []


@pytest.mark.usefixtures("short_bounds")
def test_a_writer_frozen_inside_its_transaction_is_ended_and_the_fleet_goes_on(
    pg_history: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Our own session's bound protects the others: frozen with the append lock held (a node
    stopped mid-append), the server ends it after the idle bound, and the next writer, which
    waits longer than that, stores its run."""
    frozen_said: list[BaseException] = []
    locked = threading.Event()

    def freeze() -> None:
        try:
            with History.open(pg_history) as history:
                connection = history._connection
                with connection.transaction():
                    connection.execute(
                        "SELECT pg_advisory_xact_lock(%s)", (history_pg._APPEND_LOCK,)
                    )
                    locked.set()
                    time.sleep(4)  # the node stopped here
                    connection.execute("SELECT 1")
        except BaseException as error:
            frozen_said.append(error)

    with History.open(pg_history) as history:
        history.count()  # the tables exist before the two sessions meet
    frozen = threading.Thread(target=freeze)
    frozen.start()
    assert locked.wait(30)
    monkeypatch.setitem(history_pg.SESSION_BOUNDS, "lock_timeout", "15s")
    started = time.monotonic()
    with History.open(pg_history) as history:
        [(_, new)] = history.append([(gpu_report("node-b", [791.0]), "t")])
    waited = time.monotonic() - started
    frozen.join(30)
    assert new
    assert 0.5 < waited < 4  # released by the server's end of the frozen session, not its wake
    (error,) = frozen_said
    assert isinstance(error, HistoryUnreachable), repr(error)
    assert "\n" not in str(error)


def test_bounds_the_server_or_the_user_set_are_kept(
    pg_server: Any, pg_history: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    def shown(name: str) -> str:
        with History.open(pg_history) as history:
            row = history._connection.execute(f"SHOW {name}").fetchone()
        assert row is not None
        return str(row[0])

    assert shown("lock_timeout") == "1min"  # ours where nobody set one
    assert shown("idle_in_transaction_session_timeout") == "1min"
    monkeypatch.setenv("PGOPTIONS", "-c lock_timeout=7s")  # the user's, through libpq
    assert shown("lock_timeout") == "7s"
    assert shown("statement_timeout") == "5min"
    database = pg_history.rsplit("/", 1)[1]
    pg_server.sql(f'ALTER DATABASE "{database}" SET statement_timeout = 0')  # the DBA's
    monkeypatch.delenv("PGOPTIONS")
    assert shown("statement_timeout") == "0"
    assert shown("lock_timeout") == "1min"


def test_an_upgrade_is_not_cut_short_by_the_statement_bound(
    pg_history: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An upgrade rewrites every run's rows, at a fleet's size for longer than a read's bound:
    it runs without the statement bound (its lock waits keep theirs)."""
    monkeypatch.setitem(history_pg.SESSION_BOUNDS, "statement_timeout", "1s")
    last = max(history_pg.MIGRATIONS)
    slow = [*history_pg.MIGRATIONS[last], "SELECT pg_sleep(1.5)"]
    monkeypatch.setitem(history_pg.MIGRATIONS, last, slow)
    with History.open(pg_history) as history:
        assert history.count() == 0
    with (
        pytest.raises(HistoryUnreachable, match="statement timeout") as raised,
        History.open(pg_history) as history,
    ):
        history._connection.execute("SELECT pg_sleep(1.5)")  # a read keeps its bound
    assert "too busy" in str(raised.value)


@pytest.mark.parametrize("lock", ["EXCLUSIVE", "IMMEDIATE"])
def test_an_sqlite_history_held_past_its_busy_timeout_spools_the_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, lock: str
) -> None:
    """The embedded store, the same promise: a lock another process holds past the busy timeout
    (a job writing, a process stopped mid-write) is not a damaged file. The run goes on and
    keeps its record in the spool; the file is untouched. A writer's lock (IMMEDIATE) leaves
    reads alone; one that bars reads too (EXCLUSIVE) makes a read say so in one line, exit 2."""
    import sqlite3

    from gpuaccept.store import history as history_module

    monkeypatch.setattr(history_module, "BUSY_TIMEOUT_SECONDS", 0.5)
    spool = tmp_path / "spool"
    monkeypatch.setenv("GPUACCEPT_SPOOL", str(spool))
    path = tmp_path / "history.sqlite"
    with History.open(path) as history:
        history.append([(gpu_report("node-a", [790.0]), "t")])
    runner = CliRunner()
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute(f"BEGIN {lock}")
    try:
        run = runner.invoke(app, [*ACCEPT, "--history", str(path)])
        listed = runner.invoke(app, ["history", "list", "--history", str(path)])
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert run.exit_code == 0, run.output
    assert "another process held it" in run.stdout
    assert "the run goes on" in run.stdout
    (kept,) = pending(spool)
    assert f"the run is kept in {kept}" in run.stdout
    if lock == "IMMEDIATE":
        assert listed.exit_code == 0, listed.output
        assert "node-a" in listed.output
    else:
        assert listed.exit_code == 2, listed.output
        assert "another process held it" in listed.output
        assert "unreadable" not in listed.output
        assert len(listed.output.strip().splitlines()) == 1
    assert _stored(str(path)) == 1
    pushed = runner.invoke(app, ["history", "push", "--history", str(path)])
    assert pushed.exit_code == 0, pushed.output
    assert _stored(str(path)) == 2
    assert pending(spool) == []


def test_a_lock_taken_between_the_open_and_the_write_check_is_a_busy_history(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import sqlite3

    from gpuaccept.store import history as history_module

    monkeypatch.setattr(history_module, "BUSY_TIMEOUT_SECONDS", 0.5)
    path = tmp_path / "history.sqlite"
    with History.open(path) as history:
        holder = sqlite3.connect(path, isolation_level=None)
        holder.execute("BEGIN IMMEDIATE")  # another job starts its append now
        try:
            with pytest.raises(HistoryUnreachable, match=r"another process held it for 0\.5 s"):
                history.check_writable()
        finally:
            holder.execute("ROLLBACK")
            holder.close()
        history.check_writable()  # free again: writable


def test_appends_sharing_runs_in_opposite_orders_wait_in_turn_not_on_each_other(
    pg_server: Any, pg_history: str
) -> None:
    """One append has stored run x (not yet committed) and goes on to store y; another append
    brings y and x, in that order. In the reports' order the second would hold y and wait on x
    while the first waits on y: the server ends one as a deadlock and its run goes to the spool
    (CI, 24 writers: tests/store/test_spool.py). In the digests' order the second waits on
    x, the first stores y and commits, and the second finds both stored."""
    from gpuaccept.store.history import report_sha256

    x, y = sorted(
        (gpu_report(f"node-{n}", [790.0 + i]) for i, n in enumerate("ab")), key=report_sha256
    )
    watcher = _session(pg_server, pg_history)
    outcome: dict[str, Any] = {}

    def second() -> None:
        try:
            with History.open(pg_history) as history:
                outcome["stored"] = history.append([(y, "second"), (x, "second")])
        except Exception as error:  # the test's thread: said in the main thread below
            outcome["error"] = error

    try:
        with History.open(pg_history) as first:
            with first._connection.transaction():  # type: ignore[attr-defined]
                ((x_id, _),) = first.append([(x, "first")])
                worker = threading.Thread(target=second)
                worker.start()
                waiting = time.monotonic() + 20
                while not watcher.execute(
                    "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'gpuaccept' "
                    "AND wait_event_type = 'Lock'"
                ).fetchone()[0]:
                    assert time.monotonic() < waiting, "the second append never waited on x"
                    time.sleep(0.05)
                ((y_id, _),) = first.append([(y, "first")])
            worker.join(30)
    finally:
        watcher.close()
    assert not worker.is_alive()
    assert "error" not in outcome, outcome.get("error")
    assert outcome["stored"] == [(y_id, False), (x_id, False)]
    assert _stored(pg_history) == 2


def test_an_append_numbers_its_new_runs_in_the_reports_order(pg_history: str) -> None:
    """Runs of one append are stored in their digests' order (above), but numbered in the
    order they were given, as SQLite's store numbers them: the id breaks a tie between runs
    of the same start (`history list`, latest_runs)."""
    reports = [(gpu_report(f"node-{i}", [790.0]), "t") for i in range(6)]
    with History.open(pg_history) as history:
        stored = history.append(reports)
        again = history.append([reports[3], (gpu_report("node-9", [790.0]), "t")])
    ids = [run_id for run_id, new in stored]
    assert all(new for _, new in stored)
    assert ids == sorted(ids)
    assert len(set(ids)) == 6
    assert again[0] == (ids[3], False)
    assert again[1][1]
    assert again[1][0] > ids[-1]
