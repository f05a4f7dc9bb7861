"""The SQLite store of runs (append, list, fetch, trend, the latest figures per node and GPU),
and `open_history`, which picks a history's store by its location.

Several HTCondor jobs may append to one database on a shared file system, so the store uses
SQLite's rollback journal (not WAL, whose shared-memory index does not work across hosts), a
busy timeout, and one `BEGIN IMMEDIATE` transaction per append: a run is stored whole or not at
all. A file that is not ours (another SQLite database, a truncated one, not SQLite at all) is
reported and never written.

What both stores share is in store/base.py; the names it holds are imported from here too, as
they were before it (issue #51 §2).
"""

from __future__ import annotations

import json
import os
import sqlite3
import struct
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gpuaccept.store.base import HISTORY_ENV as HISTORY_ENV
from gpuaccept.store.base import MEASUREMENT_COLUMNS as MEASUREMENT_COLUMNS
from gpuaccept.store.base import RUN_GPU_COLUMNS as RUN_GPU_COLUMNS
from gpuaccept.store.base import RUN_INSERT_COLUMNS as RUN_INSERT_COLUMNS
from gpuaccept.store.base import SCHEMA_VERSION as SCHEMA_VERSION
from gpuaccept.store.base import GpuIncidents as GpuIncidents
from gpuaccept.store.base import GpuWindow as GpuWindow
from gpuaccept.store.base import History as History
from gpuaccept.store.base import HistoryError as HistoryError
from gpuaccept.store.base import HistoryLocation as HistoryLocation
from gpuaccept.store.base import HistoryUnreachable as HistoryUnreachable
from gpuaccept.store.base import MetricPoint as MetricPoint
from gpuaccept.store.base import PgLocation as PgLocation
from gpuaccept.store.base import RunRow as RunRow
from gpuaccept.store.base import _filters as _filters
from gpuaccept.store.base import _first_line as _first_line
from gpuaccept.store.base import _point as _point
from gpuaccept.store.base import as_location as as_location
from gpuaccept.store.base import default_history as default_history
from gpuaccept.store.base import fleet_columns as fleet_columns
from gpuaccept.store.base import history_location as history_location
from gpuaccept.store.base import is_postgresql as is_postgresql
from gpuaccept.store.base import latest_key as latest_key
from gpuaccept.store.base import local_file as local_file
from gpuaccept.store.base import measurement_rows as measurement_rows
from gpuaccept.store.base import report_points as report_points
from gpuaccept.store.base import report_sha256 as report_sha256
from gpuaccept.store.base import run_gpu_rows as run_gpu_rows
from gpuaccept.store.base import run_started as run_started
from gpuaccept.store.base import run_values as run_values
from gpuaccept.store.fleet_tables import (
    LATEST_UPSERT,
    SQLITE_TYPES,
    STACK_DAYS_FROM_TIMELINE,
    STACK_FROM_JSON_SQLITE,
    WHY_FROM_JSON_SQLITE,
    TimelineRun,
    keep_stack_days,
    tables,
)

if TYPE_CHECKING:
    from gpuaccept.results import CheckResult, RunReport

APPLICATION_ID = 0x67707561  # "gpua" in the SQLite header marks our databases
# the last version that changed an SQLite file's tables: a file at it or later is read as it is
# (7 changed PostgreSQL alone, 8 both), so a history on a read-only mount stays readable; the
# next write moves its version on
SQLITE_LAYOUT_VERSION = 8
BUSY_TIMEOUT_SECONDS = 60.0
_SQLITE_MAGIC = b"SQLite format 3\x00"

_RUNS_SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
    id INTEGER PRIMARY KEY,
    report_sha256 TEXT NOT NULL UNIQUE,
    command TEXT NOT NULL,
    level TEXT NOT NULL,
    device_mode TEXT NOT NULL,
    started_at TEXT NOT NULL,
    finished_at TEXT NOT NULL,
    duration_seconds REAL NOT NULL,
    passed INTEGER NOT NULL,
    failed_checks TEXT NOT NULL,
    verdict_json TEXT NOT NULL,
    hostname TEXT,
    tool_version TEXT NOT NULL,
    recorded_at TEXT NOT NULL,
    source TEXT NOT NULL,
    report_json TEXT NOT NULL,
    fitness TEXT NOT NULL DEFAULT '',
    remediated TEXT NOT NULL DEFAULT '[]',
    slower_json TEXT
);
CREATE INDEX IF NOT EXISTS runs_by_host ON runs (hostname, started_at);
CREATE INDEX IF NOT EXISTS runs_by_kind ON runs
    (command, hostname, level, started_at, fitness, passed);
CREATE TABLE IF NOT EXISTS measurements (
    run_id INTEGER NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    check_name TEXT NOT NULL,
    name TEXT NOT NULL,
    value REAL NOT NULL,
    unit TEXT NOT NULL,
    device_index INTEGER,
    device_name TEXT,
    gpu_uuid TEXT,
    verdict TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS measurements_by_name ON measurements (name, check_name);
CREATE INDEX IF NOT EXISTS measurements_by_run ON measurements (run_id);
"""
# 3: each run's GPUs, made by a new database and by the upgrade of an older one alike
_RUN_GPUS_SCHEMA = """
CREATE TABLE IF NOT EXISTS run_gpus (
    run_id INTEGER NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    uuid TEXT NOT NULL,
    gpu_index INTEGER,
    serial TEXT,
    name TEXT
);
CREATE INDEX IF NOT EXISTS run_gpus_by_uuid ON run_gpus (uuid, run_id);
"""
_RUNS_BY_KIND = (
    "CREATE INDEX IF NOT EXISTS runs_by_kind ON runs "
    "(command, hostname, level, started_at, fitness, passed)"
)
# the columns version 4 adds, as an older database gains them
_V4_COLUMNS = (
    "ALTER TABLE runs ADD COLUMN fitness TEXT NOT NULL DEFAULT ''",
    "ALTER TABLE runs ADD COLUMN remediated TEXT NOT NULL DEFAULT '[]'",
    "ALTER TABLE runs ADD COLUMN slower_json TEXT",
)
# Filled in from what each run stored, by SQLite's JSON functions: the fitness from the verdict
# (verdict_fitness's rule), the run's own `history` check when it found the node slower.
_V4_BACKFILL = (
    "UPDATE runs SET fitness = CASE json_extract(verdict_json, '$.outcome') "
    "WHEN 'fail' THEN 'fail' WHEN 'pass' THEN CASE WHEN json_extract(verdict_json, '$.kind') "
    "= 'accept' AND json_extract(verdict_json, '$.mode') = 'gpu' THEN 'pass' "
    "ELSE 'not-judged' END ELSE 'not-judged' END",
    "UPDATE runs SET slower_json = (SELECT c.value FROM json_each(runs.report_json, '$.checks') "
    "AS c WHERE json_extract(c.value, '$.name') = 'history' AND json_extract(c.value, "
    "'$.status') IN ('warn', 'fail') LIMIT 1) WHERE instr(report_json, '\"history\"') > 0",
)
# 5: each node's newest run of each kind. `node` is the run's hostname, '' for a run without
# one; `started` its start in seconds since the epoch (run_started), ties broken by run id.
_LATEST_SCHEMA = """
CREATE TABLE IF NOT EXISTS latest_runs (
    node TEXT NOT NULL,
    command TEXT NOT NULL,
    level TEXT NOT NULL,
    started REAL NOT NULL,
    run_id INTEGER NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    PRIMARY KEY (node, command, level)
) WITHOUT ROWID
"""
# 6 reads a GPU's window from gpu_timeline: the two indexes 5 added for it (a GPU's runs by
# UUID with their serial, each run's kind, start and host by id) go
_V6_DROPPED = (
    "DROP INDEX IF EXISTS run_gpus_by_uuid_serial",
    "DROP INDEX IF EXISTS runs_by_id",
)
_SCHEMA = ";".join((_RUNS_SCHEMA, _RUN_GPUS_SCHEMA, _LATEST_SCHEMA, *tables(SQLITE_TYPES)))

_RUN_COLUMNS = (
    "id, started_at, hostname, command, level, device_mode, verdict_json, duration_seconds, "
    "tool_version, source"
)

# Every GPU of every stored run, read out of its report by SQLite's own JSON functions (a backfill
# of a 200,000-run history is one statement, not a Python loop over every report).
_BACKFILL_RUN_GPUS = """
INSERT INTO run_gpus (run_id, uuid, gpu_index, serial, name)
SELECT runs.id, json_extract(gpu.value, '$.uuid'), json_extract(gpu.value, '$.index'),
       json_extract(gpu.value, '$.serial'), json_extract(gpu.value, '$.name')
FROM runs, json_each(runs.report_json, '$.environment.gpus') AS gpu
WHERE json_type(gpu.value, '$.uuid') = 'text'
"""


def _sqlite_busy(path: object, error: sqlite3.Error) -> HistoryUnreachable | None:
    """A lock another process held past the busy timeout (SQLITE_BUSY, SQLITE_LOCKED): the file
    is sound and will be free again, so a run goes on and keeps its record in the spool, as it
    does for a server that cannot be reached; None for any other error."""
    if getattr(error, "sqlite_errorcode", None) not in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED):
        return None
    return HistoryUnreachable(
        f"history {path}: another process held it for {BUSY_TIMEOUT_SECONDS:g} s ({error}); "
        "nothing more was written"
    )


# 6: the timelines of the runs stored before, in one statement each from their accept runs
# (temp.upgrade_runs: each one's start as latest_runs keeps it and the action of a failed one):
# each judged run linked to the judged run before it on its node, each GPU's run to the run
# before it of that GPU. The append's rule (fleet_tables.keep_timelines), for a whole history
# at once; tests/store/test_fleet_tables.py holds the two to the same tables.
_V6_TIMELINES = (
    "INSERT INTO node_timeline (node, started, run_id, fitness, action, prev_failed, "
    "prev_started) SELECT node, started, id, fitness, action, CASE WHEN judged THEN "
    "lag(fitness = 'fail') OVER w END, CASE WHEN judged THEN lag(started) OVER w END FROM "
    "(SELECT coalesce(r.hostname, '') AS node, u.started, r.id, r.fitness, u.action, "
    "r.fitness IN ('pass', 'fail') AS judged FROM runs r JOIN temp.upgrade_runs u "
    "ON u.id = r.id) WINDOW w AS (PARTITION BY node, judged ORDER BY started, id)",
    "INSERT INTO gpu_timeline (uuid, started, run_id, node, serial, named, prev_named, "
    "prev_started, prev_node, prev_serial) SELECT uuid, started, id, node, serial, named, "
    "lag(named) OVER w, lag(started) OVER w, lag(node) OVER w, lag(serial) OVER w FROM "
    "(SELECT g.uuid, u.started, r.id, coalesce(r.hostname, '') AS "
    "node, min(CASE WHEN typeof(g.serial) = 'text' AND g.serial != '' THEN g.serial END) AS "
    "serial, EXISTS (SELECT 1 FROM json_each(r.remediated) AS j WHERE j.value = g.uuid) AS "
    "named FROM runs r JOIN temp.upgrade_runs u ON u.id = r.id JOIN run_gpus g "
    "ON g.run_id = r.id GROUP BY r.id, g.uuid) WINDOW w AS (PARTITION BY uuid ORDER BY "
    "started, id)",
)


# 8: each stored accept's stack, and why a failed one's action, read out of its report by
# SQLite's JSON functions (fleet_tables.stack_label's and plan_why's rules); a failed run whose
# report holds no plan (stored before plans were) is planned in Python after (_v8_whys)
_V8_COLUMNS = ("stack TEXT", "why TEXT", "passed INTEGER", "slower INTEGER")
_V8_BACKFILL = (
    f"UPDATE node_timeline AS t SET stack = (SELECT {STACK_FROM_JSON_SQLITE} FROM runs r "
    "WHERE r.id = t.run_id), why = CASE WHEN t.action = '' THEN '' ELSE (SELECT "
    f"{WHY_FROM_JSON_SQLITE} FROM runs r WHERE r.id = t.run_id) END, passed = (SELECT r.passed "
    "FROM runs r WHERE r.id = t.run_id), slower = (SELECT r.slower_json IS NOT NULL FROM runs r "
    "WHERE r.id = t.run_id)"
)
_V8_UNPLANNED = (
    "SELECT t.node, t.started, t.run_id, r.report_json FROM node_timeline t JOIN runs r ON "
    "r.id = t.run_id WHERE t.action != '' AND t.why = '' AND "
    "coalesce(json_type(r.report_json, '$.actions'), 'null') = 'null'"
)


def _check_header(path: Path) -> None:
    """Refuse files that are not SQLite, or whose header promises more pages than the file has."""
    with path.open("rb") as stream:
        header = stream.read(100)
    if not header:
        return  # an empty file is an empty database: nothing in it to lose
    if len(header) < 100 or not header.startswith(_SQLITE_MAGIC):
        raise HistoryError(f"history {path}: not an SQLite database; refusing to touch it")
    (page_size,) = struct.unpack(">H", header[16:18])
    page_size = 65536 if page_size == 1 else page_size
    change_counter, pages = struct.unpack(">II", header[24:32])
    (valid_for,) = struct.unpack(">I", header[92:96])
    # The in-header page count is only meaningful when written by the same change (file format).
    if valid_for == change_counter and pages and path.stat().st_size < pages * page_size:
        raise HistoryError(
            f"history {path}: truncated ({path.stat().st_size} bytes, header says "
            f"{pages * page_size}); left untouched, restore it or pass another --history"
        )


def _inspect(path: Path) -> tuple[int, int, list[str]]:
    """(application_id, user_version, tables) of an existing database, read in one transaction.

    Read-write where the file allows it: SQLite rolls back a hot journal (a writer killed
    mid-transaction) on such an open, which a read-only open never can. One read transaction, so
    a history another job is creating right now is seen before or after its creation, never
    half-way (its tables without its application id would read as a foreign database).
    """
    mode = "rw" if os.access(path, os.W_OK) else "ro"
    uri = f"file:{path.resolve().as_posix()}?mode={mode}"
    try:
        connection = sqlite3.connect(
            uri, uri=True, timeout=BUSY_TIMEOUT_SECONDS, isolation_level=None
        )
    except sqlite3.Error as error:
        raise HistoryError(f"history {path}: cannot open: {error}") from None
    try:
        connection.execute("BEGIN")
        application_id = connection.execute("PRAGMA application_id").fetchone()[0]
        user_version = connection.execute("PRAGMA user_version").fetchone()[0]
        tables = [
            row[0]
            for row in connection.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name"
            )
        ]
        connection.execute("COMMIT")
    except sqlite3.DatabaseError as error:
        raise _sqlite_busy(path, error) or HistoryError(
            f"history {path}: unreadable database ({error}); left untouched"
        ) from None
    finally:
        connection.close()
    return application_id, user_version, tables


class SqliteHistory(History):
    """The embedded SQLite history (one file per node, or per small pool)."""

    _mark = "?"
    _stored_order = "rowid"
    _bin = "CAST((value - {m}) / {m} * {m} AS INTEGER)"  # value >= low: truncation is floor

    def __init__(self, path: Path, connection: sqlite3.Connection) -> None:
        self.location = path
        self._connection = connection

    def _instant(self, started_at: str) -> float:
        return run_started(started_at).timestamp()

    @staticmethod
    def _seconds(instant: Any) -> float:
        return float(instant)

    @classmethod
    @contextmanager
    def open_file(cls, path: Path, *, create: bool = True) -> Iterator[SqliteHistory]:
        """Open (and, when `create`, initialise) the database at `path`; refuse foreign files."""
        from gpuaccept.input_files import special_file_kind

        try:  # a directory on the way that this user may not search answers no question
            is_dir, kind = path.is_dir(), special_file_kind(path)
            exists, is_link = path.exists(), path.is_symlink()
        except OSError as error:
            raise HistoryError(
                f"history {path}: cannot be reached: {error.strerror or error}"
            ) from None
        if is_dir:
            raise HistoryError(f"history {path}: is a directory")
        if kind is not None:
            raise HistoryError(f"history {path}: is {kind}, not a database file")
        if not exists and is_link:
            raise HistoryError(
                f"history {path}: a symbolic link that leads nowhere (a loop, or its target is "
                "gone)"
            )
        if not exists and not create:
            raise HistoryError(f"history {path}: no such database (nothing recorded yet?)")
        if exists:
            try:
                _check_header(path)
            except OSError as error:
                raise HistoryError(f"history {path}: cannot read: {error.strerror}") from None
            application_id, user_version, tables = _inspect(path)
            if tables and application_id != APPLICATION_ID:
                raise HistoryError(
                    f"history {path}: an SQLite database that is not a gpuaccept history "
                    "(foreign tables); refusing to write to it"
                )
            if user_version > SCHEMA_VERSION:
                raise HistoryError(
                    f"history {path}: written by a newer gpuaccept (schema {user_version}, "
                    f"this one reads {SCHEMA_VERSION}); upgrade gpuaccept"
                )
            if not tables and not create:
                raise HistoryError(f"history {path}: empty database (nothing recorded yet)")
        else:
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
            except OSError as error:
                raise HistoryError(
                    f"history {path}: cannot create its directory: {error.strerror}"
                ) from None
        try:
            connection = sqlite3.connect(path, timeout=BUSY_TIMEOUT_SECONDS, isolation_level=None)
        except sqlite3.Error as error:
            raise HistoryError(f"history {path}: cannot open: {error}") from None
        history = cls(path, connection)
        try:
            connection.execute("PRAGMA foreign_keys = ON")
            if create:
                history._initialise()
            elif exists and tables and user_version < SQLITE_LAYOUT_VERSION:
                history._upgrade()
            yield history
        except sqlite3.DatabaseError as error:
            raise _sqlite_busy(path, error) or HistoryError(
                f"history {path}: {error}; nothing was written"
            ) from None
        finally:
            connection.close()

    def check_writable(self) -> None:
        """Write to the database and roll back: a history that cannot be written (read-only file,
        directory or mount, where even root cannot write) is refused before a run, not after."""
        db = self._connection
        try:
            db.execute("BEGIN IMMEDIATE")
            try:
                version = db.execute("PRAGMA user_version").fetchone()[0]
                db.execute(f"PRAGMA user_version = {int(version)}")
            finally:
                if db.in_transaction:
                    db.execute("ROLLBACK")
        except sqlite3.Error as error:
            raise _sqlite_busy(self.path, error) or HistoryError(
                f"history {self.path}: cannot be written ({error}); pass another --history "
                "or --no-history"
            ) from None

    @contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        # IMMEDIATE takes the write lock up front, so concurrent writers wait (busy timeout)
        # instead of failing half-way through a run.
        self._connection.execute("BEGIN IMMEDIATE")
        try:
            yield self._connection
        except BaseException:
            if self._connection.in_transaction:  # SQLite may have rolled back already
                self._connection.execute("ROLLBACK")
            raise
        self._connection.execute("COMMIT")

    def _initialise(self) -> None:
        with self._transaction() as db:
            application_id = db.execute("PRAGMA application_id").fetchone()[0]
            if application_id == APPLICATION_ID:
                self._upgrade_in(db)
                return
            # Not executescript: it would COMMIT and end this transaction half-way.
            for statement in filter(str.strip, _SCHEMA.split(";")):
                db.execute(statement)
            db.execute(f"PRAGMA application_id = {APPLICATION_ID}")
            db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")

    def _upgrade(self) -> None:
        try:
            with self._transaction() as db:
                self._upgrade_in(db)
        except sqlite3.OperationalError as error:
            raise HistoryError(
                f"history {self.path}: written by an older gpuaccept; upgrading it in place "
                f"needs write access ({error})"
            ) from None

    def _upgrade_in(self, db: sqlite3.Connection) -> None:
        """Bring an older database of ours to this schema, in the caller's transaction."""
        version = int(db.execute("PRAGMA user_version").fetchone()[0])
        if version >= SCHEMA_VERSION:
            return
        from gpuaccept.store.base import say_upgrade

        say_upgrade(
            str(self.path), version, int(db.execute("SELECT count(*) FROM runs").fetchone()[0])
        )
        if version < 2:
            # version 1 kept passed/failed_checks only, which called a run that judged nothing
            # a pass: each verdict is judged again from the stored report
            from gpuaccept.report.reading import validated_report

            db.execute("ALTER TABLE runs ADD COLUMN verdict_json TEXT NOT NULL DEFAULT ''")
            for run_id, text in db.execute("SELECT id, report_json FROM runs").fetchall():
                try:
                    verdict = validated_report(text).verdict
                except ValueError as error:
                    raise HistoryError(
                        f"history {self.path}: run {run_id}'s stored report is damaged "
                        f"({_first_line(error)}); cannot upgrade the database, nothing was "
                        "changed"
                    ) from None
                db.execute(
                    "UPDATE runs SET verdict_json = ?, passed = ?, failed_checks = ? WHERE id = ?",
                    (
                        verdict.model_dump_json(),
                        int(verdict.passed),
                        ",".join(verdict.failed_checks),
                        run_id,
                    ),
                )
        if version < 3:
            for statement in filter(str.strip, _RUN_GPUS_SCHEMA.split(";")):
                db.execute(statement)
            db.execute("DELETE FROM run_gpus")  # filled from the reports, whatever was there
            db.execute(_BACKFILL_RUN_GPUS)
        if version < 4:
            present = {row[1] for row in db.execute("PRAGMA table_info(runs)")}
            for statement in _V4_COLUMNS:
                if statement.split()[5] not in present:  # "ALTER TABLE runs ADD COLUMN name"
                    db.execute(statement)
            for statement in (*_V4_BACKFILL, _RUNS_BY_KIND):
                db.execute(statement)
            failed = db.execute(
                "SELECT id, report_json FROM runs WHERE passed = 0 AND command = 'accept'"
            ).fetchall()
            from gpuaccept.actions import out_of_service_uuids

            for run_id, text in failed:
                named = out_of_service_uuids(self._parsed_report(run_id, text))
                db.execute(
                    "UPDATE runs SET remediated = ? WHERE id = ?", (json.dumps(named), run_id)
                )
        if version < 5:
            db.execute(_LATEST_SCHEMA)
            db.execute("DELETE FROM latest_runs")  # filled from the runs, whatever was there
            # every stored run through the append's own rule, so the two cannot differ
            db.executemany(
                LATEST_UPSERT.format(m="?"),
                [
                    (host or "", command, level, run_started(started_at).timestamp(), run_id)
                    for host, command, level, started_at, run_id in db.execute(
                        "SELECT hostname, command, level, started_at, id FROM runs"
                    ).fetchall()
                ],
            )
        if version < 6:
            for statement in (*_V6_DROPPED, *tables(SQLITE_TYPES)):
                db.execute(statement)
            for table in ("fleet_figures", "node_timeline", "gpu_timeline"):
                db.execute(f"DELETE FROM {table}")  # filled from the runs, whatever was there
            self._fill_fleet_figures(db)
            accept = db.execute(
                "SELECT id, started_at, passed, CASE WHEN passed = 0 THEN report_json END "
                "FROM runs WHERE command = 'accept'"
            )
            db.execute(
                "CREATE TEMP TABLE upgrade_runs (id INTEGER PRIMARY KEY, started REAL NOT NULL, "
                "action TEXT NOT NULL)"
            )
            db.executemany(
                "INSERT INTO temp.upgrade_runs (id, started, action) VALUES (?, ?, ?)",
                [
                    (run_id, self._instant(started_at), self._action(run_id, passed, text))
                    for run_id, started_at, passed, text in accept.fetchall()
                ],
            )
            for statement in _V6_TIMELINES:
                db.execute(statement)
            db.execute("DROP TABLE temp.upgrade_runs")
        # 7 adds an index to PostgreSQL alone (history_pg.py): SQLite's gpu_timeline, a table
        # WITHOUT ROWID, is already stored in (uuid, started) order with every column
        if version < 8:
            present = {row[1] for row in db.execute("PRAGMA table_info(node_timeline)")}
            for column in _V8_COLUMNS:
                name, kind = column.split()
                if name not in present:  # a table made by step 6 above has them
                    default = "''" if kind == "TEXT" else "0"
                    db.execute(
                        f"ALTER TABLE node_timeline ADD COLUMN {column} NOT NULL DEFAULT {default}"
                    )
            db.execute(_V8_BACKFILL)
            self._v8_whys(db, _V8_UNPLANNED, "?")
            db.execute(tables(SQLITE_TYPES)[-1])  # stack_days
            db.execute("DELETE FROM stack_days")  # filled from the timeline, whatever was there
            db.execute(STACK_DAYS_FROM_TIMELINE.format(day="CAST(started / 86400 AS INTEGER)"))
        db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")

    def append(self, reports: Sequence[tuple[RunReport, str]]) -> list[tuple[int, bool]]:
        """Store runs (report, source) in one transaction: (run id, newly stored) for each."""
        stored: list[tuple[int, bool]] = []
        timelines: list[TimelineRun] = []  # the accept runs stored, for their stacks' days
        recorded_at = datetime.now(UTC).isoformat()
        with self._transaction() as db:
            for report, source in reports:
                digest = report_sha256(report)
                existing = db.execute(
                    "SELECT id FROM runs WHERE report_sha256 = ?", (digest,)
                ).fetchone()
                if existing:
                    stored.append((int(existing[0]), False))
                    continue
                cursor = db.execute(
                    f"INSERT INTO runs ({RUN_INSERT_COLUMNS}) "
                    f"VALUES ({', '.join('?' * len(RUN_INSERT_COLUMNS.split(', ')))})",
                    run_values(report, digest, recorded_at, source),
                )
                run_id = int(cursor.lastrowid or 0)
                measurements = measurement_rows(report, run_id)
                db.executemany(
                    f"INSERT INTO measurements ({MEASUREMENT_COLUMNS}) "
                    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    measurements,
                )
                db.executemany(
                    f"INSERT INTO run_gpus ({RUN_GPU_COLUMNS}) VALUES (?, ?, ?, ?, ?)",
                    run_gpu_rows(report, run_id),
                )
                update = self._fleet_update(report, run_id, measurements)
                self._keep_fleet_tables(db, update)
                if update.timeline is not None:
                    timelines.append(update.timeline)
                stored.append((run_id, True))
            keep_stack_days(db, "?", timelines)
        return stored

    def gpu_runs(self, uuid: str, limit: int = 200) -> list[tuple[RunRow, int | None, str | None]]:
        """The runs a GPU took part in, newest first, on whatever host (run, its index there, its
        serial as captured): bounded by `limit`, found through the UUID's index."""
        # one query: run_gpus' columns (run_id, uuid, gpu_index, serial, name) share no name
        # with the runs' that _RUN_COLUMNS lists
        rows = self._connection.execute(
            f"SELECT {_RUN_COLUMNS}, gpu_index, serial FROM run_gpus "
            "JOIN runs ON runs.id = run_gpus.run_id WHERE uuid = ? "
            "ORDER BY julianday(started_at) DESC, id DESC LIMIT ?",
            (uuid, limit),
        )
        return [(self._run_row(row[:10]), row[10], row[11]) for row in rows]

    def newest_start(self) -> str | None:
        # the newest of the kinds' latest runs is the history's newest (each run started no
        # later than its kind's latest): read from latest_runs, not every run's start
        row = self._connection.execute(
            "SELECT r.started_at FROM latest_runs l CROSS JOIN runs r ON r.id = l.run_id "
            "ORDER BY l.started DESC, l.run_id DESC LIMIT 1"
        ).fetchone()
        return None if row is None else str(row[0])

    def _where_in(self, sql: str, values: Sequence[Any], *after: Any) -> list[tuple[Any, ...]]:
        """The rows of `sql`, whose `{marks}` is the IN list of `values`, run in parts: SQLite
        bounds a statement's parameters (32,766 since 3.32)."""
        rows: list[tuple[Any, ...]] = []
        for start in range(0, len(values), 500):
            part = list(values[start : start + 500])
            marks = ", ".join("?" * len(part))
            rows += self._connection.execute(sql.format(marks=marks), (*part, *after)).fetchall()
        return rows

    def passed_runs(self, run_ids: Sequence[int]) -> set[int]:
        rows = self._where_in(
            "SELECT id FROM runs WHERE id IN ({marks}) AND passed = 1", sorted(set(run_ids))
        )
        return {int(row[0]) for row in rows}

    def slower_checks(self, run_ids: Sequence[int]) -> dict[int, CheckResult]:
        return self._slower(
            self._where_in(
                "SELECT id, slower_json FROM runs WHERE id IN ({marks}) "
                "AND slower_json IS NOT NULL",
                run_ids,
            )
        )

    def list_runs(
        self,
        *,
        node: str | None = None,
        command: str | None = None,
        limit: int | None = None,
        level: str | None = None,
        device_mode: str | None = None,
        passed_only: bool = False,
        oldest_first: bool = False,
        started_by: float | None = None,
        started_since: float | None = None,
    ) -> list[RunRow]:
        """Runs, newest first (`oldest_first`: oldest first), filtered in the query (so a
        limit counts only the runs asked for), ordered by their start as a time (a stamp with an
        offset is the instant it names, not text), and, with `started_by` / `started_since`
        (seconds since the epoch), only those that started by / since then."""
        conditions, parameters = _filters(
            node=node, command=command, level=level, device_mode=device_mode
        )
        if passed_only:
            conditions.append("passed = 1")
        if started_by is not None:
            conditions.append("julianday(started_at) <= julianday(?, 'unixepoch')")
            parameters.append(started_by)
        if started_since is not None:
            conditions.append("julianday(started_at) >= julianday(?, 'unixepoch')")
            parameters.append(started_since)
        where = f" WHERE {' AND '.join(conditions)}" if conditions else ""
        order = "ASC" if oldest_first else "DESC"
        sql = (
            f"SELECT {_RUN_COLUMNS} FROM runs"
            f"{where} ORDER BY julianday(started_at) {order}, id {order}"
        )
        if limit is not None:
            sql += " LIMIT ?"
            parameters.append(limit)
        return [self._run_row(row) for row in self._connection.execute(sql, parameters)]

    def newest_runs(self, command: str) -> list[RunRow]:
        # each node's newest of the command's levels, from latest_runs (one row per node and
        # kind): no other run is ranked or read
        rows = self._connection.execute(
            f"SELECT {_RUN_COLUMNS} FROM runs WHERE id IN (SELECT run_id FROM (SELECT run_id, "
            "ROW_NUMBER() OVER (PARTITION BY node ORDER BY started DESC, run_id DESC) AS newest "
            "FROM latest_runs WHERE command = ?) WHERE newest = 1) ORDER BY hostname",
            (command,),
        )
        return [self._run_row(row) for row in rows]

    def report(self, run_id: int) -> RunReport:
        row = self._connection.execute(
            "SELECT report_json FROM runs WHERE id = ?", (run_id,)
        ).fetchone()
        if row is None:
            raise HistoryError(
                f"history {self.path}: no run {run_id} (see `gpuaccept history list`)"
            )
        return self._parsed_report(run_id, row[0])

    def count(self) -> int:
        return int(self._connection.execute("SELECT count(*) FROM runs").fetchone()[0])

    def points(
        self,
        metric: str | None = None,
        *,
        node: str | None = None,
        command: str | None = None,
        level: str | None = None,
        latest_only: bool = False,
    ) -> list[MetricPoint]:
        """Stored figures, oldest first. `metric` is `NAME` or `CHECK/NAME`; `command` and
        `level` keep like with like (a quick run's figures are not a standard run's).

        With `latest_only`, only the newest figure per GPU and metric: a GPU by its UUID wherever
        it ran (a GPU moved to another node is one GPU, its newest figure on its newest host), a
        figure without a UUID (the CPU twins, a capture without one, a node's figure) per node
        and device (issue #31 §4).
        """
        conditions, parameters = _filters(node=node, command=command, level=level)
        if metric is not None:
            check, _, name = metric.rpartition("/")
            conditions.append("m.name = ?")
            parameters.append(name)
            if check:
                conditions.append("m.check_name = ?")
                parameters.append(check)
        where = f" WHERE {' AND '.join(conditions)}" if conditions else ""
        # One node's figures: its runs first (an index on the node), then their figures by run
        # id. SQLite otherwise starts from every figure of the metric in the fleet (3.7 s at
        # 300,000 runs, benchmarks/history_scale.py); CROSS JOIN keeps that order, INDEXED BY
        # the index (left to itself, it looked each run's figures up by their name).
        joined = (
            "runs r CROSS JOIN measurements m INDEXED BY measurements_by_run"
            if node is not None
            else "measurements m JOIN runs r"
        )
        ranked = (
            "SELECT r.id, r.started_at, r.hostname, m.check_name, m.name, m.value, m.unit, "
            "m.device_index, m.device_name, m.gpu_uuid, ROW_NUMBER() OVER (PARTITION BY "
            "m.check_name, m.name, coalesce(m.gpu_uuid, "
            "coalesce(r.hostname, '') || '#' || coalesce(m.device_index, 'node')) "
            "ORDER BY julianday(r.started_at) DESC, r.id DESC) AS newest "
            f"FROM {joined} ON r.id = m.run_id{where}"
        )
        sql = f"SELECT * FROM ({ranked})"
        if latest_only:
            sql += " WHERE newest = 1"
        sql += " ORDER BY julianday(started_at), id, device_index"
        return [_point(row) for row in self._connection.execute(sql, parameters)]


@contextmanager
def open_history(location: HistoryLocation | str, create: bool = True) -> Iterator[History]:
    """Open (and, when `create`, initialise) the history at `location` in the store that keeps
    it: a `postgresql://` URI on its server, anything else an SQLite file. Foreign databases and
    files are refused; a server that cannot be reached raises `HistoryUnreachable`."""
    where = as_location(location)
    if isinstance(where, PgLocation):
        from gpuaccept.store.history_pg import PgHistory

        with PgHistory.connect(where, create=create) as history:
            yield history
    else:
        with SqliteHistory.open_file(where, create=create) as sqlite_history:
            yield sqlite_history


History._opener = open_history  # History.open, below both stores, opens through it
