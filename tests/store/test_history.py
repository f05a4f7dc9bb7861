"""The SQLite history: round trips, concurrent writers, and databases it must refuse to touch."""

from __future__ import annotations

import hashlib
import math
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from gpuaccept.store.history import (
    APPLICATION_ID,
    SCHEMA_VERSION,
    History,
    HistoryError,
    SqliteHistory,
    default_history,
)
from tests.run_reports import gpu_report, measurement_count


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _filled(path: Path, runs: int = 30) -> Path:
    with History.open(path) as history:
        history.append([(gpu_report(f"node{i % 3}", [790.0 + i]), "run") for i in range(runs)])
    return path


def test_append_list_and_fetch_round_trip(tmp_path: Path) -> None:
    reports = [gpu_report("a", [800.0, 810.0], hours=h) for h in range(3)]
    with History.open(tmp_path / "h.sqlite") as history:
        stored = history.append([(r, "run") for r in reports])
        assert [new for _, new in stored] == [True, True, True]
        runs = history.list_runs()
        assert [run.id for run in runs] == [3, 2, 1]  # newest first
        assert history.report(2) == reports[1]
        assert runs[0].hostname == "a"
        assert runs[0].verdict.passed


def test_the_same_report_is_stored_once(tmp_path: Path) -> None:
    report = gpu_report("a", [800.0])
    with History.open(tmp_path / "h.sqlite") as history:
        [(first, new)] = history.append([(report, "one.json")])
        [(again, new_again)] = history.append([(report, "copy.json")])
        assert (first, new, new_again) == (again, True, False)
        assert history.count() == 1


def test_points_filter_by_metric_node_and_keep_newest(tmp_path: Path) -> None:
    with History.open(tmp_path / "h.sqlite") as history:
        history.append(
            [
                (gpu_report("a", [800.0, 700.0], hours=0), "run"),
                (gpu_report("a", [805.0, 705.0], hours=1), "run"),
                (gpu_report("b", [790.0], hours=2), "run"),
            ]
        )
        trend = history.points("compute/matmul_bf16_tflops", node="a")
        assert [(p.device_index, p.value) for p in trend] == [
            (0, 800.0),
            (1, 700.0),
            (0, 805.0),
            (1, 705.0),
        ]
        assert history.points("matmul_bf16_tflops", node="b")[0].gpu_uuid == "GPU-b-0"
        assert history.points("other/matmul_bf16_tflops") == []
        latest = history.points("matmul_bf16_tflops", latest_only=True)
        assert sorted((p.hostname, p.device_index, p.value) for p in latest) == [
            ("a", 0, 805.0),
            ("a", 1, 705.0),
            ("b", 0, 790.0),
        ]


def test_a_batch_that_fails_half_way_stores_none_of_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from gpuaccept.store import history as module

    path = tmp_path / "h.sqlite"
    with History.open(path) as history:
        history.append([(gpu_report("a", [800.0]), "run")])
    real = module.report_sha256
    calls = []

    def fail_on_second(report: object) -> str:
        calls.append(report)
        if len(calls) == 2:
            raise OSError("disk went away")
        return real(report)  # type: ignore[arg-type]

    monkeypatch.setattr(module, "report_sha256", fail_on_second)
    batch = [(gpu_report("b", [1.0], hours=h), "import") for h in (1, 2)]
    with History.open(path) as history:
        with pytest.raises(OSError, match="disk went away"):
            history.append(batch)
        assert history.count() == 1
        assert [run.hostname for run in history.list_runs()] == ["a"]


_WRITER = """
import sys
from pathlib import Path
from gpuaccept.store.history import History
from tests.run_reports import gpu_report

path, name, runs = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3])
for i in range(runs):
    # One transaction per run, as separate HTCondor jobs would do.
    with History.open(path) as history:
        history.append([(gpu_report(name, [800.0 + i, 700.0 + i], hours=i), "run")])
"""


def test_two_processes_appending_200_runs_each_lose_nothing(tmp_path: Path) -> None:
    path = tmp_path / "shared.sqlite"
    root = Path(__file__).resolve().parents[2]
    writers = [
        subprocess.Popen([sys.executable, "-c", _WRITER, str(path), name, "200"], cwd=root)
        for name in ("alpha", "beta")
    ]
    assert [writer.wait(timeout=600) for writer in writers] == [0, 0]
    with History.open(path, create=False) as history:
        runs = history.list_runs()
        assert len(runs) == 400
        assert sorted({run.hostname for run in runs}) == ["alpha", "beta"]
        for name in ("alpha", "beta"):
            points = history.points("matmul_bf16_tflops", node=name)
            assert sorted(p.value for p in points if p.device_index == 0) == [
                800.0 + i for i in range(200)
            ]
        # every run is whole: its report and all of its figures
        expected = measurement_count(gpu_report("x", [1.0, 2.0]))
        assert len(history.points()) == 400 * expected


def test_truncated_database_is_reported_and_left_untouched(tmp_path: Path) -> None:
    path = _filled(tmp_path / "h.sqlite")
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    before = _digest(path)
    with pytest.raises(HistoryError, match="truncated"), History.open(path):
        pass
    assert _digest(path) == before
    assert not Path(f"{path}-journal").exists()


def test_damaged_pages_are_reported_and_left_untouched(tmp_path: Path) -> None:
    path = _filled(tmp_path / "h.sqlite")
    data = bytearray(path.read_bytes())
    page = int.from_bytes(data[16:18], "big")
    data[page : 3 * page] = b"\xff" * (2 * page)  # overwrite pages 2 and 3 (the tables' roots)
    path.write_bytes(bytes(data))
    before = _digest(path)
    with pytest.raises(HistoryError), History.open(path) as history:
        history.list_runs()
    assert _digest(path) == before


def test_file_that_is_not_sqlite_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "notes.txt"
    path.write_text("my precious notes\n" * 20)
    with pytest.raises(HistoryError, match="not an SQLite database"), History.open(path):
        pass
    assert path.read_text() == "my precious notes\n" * 20


def test_foreign_sqlite_database_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "other.sqlite"
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE accounts (id INTEGER, balance REAL)")
        db.execute("INSERT INTO accounts VALUES (1, 100.0)")
    before = _digest(path)
    with pytest.raises(HistoryError, match="not a gpuaccept history"), History.open(path):
        pass
    assert _digest(path) == before


def test_newer_schema_is_refused(tmp_path: Path) -> None:
    path = _filled(tmp_path / "h.sqlite", runs=1)
    with sqlite3.connect(path) as db:
        db.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    before = _digest(path)
    with pytest.raises(HistoryError, match="newer gpuaccept"), History.open(path):
        pass
    assert _digest(path) == before


def test_new_database_is_marked_as_ours(tmp_path: Path) -> None:
    path = _filled(tmp_path / "deep" / "dir" / "h.sqlite", runs=1)
    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA application_id").fetchone()[0] == APPLICATION_ID
        # rollback journal, not WAL: WAL's shared memory does not work across hosts
        assert db.execute("PRAGMA journal_mode").fetchone()[0] == "delete"


def test_reading_commands_do_not_create_a_database(tmp_path: Path) -> None:
    path = tmp_path / "none.sqlite"
    with pytest.raises(HistoryError, match="no such database"), History.open(path, create=False):
        pass
    assert not path.exists()


def test_unknown_run_id_is_an_input_error(tmp_path: Path) -> None:
    path = _filled(tmp_path / "h.sqlite", runs=1)
    with History.open(path) as history, pytest.raises(HistoryError, match="no run 99"):
        history.report(99)


def test_default_path_follows_env_then_xdg(tmp_path: Path) -> None:
    assert default_history({"GPUACCEPT_HISTORY": "/x/h.db"}) == Path("/x/h.db")
    assert default_history({"XDG_DATA_HOME": "/data"}) == Path("/data/gpuaccept/history.sqlite")


_KILLED_WRITER = """
import os, sqlite3, sys
connection = sqlite3.connect(sys.argv[1], isolation_level=None)
connection.execute("PRAGMA cache_size = 1")  # spill changed pages into the file before COMMIT
connection.execute("BEGIN IMMEDIATE")
for _ in range(200):
    connection.execute("INSERT INTO run_notes_probe VALUES (randomblob(4000))")
os._exit(9)  # killed mid-transaction: the rollback journal stays behind, hot
"""


def test_a_writer_killed_mid_transaction_is_rolled_back_not_fatal(tmp_path: Path) -> None:
    path = _filled(tmp_path / "h.sqlite", runs=3)
    with sqlite3.connect(path) as raw:
        raw.execute("CREATE TABLE run_notes_probe (blob BLOB)")
    raw.close()
    killed = subprocess.run([sys.executable, "-c", _KILLED_WRITER, str(path)], check=False)
    assert killed.returncode == 9
    journal = Path(f"{path}-journal")
    assert journal.exists()
    assert journal.stat().st_size > 0  # a hot journal: the file holds half a transaction
    with History.open(path, create=False) as history:  # SQLite rolls it back on this open
        assert len(history.list_runs()) == 3
    with sqlite3.connect(path) as raw:
        assert raw.execute("SELECT count(*) FROM run_notes_probe").fetchone()[0] == 0
    raw.close()


_CREATOR = """
import sys
from pathlib import Path
from gpuaccept.store.history import History
from tests.run_reports import gpu_report
with History.open(Path(sys.argv[1])) as history:
    history.append([(gpu_report(sys.argv[2], [800.0]), "run")])
"""


def test_jobs_creating_one_new_history_at_once_all_record(tmp_path: Path) -> None:
    root = Path(__file__).resolve().parents[2]
    for attempt in range(3):
        path = tmp_path / f"new{attempt}.sqlite"
        jobs = [
            subprocess.Popen(
                [sys.executable, "-c", _CREATOR, str(path), f"node{i}"],
                cwd=root,
                stderr=subprocess.PIPE,
                text=True,
            )
            for i in range(6)
        ]
        outcomes = [
            (job.wait(timeout=120), job.stderr.read() if job.stderr else "") for job in jobs
        ]
        assert all(code == 0 for code, _ in outcomes), outcomes
        with History.open(path, create=False) as history:
            assert len(history.list_runs()) == 6


def test_a_fifo_is_not_opened_as_a_history(tmp_path: Path) -> None:
    fifo = tmp_path / "history.sqlite"
    os.mkfifo(fifo)
    with pytest.raises(HistoryError, match="FIFO"), History.open(fifo):
        pass


def test_a_history_that_cannot_be_written_is_refused_before_a_run(tmp_path: Path) -> None:
    path = _filled(tmp_path / "h.sqlite", runs=1)
    with History.open(path) as history:
        history.check_writable()  # a writable one passes, and the probe write leaves no trace
        assert len(history.list_runs()) == 1
    uri = f"file:{path}?mode=ro"
    connection = sqlite3.connect(uri, uri=True, isolation_level=None)
    read_only = SqliteHistory(
        path, connection
    )  # as on a read-only mount, where even root cannot write
    with pytest.raises(HistoryError, match="cannot be written"):
        read_only.check_writable()
    connection.close()


def test_a_run_with_a_nan_figure_is_recorded_whole(tmp_path: Path) -> None:
    report = gpu_report("nan-node", [float("nan"), 790.0], passed=False)
    with History.open(tmp_path / "h.sqlite") as history:
        [(run_id, new)] = history.append([(report, "run")])
        assert new
        stored = history.report(run_id)
        assert math.isnan(stored.checks[0].measurements[0].value)  # the report keeps its NaN
        # the figure table holds the real figures; NaN is no point on a trend
        values = [p.value for p in history.points("matmul_bf16_tflops")]
        assert values == [790.0]
    # a NaN survives the JSON report too, as a string that reads back as NaN
    assert '"NaN"' in report.model_dump_json()
    again = type(report).model_validate_json(report.model_dump_json())
    assert math.isnan(again.checks[0].measurements[0].value)


def test_a_schema_7_file_gains_each_accepts_stack_and_why_when_opened(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Schema 8 keeps each accept's stack and why a failed one's action (issue #53 §2): a
    schema-7 file is filled in from its stored reports when first opened, to the rows its appends
    would have kept; one that cannot be written says so in one line, and is left as it was."""
    path = tmp_path / "h.sqlite"
    columns = "run_id, stack, why, passed, slower"
    with History.open(path) as history:
        history.append(
            [
                (gpu_report("node0", [790.0]), "run"),
                (gpu_report("node1", [500.0], hours=1, passed=False), "run"),
            ]
        )
    with sqlite3.connect(path) as raw:
        kept = raw.execute(f"SELECT {columns} FROM node_timeline ORDER BY 1").fetchall()
        days = raw.execute("SELECT * FROM stack_days").fetchall()
        raw.execute("DROP TABLE stack_days")
        for column in ("stack", "why", "passed", "slower"):
            raw.execute(f"ALTER TABLE node_timeline DROP COLUMN {column}")
        raw.execute("PRAGMA user_version = 7")
    assert kept[1][2].startswith("compute: ")  # the failing run's first finding, with its check
    assert kept[0][1] == kept[1][1] != ""
    assert [row[3] for row in kept] == [1, 0]
    before = path.read_bytes()
    path.chmod(0o444)
    try:
        if os.geteuid() != 0:  # root writes a read-only file
            refused = pytest.raises(HistoryError, match="upgrading it in place needs write access")
            with refused, History.open(path, create=False):
                pass
            assert path.read_bytes() == before
    finally:
        path.chmod(0o644)
    caplog.clear()
    with History.open(path, create=False) as history:
        assert len(history.list_runs()) == 2
    # said before it starts (at a fleet's size it takes seconds to minutes), once
    (said,) = [r.getMessage() for r in caplog.records if r.name == "gpuaccept.store"]
    assert said.startswith(f"history {path}: upgrading it from schema 7 to 8, once (2 stored")
    caplog.clear()
    with History.open(path, create=False):
        pass
    assert not [r for r in caplog.records if r.name == "gpuaccept.store"]
    with sqlite3.connect(path) as raw:
        assert raw.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION == 8
        again = raw.execute(f"SELECT {columns} FROM node_timeline ORDER BY 1").fetchall()
        assert raw.execute("SELECT * FROM stack_days").fetchall() == days
    assert again == kept
    assert [row[2:4] for row in days] == [(2, 1)]  # one day: two runs judged, one passed
