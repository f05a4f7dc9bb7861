"""The SQLite store of runs: append, list, fetch, trend, and the latest figures per node and GPU.

Several HTCondor jobs may append to one database on a shared file system, so the store uses
SQLite's rollback journal (not WAL, whose shared-memory index does not work across hosts), a
busy timeout, and one `BEGIN IMMEDIATE` transaction per append: a run is stored whole or not at
all. A file that is not ours (another SQLite database, a truncated one, not SQLite at all) is
reported and never written.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
import sqlite3
import struct
from abc import ABC, abstractmethod
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple
from urllib.parse import parse_qsl, urlsplit

from gpuaccept.errors import InputError
from gpuaccept.record.identity import node_name_of
from gpuaccept.store.fleet_tables import (
    FIGURE_GROUPS,
    FIGURE_UNITS,
    FIGURES_BEYOND,
    GPU_INCIDENTS,
    GPU_STRETCHES,
    LATEST_UPSERT,
    MIDDLE_VALUES,
    NEWEST_ACCEPT_ACTIONS,
    NEWEST_FIGURES,
    NODE_INCIDENTS,
    SQLITE_TYPES,
    Cursor,
    FleetUpdate,
    failed_plan,
    figure_rows,
    keep_fleet_figures,
    keep_latest,
    keep_timelines,
    previous_latest,
    tables,
    timeline_run,
)
from gpuaccept.verdict import RunVerdict

if TYPE_CHECKING:
    # imported where a report is read or written: listing runs reads verdicts only
    from gpuaccept.results import CheckResult, RunReport

HISTORY_ENV = "GPUACCEPT_HISTORY"
# a named GPU's window: (UUID, runs, first and last start in seconds, incidents, its stretches'
# (start in seconds, node, serial))
GpuWindow = tuple[str, int, float, float, int, list[tuple[float, str, str | None]]]
# (UUID, incidents, hours observed, runs, hosts, serial): History.gpu_incidents
GpuIncidents = list[tuple[str, int, float, int, tuple[str, ...], str | None]]
APPLICATION_ID = 0x67707561  # "gpua" in the SQLite header marks our databases
# 2: each run's verdict (RunVerdict as JSON) is stored beside the report; a version 1 database
# is upgraded in place when first opened (its verdicts judged from the stored reports).
# 3: run_gpus, each run's GPUs by UUID and serial (issue #31 §4: a GPU's life across hosts)
# 4: what `history fleet` reads of a run kept beside it (its fitness, the GPUs it named for a
# remediation, its own slower-than-before check) and the index runs_by_kind, so the fleet's
# view is found in an index and a few columns, not by reading every report (issue #33 §2:
# bounded by the fleet, not the history); an older database is filled in once when opened
# 5: latest_runs, each node's newest run of each kind (command, level), kept up to date by every
# append: the fleet's nodes and figures are found there, not by ranking every run (issue #33 §2)
# 6: fleet_figures, node_timeline and gpu_timeline (store/fleet_tables.py), kept by every
# append: the fleet's medians, outliers and incidents are counted by the database, not by
# passing every figure and run of the window through Python (issue #33 §2, under a second)
SCHEMA_VERSION = 7
# the last version that changed an SQLite file's tables: a file at it or later is read as it is
# (7 changed PostgreSQL alone), so a history on a read-only mount stays readable; the next write
# moves its version on
SQLITE_LAYOUT_VERSION = 6
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


class HistoryError(InputError):
    """The history database cannot be used as asked (exit 2)."""


class HistoryUnreachable(HistoryError):
    """The history's server cannot be reached now (down, refused, timed out, TLS refused): a
    run keeps its report in the spool instead (`gpuaccept history push` delivers it later)."""


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


_PG_SCHEMES = ("postgresql://", "postgres://")
# Any other `scheme://` (sqlite:///h.db as SQLAlchemy writes it, file://, POSTGRESQL:// that libpq
# does not take: its prefix test is case-sensitive) would otherwise name a file under a directory
# called "sqlite:" in the working directory: an empty history listed, a run recorded where no one
# looks.
_OTHER_URI = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://")


@dataclass(frozen=True)
class PgLocation:
    """A PostgreSQL history named by a libpq connection URI. Credentials come from libpq's own
    sources (PGPASSWORD, ~/.pgpass or PGPASSFILE, a service file): a password in the URI would
    stand in `ps`, job files and logs, so it is refused."""

    uri: str

    def __str__(self) -> str:
        return self.uri


HistoryLocation = Path | PgLocation


def is_postgresql(text: str) -> bool:
    return text.startswith(_PG_SCHEMES)


def as_location(value: HistoryLocation | str) -> HistoryLocation:
    """A --history value or $GPUACCEPT_HISTORY: a `postgresql://` URI, else an SQLite file."""
    if isinstance(value, PgLocation | Path):
        return value
    if not is_postgresql(value):
        if _OTHER_URI.match(value):
            raise HistoryError(
                f"history {value!r}: not a postgresql:// URI; an SQLite history is named by its "
                "file's path, with no scheme"
            )
        return Path(value)
    try:
        parts = urlsplit(value)
        _ = parts.port  # a port that is not a number raises here, not in libpq
        query = parse_qsl(parts.query, keep_blank_values=True, strict_parsing=bool(parts.query))
    except ValueError as error:
        raise HistoryError(f"history {value!r}: not a PostgreSQL URI ({error})") from None
    if parts.password is not None or any(key == "password" for key, _ in query):
        raise HistoryError(
            "history: a password in the PostgreSQL URI would show in ps, job files and logs; "
            "put it in ~/.pgpass (or PGPASSFILE, PGPASSWORD, a service file) and leave it out "
            "of the URI"
        )
    if parts.fragment:
        raise HistoryError(f"history {value!r}: a PostgreSQL URI has no '#' part")
    return PgLocation(value)


def default_history(environ: dict[str, str] | None = None) -> HistoryLocation:
    """$GPUACCEPT_HISTORY (a file or a `postgresql://` URI), else the user's data directory
    (XDG), else ~/.local/share."""
    env = dict(os.environ) if environ is None else environ
    if env.get(HISTORY_ENV):
        return as_location(env[HISTORY_ENV])
    data_home = env.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(data_home) / "gpuaccept" / "history.sqlite"


def history_location(value: str | Path | None) -> HistoryLocation:
    """The history a command was given (--history), else the default."""
    return default_history() if value is None else as_location(value)


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


def local_file(location: HistoryLocation) -> Path | None:
    """The file of an SQLite history (for the checks that no output overwrites it); None for a
    server's."""
    return location if isinstance(location, Path) else None


@dataclass(frozen=True)
class RunRow:
    id: int
    started_at: str
    hostname: str | None
    command: str
    level: str
    device_mode: str
    verdict: RunVerdict
    duration_seconds: float
    tool_version: str
    source: str


class MetricPoint(NamedTuple):
    """One stored figure with the run it came from. A named tuple, not a frozen dataclass: the
    fleet's view builds one per GPU and figure (160,000 at 10,000 nodes), and a frozen
    dataclass costs five times as much to make."""

    run_id: int
    started_at: str
    hostname: str | None
    check_name: str
    name: str
    value: float
    unit: str
    device_index: int | None
    device_name: str | None
    gpu_uuid: str | None

    @property
    def metric(self) -> str:
        return f"{self.check_name}/{self.name}"


def report_sha256(report: RunReport) -> str:
    """Identity of a run: the same report imported twice is stored once."""
    return hashlib.sha256(report.model_dump_json().encode()).hexdigest()


RUN_INSERT_COLUMNS = (
    "report_sha256, command, level, device_mode, started_at, finished_at, duration_seconds, "
    "passed, failed_checks, verdict_json, hostname, tool_version, recorded_at, source, "
    "report_json, fitness, remediated, slower_json"
)
MEASUREMENT_COLUMNS = (
    "run_id, check_name, name, value, unit, device_index, device_name, gpu_uuid, verdict"
)
RUN_GPU_COLUMNS = "run_id, uuid, gpu_index, serial, name"


def run_values(report: RunReport, digest: str, recorded_at: str, source: str) -> tuple[Any, ...]:
    """A run's row, in RUN_INSERT_COLUMNS' order (both stores)."""
    return (
        digest,
        report.command,
        report.level,
        report.device_mode,
        report.started_at,
        report.finished_at,
        report.duration_seconds,
        int(report.verdict.passed),
        ",".join(report.verdict.failed_checks),
        report.verdict.model_dump_json(),
        node_name_of(report),
        report.tool_version,
        recorded_at,
        source,
        report.model_dump_json(),
        *fleet_columns(report),
    )


def run_started(started_at: str) -> datetime:
    """A stored start as the instant it names (a time without an offset is UTC, as SQLite's
    julianday reads it)."""
    moment = datetime.fromisoformat(started_at)
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


def latest_key(report: RunReport) -> tuple[str, str, str]:
    """A run's row in latest_runs: (node, command, level), '' for a run without a hostname."""
    return (node_name_of(report) or "", report.command, report.level)


def fleet_columns(report: RunReport) -> tuple[str, str, str | None]:
    """What `history fleet` reads of a run, kept beside it: its fitness (pass, fail,
    not-judged), the GPU UUIDs a failed accept named for a remediation (JSON), and its own
    `history` check when that found the node slower than it was (JSON, else None)."""
    from gpuaccept.compare.self_comparison import stored_drop
    from gpuaccept.report.node_verdict import verdict_fitness

    plan = failed_plan(report) if report.command == "accept" else None
    named = report.out_of_service_uuids if plan is not None else []
    drop = stored_drop(report)
    return (
        verdict_fitness(report.verdict),
        json.dumps(named),
        None if drop is None else drop.model_dump_json(),
    )


def measurement_rows(report: RunReport, run_id: int) -> list[tuple[Any, ...]]:
    """A run's figures, in MEASUREMENT_COLUMNS' order, each with its GPU's UUID where the
    capture has one. NaN is no figure to trend (and SQLite stores it as NULL): the run and its
    report, NaN included, are still recorded."""
    uuids = {
        gpu.get("index"): gpu.get("uuid")
        for gpu in report.environment.get("gpus") or []
        if isinstance(gpu, dict)
    }
    return [
        (
            run_id,
            check.name,
            m.name,
            m.value,
            m.unit,
            m.device_index,
            m.device_name,
            uuids.get(m.device_index),
            m.verdict.value,
        )
        for check in report.checks
        for m in check.measurements
        if not math.isnan(m.value)
    ]


def run_gpu_rows(report: RunReport, run_id: int) -> list[tuple[Any, ...]]:
    """A run's GPUs with a UUID, in RUN_GPU_COLUMNS' order."""
    return [
        (run_id, gpu["uuid"], gpu.get("index"), gpu.get("serial"), gpu.get("name"))
        for gpu in report.environment.get("gpus") or []
        if isinstance(gpu, dict) and isinstance(gpu.get("uuid"), str)
    ]


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


class History(ABC):
    """An open history: the embedded SQLite file (one node, the default) or a PostgreSQL
    database (a fleet's one store, issue #33 §2). Open either with `History.open(location)` as
    a context manager; both keep the same schema and answer the same queries."""

    location: HistoryLocation
    # a GPU's runs in a window (store/fleet_tables.py): PostgreSQL has its own forms
    _gpu_incidents = GPU_INCIDENTS
    _gpu_stretches = GPU_STRETCHES

    @property
    def path(self) -> HistoryLocation:
        """Where the history is, as messages name it (a PostgreSQL URL has no password)."""
        return self.location

    @classmethod
    @contextmanager
    def open(cls, location: HistoryLocation | str, *, create: bool = True) -> Iterator[History]:
        """Open (and, when `create`, initialise) the history at `location`; refuse foreign
        databases and files. A PostgreSQL server that cannot be reached raises
        `HistoryUnreachable` (a run keeps its report in the spool)."""
        where = as_location(location)
        if isinstance(where, PgLocation):
            from gpuaccept.store.history_pg import PgHistory

            with PgHistory.connect(where, create=create) as history:
                yield history
        else:
            with SqliteHistory.open_file(where, create=create) as sqlite_history:
                yield sqlite_history

    @contextmanager
    def another(self) -> Iterator[History]:
        """A second connection to this history, for a read run beside this one's (in another
        thread: each connection stays in the thread that opened it)."""
        with History.open(self.location, create=False) as other:
            yield other

    @abstractmethod
    def check_writable(self) -> None:
        """Refuse, before a run, a history this user cannot write."""

    @abstractmethod
    def append(self, reports: Sequence[tuple[RunReport, str]]) -> list[tuple[int, bool]]:
        """Store runs (report, source) in one transaction: (run id, newly stored) for each."""

    @abstractmethod
    def gpu_runs(self, uuid: str, limit: int = 200) -> list[tuple[RunRow, int | None, str | None]]:
        """The runs a GPU took part in, newest first (run, its index there, its serial)."""

    @abstractmethod
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
        """Runs, newest first, filtered in the query."""

    @abstractmethod
    def newest_start(self) -> str | None:
        """When the history's newest run started (as stored); None when it holds none."""

    @abstractmethod
    def passed_runs(self, run_ids: Sequence[int]) -> set[int]:
        """Those of these runs that passed: read for them alone, not the history."""

    @abstractmethod
    def slower_checks(self, run_ids: Sequence[int]) -> dict[int, CheckResult]:
        """Of these runs, those whose own `history` check found the node slower than it was:
        that check, by run id."""

    @abstractmethod
    def newest_runs(self, command: str) -> list[RunRow]:
        """The newest run of `command` on each node, by node name: found in an index, bounded by
        the fleet, not the history."""

    @abstractmethod
    def report(self, run_id: int) -> RunReport:
        """A stored run's report."""

    @abstractmethod
    def count(self) -> int:
        """How many runs are stored."""

    @abstractmethod
    def points(
        self,
        metric: str | None = None,
        *,
        node: str | None = None,
        command: str | None = None,
        level: str | None = None,
        latest_only: bool = False,
    ) -> list[MetricPoint]:
        """Stored figures, oldest first (the fleet's: `fleet_points`)."""

    def _run_row(self, row: Sequence[Any]) -> RunRow:
        """A RunRow from the columns _RUN_COLUMNS names, in that order."""
        return RunRow(
            id=int(row[0]),
            started_at=row[1],
            hostname=row[2],
            command=row[3],
            level=row[4],
            device_mode=row[5],
            verdict=self._verdict(int(row[0]), row[6]),
            duration_seconds=row[7],
            tool_version=row[8],
            source=row[9],
        )

    def _verdict(self, run_id: int, text: str) -> RunVerdict:
        # a fleet's newest runs hold a few distinct verdicts (10,000 nodes: a handful of texts),
        # each parsed once; verdicts are frozen, so sharing one is safe
        parsed: dict[str, RunVerdict] = self.__dict__.setdefault("_verdicts", {})
        held = parsed.get(text)
        if held is not None:
            return held
        try:
            verdict = RunVerdict.model_validate_json(text)
        except ValueError as error:
            raise HistoryError(
                f"history {self.path}: run {run_id}'s stored verdict is damaged ({error}); "
                "restore the database from a copy"
            ) from None
        if len(parsed) < 4096:
            parsed[text] = verdict
        return verdict

    def _parsed_report(self, run_id: int, text: str) -> RunReport:
        from gpuaccept.report.reading import validated_report

        try:
            return validated_report(text)
        except ValueError as error:
            raise HistoryError(
                f"history {self.path}: run {run_id}'s stored report is damaged "
                f"({_first_line(error)}); restore the database from a copy"
            ) from None

    # -- the fleet's tables (schema 6, store/fleet_tables.py): one set of statements ---------

    _mark: str  # the placeholder of the store's driver

    _connection: Any  # the driver's connection: sqlite3's or psycopg's

    def _rows(self, sql: str, parameters: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        """The rows of `sql`, whose `{m}` are the driver's placeholders."""
        rows: list[tuple[Any, ...]] = self._connection.execute(
            sql.format(m=self._mark), parameters
        ).fetchall()
        return rows

    @abstractmethod
    def _instant(self, started_at: str) -> Any:
        """A stored start as the store keeps it in latest_runs and the fleet's tables."""

    @staticmethod
    @abstractmethod
    def _seconds(instant: Any) -> float:
        """Seconds since the epoch of one of the store's instants."""

    def node_incidents(self, since: str) -> list[tuple[str, int, float, int]]:
        """(node, incidents, hours from its first to its last judged run, judged runs) of each
        node with an accept run that started at or after `since`: counted in the database."""
        start = self._instant(since)
        return [
            (
                str(node),
                int(incidents),
                (self._seconds(last) - self._seconds(first)) / 3600 if judged else 0.0,
                int(judged),
            )
            for node, judged, first, last, incidents in self._rows(NODE_INCIDENTS, (start, start))
        ]

    def gpu_incidents(self, since: str) -> GpuIncidents:
        """(UUID, incidents, hours observed, runs, hosts first seen first, the serial of its
        latest run that had one) of each GPU that an accept run since `since` named for a
        remediation, over its accept runs since then on whatever host: counted in the database;
        its hosts and serials from the runs that begin a stretch on one host with one serial."""
        found = []
        for uuid, runs, first, last, incidents, stretches in self._gpu_windows(since):
            seen = sorted(stretches)
            serial = max(((moment, serial) for moment, _, serial in seen if serial), default=None)
            found.append(
                (
                    uuid,
                    incidents,
                    (last - first) / 3600,
                    runs,
                    tuple(dict.fromkeys(node for _, node, _ in seen if node)),
                    serial[1] if serial else None,
                )
            )
        return found

    def _gpu_windows(self, since: str) -> Iterator[GpuWindow]:
        """Each named GPU's runs in the window, counted (store/fleet_tables.py): by two
        statements, the stretches read first."""
        start = self._instant(since)
        stretches: dict[str, list[tuple[float, str, str | None]]] = {}
        for uuid, node, serial, started in self._rows(self._gpu_stretches, (start, start, start)):
            stretches.setdefault(str(uuid), []).append((self._seconds(started), node, serial))
        for uuid, runs, first, last, incidents in self._rows(
            self._gpu_incidents, (start, start, start)
        ):
            yield (
                str(uuid),
                int(runs),
                self._seconds(first),
                self._seconds(last),
                int(incidents),
                stretches.get(str(uuid), []),
            )

    def figure_groups(self) -> list[tuple[str, str, str, str, int]]:
        """(model, check, name, unit, how many) of the newest figures of each GPU and metric
        among each node's newest runs, 'cpu' the model of figures without a device name."""
        groups = []
        for model, check, name, count, low, high in self._rows(FIGURE_GROUPS):
            units = (
                [(low, count)] if low == high else self._rows(FIGURE_UNITS, (model, check, name))
            )
            groups += [(str(model), str(check), str(name), str(u), int(n)) for u, n in units]
        return groups

    def middle_values(self, model: str, metric: str, count: int) -> list[float]:
        """The middle value of a model's metric (`count` newest figures), or the two middle
        ones when `count` is even: a seek in the index of the newest figures' values."""
        check, _, name = metric.rpartition("/")
        offset, wanted = (count - 1) // 2, 2 - count % 2
        rows = self._rows(MIDDLE_VALUES, (model, check, name, wanted, offset))
        return [float(row[0]) for row in rows]

    def figures_beyond(
        self, model: str, metric: str, unit: str, low: float, high: float
    ) -> list[MetricPoint]:
        """The newest figures of a model's metric in `unit` below `low` or above `high`."""
        check, _, name = metric.rpartition("/")
        group = (model, check, name, unit)
        rows = self._rows(FIGURES_BEYOND, (*group, low, *group, high))
        return [_point(row) for row in rows]

    def fleet_points(self) -> list[MetricPoint]:
        """The newest figure of each GPU and metric (a GPU by its UUID wherever it ran, a figure
        without one per node and device) among each node's newest run of each kind, oldest
        run first: every figure the fleet's page draws."""
        return [_point(row) for row in self._rows(NEWEST_FIGURES)]

    def newest_accept_actions(self) -> dict[int, str]:
        """The recommended action of each node's newest accept run that did not pass, by run
        id."""
        return {int(run_id): str(action) for run_id, action in self._rows(NEWEST_ACCEPT_ACTIONS)}

    def _fleet_update(
        self, report: RunReport, run_id: int, measurements: Sequence[Any]
    ) -> FleetUpdate:
        """What the fleet's tables keep of a stored run: small beside the report, so an append
        of many runs holds these, not the reports, until it writes them."""
        started = self._instant(report.started_at)
        timeline = None
        if report.command == "accept":
            from gpuaccept.report.node_verdict import verdict_fitness

            timeline = timeline_run(report, run_id, started, verdict_fitness(report.verdict))
        return FleetUpdate(
            run_id,
            latest_key(report),
            started,
            report.started_at,
            node_name_of(report),
            measurements,
            timeline,
        )

    def _keep_fleet_tables(self, db: Cursor, update: FleetUpdate) -> None:
        """After a run is stored, in its transaction: latest_runs, the fleet's figures and the
        timelines, by the same statements in both stores."""
        previous = previous_latest(db, self._mark, update.key)
        if keep_latest(db, self._mark, update.key, update.started, update.run_id):
            rows = figure_rows(
                update.measurements, update.started, update.started_at, update.hostname
            )
            keep_fleet_figures(db, self._mark, update.run_id, rows, previous)
        if update.timeline is not None:
            keep_timelines(db, self._mark, update.timeline)

    # the order a run's figures were stored in (their ordinal in fleet_figures)
    _stored_order: str

    def _fill_fleet_figures(self, db: Cursor) -> None:
        """Schema 6's fleet_figures from the runs latest_runs names, by the append's own
        statements."""
        m = self._mark
        latest = db.execute(
            "SELECT l.run_id, l.started, r.started_at, r.hostname FROM latest_runs l "
            "JOIN runs r ON r.id = l.run_id",
            (),
        ).fetchall()
        for run_id, started, started_at, hostname in latest:
            measurements = db.execute(
                f"SELECT {MEASUREMENT_COLUMNS} FROM measurements WHERE run_id = {m} "
                f"ORDER BY {self._stored_order}",
                (run_id,),
            ).fetchall()
            rows = figure_rows(measurements, started, started_at, hostname)
            keep_fleet_figures(db, m, int(run_id), rows, None)

    def _action(self, run_id: int, passed: int, text: str | None) -> str:
        """The recommended action of a stored accept run that did not pass, '' otherwise."""
        plan = None if passed or text is None else failed_plan(self._parsed_report(run_id, text))
        return "" if plan is None else plan.action.value

    def _slower(self, rows: Sequence[tuple[Any, str]]) -> dict[int, CheckResult]:
        from gpuaccept.results import CheckResult

        found = {}
        for run_id, text in rows:
            try:
                found[int(run_id)] = CheckResult.model_validate_json(text)
            except ValueError:
                raise HistoryError(
                    f"history {self.path}: run {run_id}'s stored history check is damaged; "
                    "restore the database from a copy"
                ) from None
        return found


class SqliteHistory(History):
    """The embedded SQLite history (one file per node, or per small pool)."""

    _mark = "?"
    _stored_order = "rowid"

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

        if path.is_dir():
            raise HistoryError(f"history {path}: is a directory")
        kind = special_file_kind(path)
        if kind is not None:
            raise HistoryError(f"history {path}: is {kind}, not a database file")
        exists = path.exists()
        if not exists and path.is_symlink():
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
            for run_id, text in failed:
                named = self._parsed_report(run_id, text).out_of_service_uuids
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
        db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")

    def append(self, reports: Sequence[tuple[RunReport, str]]) -> list[tuple[int, bool]]:
        """Store runs (report, source) in one transaction: (run id, newly stored) for each."""
        stored: list[tuple[int, bool]] = []
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
                self._keep_fleet_tables(db, self._fleet_update(report, run_id, measurements))
                stored.append((run_id, True))
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


def _point(row: Sequence[Any]) -> MetricPoint:
    """A MetricPoint from a figure's run id, start, host, check, name, value, unit, device,
    model and UUID, in that order (`points`, and fleet_tables' readers)."""
    return MetricPoint(int(row[0]), *row[1:10])


def _first_line(error: Exception) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__


def report_points(report: RunReport, run_id: int) -> list[MetricPoint]:
    """A report's figures as the points the history would hold for it (GPU UUIDs unknown)."""
    return [
        MetricPoint(
            run_id=run_id,
            started_at=report.started_at,
            hostname=node_name_of(report),
            check_name=check.name,
            name=m.name,
            value=m.value,
            unit=m.unit,
            device_index=m.device_index,
            device_name=m.device_name,
            gpu_uuid=None,
        )
        for check in report.checks
        for m in check.measurements
    ]


def _filters(
    *,
    node: str | None = None,
    command: str | None = None,
    level: str | None = None,
    device_mode: str | None = None,
    mark: str = "?",
) -> tuple[list[str], list[object]]:
    """The conditions on a run's columns, with `mark` as the placeholder (SQLite's `?`,
    psycopg's `%s`), and their parameters."""
    asked = {"device_mode": device_mode, "level": level, "hostname": node, "command": command}
    conditions = [f"{column} = {mark}" for column, value in asked.items() if value is not None]
    return conditions, [value for value in asked.values() if value is not None]
