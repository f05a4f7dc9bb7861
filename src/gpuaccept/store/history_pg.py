"""The PostgreSQL history: one store a whole fleet writes to (issue #33 §2).

The same tables and columns as the SQLite history (history.py), plus each run's start as a
`timestamptz` to order and bound by; the interface both implement is base.py's (this module and
history.py do not import each other). Many writers at once are PostgreSQL's business: each append
is one transaction, a report's digest is UNIQUE and a run already stored is found, not stored
again (`INSERT ... ON CONFLICT DO NOTHING`, then the stored id). Creating or upgrading the
tables happens under an advisory lock, so a thousand nodes meeting an empty database at once
create it once.

Credentials come from libpq's own sources (PGPASSWORD, ~/.pgpass or PGPASSFILE, a service
file); TLS through `sslmode` in the URI or PGSSLMODE. A server that cannot be reached raises
`HistoryUnreachable`, which a run answers with its spool.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from gpuaccept.results import CheckResult, RunReport
from gpuaccept.store.base import (
    MEASUREMENT_COLUMNS,
    RUN_GPU_COLUMNS,
    RUN_INSERT_COLUMNS,
    SCHEMA_VERSION,
    GpuWindow,
    History,
    HistoryError,
    HistoryUnreachable,
    MetricPoint,
    PgLocation,
    RunRow,
    _filters,
    _first_line,
    _point,
    measurement_rows,
    report_sha256,
    run_gpu_rows,
    run_started,
    run_values,
)
from gpuaccept.store.fleet_tables import (
    GPU_WINDOWS_LATERAL,
    NODE_CHANGES_LATERAL,
    PG_TYPES,
    STACK_DAYS_FROM_TIMELINE,
    FleetUpdate,
    tables,
)

if TYPE_CHECKING:
    import psycopg

CONNECT_TIMEOUT_SECONDS = 10
# The server lets a statement wait for ever on a lock (lock_timeout and statement_timeout are 0
# by default: Debian's PostgreSQL 15, /usr/share/postgresql/15/postgresql.conf.sample:694-696,
# "0 is disabled"; the docs' runtime-config-client): one node frozen half-way through its
# append holds the append lock until TCP gives up on it (the server's tcp_keepalives_idle is
# the system's by default, conf.sample:80-81; Linux's tcp_keepalive_time is 7200 s), and every
# node's run hangs behind it; so does every run behind a DBA's VACUUM FULL of `runs`. Bounds
# for this session where the server, the database, the role and PGOPTIONS set none: a wait past
# them fails the statement, the transaction is undone, and a run keeps its report in the spool.
# lock_timeout covers advisory locks too (the append's and the schema's: seen in
# tests/store/test_history_waits.py). 60 s is four times the slowest append seen among 64
# writers on 2 cores (docs/results, history-scale-postgresql).
SESSION_BOUNDS = {
    "lock_timeout": "60s",
    "statement_timeout": "300s",  # the slowest read measured at 300,000 runs: about 2 s
    # this session frozen inside a transaction (the node stopped, its network gone): the server
    # ends it, and the locks it holds go with it
    "idle_in_transaction_session_timeout": "60s",
}
# pg_advisory_xact_lock's key while the tables are created or upgraded: "gpua" as in SQLite's
# application id, so the lock is ours and no other application's
_SCHEMA_LOCK = 0x67707561
_META = "gpuaccept_history"
_APPEND_LOCK = _SCHEMA_LOCK + 1  # pg_advisory_xact_lock's key of an append
# what an append does to each table: a role without one of these fails half-way through a run's
# append, so check_writable refuses it before the run
_APPEND_PRIVILEGES = (
    ("runs", "INSERT"),
    ("measurements", "INSERT"),
    ("run_gpus", "INSERT"),
    ("latest_runs", "INSERT, UPDATE"),
    ("fleet_figures", "INSERT, UPDATE, DELETE"),
    ("node_timeline", "INSERT, UPDATE"),
    ("gpu_timeline", "INSERT, UPDATE"),
    ("stack_days", "INSERT, UPDATE"),
)

_RUN_COLUMNS = (
    "runs.id, runs.started_at, runs.hostname, runs.command, runs.level, runs.device_mode, "
    "runs.verdict_json, runs.duration_seconds, runs.tool_version, runs.source"
)


def _pg_version(path: str) -> str:
    """A version in a stored report's environment as stack_label writes it ('-' for none)."""
    return f"coalesce(nullif(r.j #>> '{{environment,{path}}}', ''), '-')"


# Each schema version's statements, applied in order from the database's version to ours, in
# one transaction. The PostgreSQL store begins at the SQLite store's version 3 (run_gpus): the
# same tables, so one number names one schema in both.
MIGRATIONS: dict[int, tuple[str, ...]] = {
    3: (
        f"CREATE TABLE {_META} (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
        """CREATE TABLE runs (
            id BIGSERIAL PRIMARY KEY,
            report_sha256 TEXT NOT NULL UNIQUE,
            command TEXT NOT NULL,
            level TEXT NOT NULL,
            device_mode TEXT NOT NULL,
            started_at TEXT NOT NULL,
            started_time TIMESTAMPTZ NOT NULL,
            finished_at TEXT NOT NULL,
            duration_seconds DOUBLE PRECISION NOT NULL,
            passed INTEGER NOT NULL,
            failed_checks TEXT NOT NULL,
            verdict_json TEXT NOT NULL,
            hostname TEXT,
            tool_version TEXT NOT NULL,
            recorded_at TEXT NOT NULL,
            source TEXT NOT NULL,
            report_json TEXT NOT NULL
        )""",
        "CREATE INDEX runs_by_host ON runs (hostname, command, started_time, id)",
        "CREATE INDEX runs_by_time ON runs (started_time, id)",
        """CREATE TABLE measurements (
            run_id BIGINT NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
            check_name TEXT NOT NULL,
            name TEXT NOT NULL,
            value DOUBLE PRECISION NOT NULL,
            unit TEXT NOT NULL,
            device_index BIGINT,
            device_name TEXT,
            gpu_uuid TEXT,
            verdict TEXT NOT NULL
        )""",
        "CREATE INDEX measurements_by_name ON measurements (name, check_name)",
        "CREATE INDEX measurements_by_run ON measurements (run_id)",
        """CREATE TABLE run_gpus (
            run_id BIGINT NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
            uuid TEXT NOT NULL,
            gpu_index BIGINT,
            serial TEXT,
            name TEXT
        )""",
        "CREATE INDEX run_gpus_by_uuid ON run_gpus (uuid, run_id)",
        f"INSERT INTO {_META} (key, value) VALUES ('application', 'gpuaccept')",
        f"INSERT INTO {_META} (key, value) VALUES ('schema_version', '3')",
    ),
    4: (
        "ALTER TABLE runs ADD COLUMN fitness TEXT NOT NULL DEFAULT ''",
        "ALTER TABLE runs ADD COLUMN remediated TEXT NOT NULL DEFAULT '[]'",
        "ALTER TABLE runs ADD COLUMN slower_json TEXT",
        "UPDATE runs SET fitness = CASE verdict_json::jsonb ->> 'outcome' WHEN 'fail' THEN "
        "'fail' WHEN 'pass' THEN CASE WHEN verdict_json::jsonb ->> 'kind' = 'accept' AND "
        "verdict_json::jsonb ->> 'mode' = 'gpu' THEN 'pass' ELSE 'not-judged' END "
        "ELSE 'not-judged' END",
        "UPDATE runs SET slower_json = (SELECT c::text FROM jsonb_array_elements("
        "runs.report_json::jsonb -> 'checks') AS c WHERE c ->> 'name' = 'history' AND "
        "c ->> 'status' IN ('warn', 'fail') LIMIT 1) WHERE strpos(report_json, '\"history\"') > 0",
        "CREATE INDEX runs_by_kind ON runs "
        "(command, hostname, level, started_time, id, fitness, passed)",
    ),
    # each node's newest run of each kind, as SQLite's latest_runs (history.py), its start a
    # timestamptz; filled from the runs by the same rule an append keeps
    5: (
        """CREATE TABLE latest_runs (
            node TEXT NOT NULL,
            command TEXT NOT NULL,
            level TEXT NOT NULL,
            started TIMESTAMPTZ NOT NULL,
            run_id BIGINT NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
            PRIMARY KEY (node, command, level)
        )""",
        "INSERT INTO latest_runs (node, command, level, started, run_id) "
        "SELECT DISTINCT ON (coalesce(hostname, ''), command, level) coalesce(hostname, ''), "
        "command, level, started_time, id FROM runs "
        "ORDER BY coalesce(hostname, ''), command, level, started_time DESC, id DESC",
    ),
    # the fleet's figures and the timelines (store/fleet_tables.py), filled by _migrate
    6: tables(PG_TYPES),
    # A GPU's runs in a window, answered from an index alone: the table is a heap in the order
    # the runs were stored, so one GPU's rows lie on as many pages as it has runs, and without
    # this PostgreSQL read the whole window's GPU rows to find the named GPUs' (2.4 million
    # for 10,000 GPUs' 300,000 runs: GPU incidents 0.33 + 0.26 s, with it 0.15 + 0.11 s,
    # docs/results/2026-11-27-history-scale-session8.md). SQLite's table is in this order.
    7: (
        "CREATE INDEX gpu_timeline_window ON gpu_timeline (uuid, started) INCLUDE "
        "(named, prev_named, prev_started, node, serial, prev_node, prev_serial)",
    ),
    # each accept's stack and why a failed one's action (fleet_tables.stack_label and
    # plan_why, as SQLite's _V8_BACKFILL computes them); unplanned runs after, in _migrate
    8: (
        "ALTER TABLE node_timeline ADD COLUMN IF NOT EXISTS stack TEXT NOT NULL DEFAULT ''",
        "ALTER TABLE node_timeline ADD COLUMN IF NOT EXISTS why TEXT NOT NULL DEFAULT ''",
        "ALTER TABLE node_timeline ADD COLUMN IF NOT EXISTS passed INTEGER NOT NULL DEFAULT 0",
        "ALTER TABLE node_timeline ADD COLUMN IF NOT EXISTS slower INTEGER NOT NULL DEFAULT 0",
        "UPDATE node_timeline t SET stack = 'torch ' || "
        f"{_pg_version('torch,version')} || ' / CUDA ' || {_pg_version('cuda,runtime')} || "
        f"' / driver ' || {_pg_version('cuda,driver_version')}, why = CASE WHEN t.action = '' "
        "THEN '' ELSE coalesce((SELECT (rec ->> 'check') || ': ' || (rec ->> 'finding') FROM "
        "jsonb_array_elements(CASE WHEN jsonb_typeof(r.j #> '{actions,recommendations}') = "
        "'array' THEN r.j #> '{actions,recommendations}' ELSE '[]'::jsonb END) WITH ORDINALITY "
        "AS x (rec, i) WHERE rec ->> 'action' = t.action ORDER BY i LIMIT 1), '') END, "
        "passed = r.passed, slower = r.slower FROM (SELECT id, passed, (slower_json IS NOT "
        "NULL)::int AS slower, report_json::jsonb AS j FROM runs WHERE command = 'accept') AS r "
        "WHERE r.id = t.run_id",
        tables(PG_TYPES)[-1],  # stack_days
        "DELETE FROM stack_days",  # filled from the timeline, whatever was there
        STACK_DAYS_FROM_TIMELINE.format(day="floor(extract(epoch FROM started) / 86400)::bigint"),
    ),
}
_V8_UNPLANNED = (
    "SELECT t.node, t.started, t.run_id, r.report_json FROM node_timeline t JOIN runs r ON "
    "r.id = t.run_id WHERE t.action != '' AND t.why = '' AND "
    "coalesce(jsonb_typeof(r.report_json::jsonb -> 'actions'), 'null') = 'null'"
)
# 6: the timelines of the runs stored before, as SQLite's _V6_TIMELINES (history.py), from
# upgrade_runs (the action of each failed accept run)
_V6_TIMELINES = (
    "INSERT INTO node_timeline (node, started, run_id, fitness, action, prev_failed, "
    "prev_started) SELECT node, started, id, fitness, action, CASE WHEN judged THEN "
    "((lag(fitness) OVER w) = 'fail')::int END, CASE WHEN judged THEN lag(started) OVER w END "
    "FROM (SELECT coalesce(r.hostname, '') AS node, r.started_time AS started, r.id, r.fitness, "
    "coalesce(u.action, '') AS action, r.fitness IN ('pass', 'fail') AS judged FROM runs r "
    "LEFT JOIN upgrade_runs u ON u.id = r.id WHERE r.command = 'accept') AS s "
    "WINDOW w AS (PARTITION BY node, judged ORDER BY started, id)",
    "INSERT INTO gpu_timeline (uuid, started, run_id, node, serial, named, prev_named, "
    "prev_started, prev_node, prev_serial) SELECT uuid, started, id, node, serial, named, "
    "lag(named) OVER w, lag(started) OVER w, lag(node) OVER w, lag(serial) OVER w FROM "
    "(SELECT g.uuid, r.started_time AS started, r.id, "
    "coalesce(r.hostname, '') AS node, min(nullif(g.serial, '')) AS serial, "
    "(r.remediated::jsonb @> jsonb_build_array(g.uuid))::int AS named FROM runs r "
    "JOIN run_gpus g ON g.run_id = r.id WHERE r.command = 'accept' GROUP BY r.id, g.uuid) AS s "
    "WINDOW w AS (PARTITION BY uuid ORDER BY started, id)",
)


def _psycopg() -> Any:
    try:
        import psycopg
    except ImportError:
        raise HistoryError(
            "a postgresql:// history needs psycopg: pip install 'gpuaccept[postgresql]' "
            "(or the pixi environment, which has it)"
        ) from None
    return psycopg


class PgHistory(History):
    """A history in a PostgreSQL database. Open it with `History.open(location)`."""

    _mark = "%s"
    _stored_order = "ctid"  # a run's figures, written by one COPY and never updated
    _bin = "floor((value - {m}) / {m} * {m})::bigint"
    _node_changes = NODE_CHANGES_LATERAL
    _stack_day_inline = True  # a data-modifying WITH: no round trip of its own

    def __init__(self, location: PgLocation, connection: psycopg.Connection[Any]) -> None:
        self.location = location
        self._connection = connection

    def _instant(self, started_at: str) -> datetime:
        return run_started(started_at)

    def _gpu_windows(self, since: str) -> Iterator[GpuWindow]:
        start = self._instant(since)
        for uuid, runs, first, last, incidents, starts, nodes, serials in self._rows(
            GPU_WINDOWS_LATERAL, (start,) * 6
        ):
            yield (
                str(uuid),
                int(runs),
                float(first),
                float(last),
                int(incidents),
                list(zip(starts or [], nodes or [], serials or [], strict=True)),
            )

    @staticmethod
    def _seconds(instant: Any) -> float:
        return float(instant.timestamp())

    @classmethod
    @contextmanager
    def connect(cls, location: PgLocation, *, create: bool = True) -> Iterator[PgHistory]:
        psycopg = _psycopg()
        options: dict[str, Any] = {"application_name": "gpuaccept", "autocommit": True}
        if "connect_timeout" not in location.uri and not os.environ.get("PGCONNECT_TIMEOUT"):
            # libpq waits for ever by default: a run must not hang on a history
            options["connect_timeout"] = CONNECT_TIMEOUT_SECONDS
        try:
            connection = psycopg.connect(location.uri, **options)
        except psycopg.OperationalError as error:
            raise HistoryUnreachable(
                f"history {location}: cannot reach it ({_first_line(error)})"
            ) from None
        except psycopg.Error as error:
            raise HistoryError(f"history {location}: {_first_line(error)}") from None
        history = cls(location, connection)
        try:
            history._bound_waits()
            history._prepare(create)
            yield history
        except (psycopg.errors.LockNotAvailable, psycopg.errors.QueryCanceled) as error:
            why = (
                "another session holds what it waited for: a writer stopped half-way, or "
                "maintenance of the tables"
                if isinstance(error, psycopg.errors.LockNotAvailable)
                else "waiting on another session, or a server too busy to answer in time"
            )
            raise HistoryUnreachable(
                f"history {location}: {_first_line(error)} ({why}); nothing more was written"
            ) from None
        except (psycopg.OperationalError, psycopg.errors.IdleInTransactionSessionTimeout) as error:
            # the server went away (or refused a statement for its own reasons) mid-way
            raise HistoryUnreachable(
                f"history {location}: {_first_line(error)}; nothing more was written"
            ) from None
        except psycopg.Error as error:
            raise HistoryError(
                f"history {location}: {_first_line(error)}; nothing was written"
            ) from None
        finally:
            connection.close()

    def _bound_waits(self) -> None:
        """SESSION_BOUNDS, each where nobody has set it (pg_settings says 'default')."""
        unset = [
            str(name)
            for (name,) in self._connection.execute(
                "SELECT name FROM pg_settings WHERE name = ANY(%s) AND source = 'default'",
                (list(SESSION_BOUNDS),),
            ).fetchall()
        ]
        for name in unset:
            self._connection.execute(
                "SELECT set_config(%s, %s, false)", (name, SESSION_BOUNDS[name])
            )

    # -- schema -----------------------------------------------------------------------------

    def _schema_version(self) -> int | None:
        """Our schema's version; None in a database without our tables; refuses one holding
        another application's `runs` table."""
        ours, runs = self._connection.execute(
            "SELECT to_regclass(%s) IS NOT NULL, to_regclass('runs') IS NOT NULL", (_META,)
        ).fetchone() or (False, False)
        if not ours:
            if runs:
                raise HistoryError(
                    f"history {self.location}: a database whose 'runs' table is not a gpuaccept "
                    "history's; refusing to write to it"
                )
            return None
        rows = dict(self._connection.execute(f"SELECT key, value FROM {_META}").fetchall())
        version = rows.get("schema_version", "")
        if rows.get("application") != "gpuaccept" or not version.isdigit():
            raise HistoryError(
                f"history {self.location}: its {_META} table is not gpuaccept's (application "
                f"{rows.get('application')!r}, version {version!r}); left untouched"
            )
        return int(version)

    def _prepare(self, create: bool) -> None:
        version = self._schema_version()
        if version is not None and version > SCHEMA_VERSION:
            raise HistoryError(
                f"history {self.location}: written by a newer gpuaccept (schema {version}, "
                f"this one reads {SCHEMA_VERSION}); upgrade gpuaccept"
            )
        if version == SCHEMA_VERSION:
            return
        if version is None and not create:
            raise HistoryError(f"history {self.location}: empty database (nothing recorded yet)")
        if version is not None:
            from gpuaccept.store.base import say_upgrade

            runs = self._connection.execute("SELECT count(*) FROM runs").fetchone()
            say_upgrade(str(self.location), version, int(runs[0]) if runs else 0)
        psycopg = _psycopg()
        # A session lock taken before the transaction, not a transaction lock inside it: a
        # transaction that began before another writer created the tables may still read the
        # catalog as it was (seen here: 24 writers at once, "relation already exists").
        self._connection.execute("SELECT pg_advisory_lock(%s)", (_SCHEMA_LOCK,))
        try:
            with self._connection.transaction():
                # an upgrade rewrites every run's rows: at a fleet's size it may take longer
                # than any one read should (its lock waits stay bounded)
                self._connection.execute("SET LOCAL statement_timeout = 0")
                self._migrate(self._schema_version() or 0)  # as found under the lock
        except psycopg.errors.InsufficientPrivilege as error:
            raise HistoryError(
                f"history {self.location}: cannot "
                f"{'create' if version is None else 'upgrade'} its tables "
                f"({_first_line(error)}); ask the database's owner to run gpuaccept once"
            ) from None
        finally:
            with contextlib.suppress(psycopg.Error):  # a lost connection has released it
                self._connection.execute("SELECT pg_advisory_unlock(%s)", (_SCHEMA_LOCK,))

    def _migrate(self, version: int) -> None:
        for target in sorted(MIGRATIONS):
            if target <= version:
                continue
            for statement in MIGRATIONS[target]:
                self._connection.execute(statement)
            if target == 4 and version >= 3:
                # runs stored under schema 3: the GPUs each failed accept named, as its plan
                # says (its stored actions, or those its checks give); no run when created new
                failed = self._connection.execute(
                    "SELECT id, report_json FROM runs WHERE passed = 0 AND command = 'accept'"
                ).fetchall()
                from gpuaccept.actions import out_of_service_uuids

                for run_id, text in failed:
                    named = out_of_service_uuids(self._parsed_report(int(run_id), text))
                    self._connection.execute(
                        "UPDATE runs SET remediated = %s WHERE id = %s",
                        (json.dumps(named), run_id),
                    )
            if target == 6:
                with self._connection.cursor() as cursor:
                    self._fill_fleet_figures(cursor)
                self._connection.execute(
                    "CREATE TEMP TABLE upgrade_runs (id BIGINT PRIMARY KEY, action TEXT NOT NULL) "
                    "ON COMMIT DROP"
                )
                failed = self._connection.execute(
                    "SELECT id, report_json FROM runs WHERE passed = 0 AND command = 'accept'"
                ).fetchall()
                with self._connection.cursor() as cursor:
                    cursor.executemany(
                        "INSERT INTO upgrade_runs (id, action) VALUES (%s, %s)",
                        [(run_id, self._action(int(run_id), 0, text)) for run_id, text in failed],
                    )
                for statement in _V6_TIMELINES:
                    self._connection.execute(statement)
            if target == 8 and version >= 3:
                with self._connection.cursor() as cursor:
                    self._v8_whys(cursor, _V8_UNPLANNED, "%s")
            self._connection.execute(
                f"UPDATE {_META} SET value = %s WHERE key = 'schema_version'", (str(target),)
            )

    # -- writing ----------------------------------------------------------------------------

    def check_writable(self) -> None:
        privileges = " AND ".join(
            f"has_table_privilege('{table}', '{privilege}')"
            for table, privilege in _APPEND_PRIVILEGES
        )
        row = self._connection.execute(
            "SELECT pg_is_in_recovery(), current_setting('transaction_read_only'), "
            f"{privileges} AND "
            "has_sequence_privilege(pg_get_serial_sequence('runs', 'id'), 'USAGE')"
        ).fetchone()
        standby, read_only, may_insert = row or (True, "on", False)
        why = (
            "a standby server (read-only)"
            if standby
            else "a read-only session"
            if read_only == "on"
            else "this role may not insert runs"
            if not may_insert
            else None
        )
        if why is not None:
            raise HistoryError(
                f"history {self.location}: cannot be written ({why}); pass another --history "
                "or --no-history"
            )

    def append(self, reports: Sequence[tuple[RunReport, str]]) -> list[tuple[int, bool]]:
        recorded_at = datetime.now(UTC).isoformat()
        marks = ", ".join(["%s"] * (len(RUN_INSERT_COLUMNS.split(", ")) + 2))
        digests = [report_sha256(report) for report, _ in reports]
        stored: list[tuple[int, bool]] = [(0, False)] * len(reports)
        # what the fleet's tables keep of each run this append stores, by its place in `reports`
        new: dict[int, FleetUpdate] = {}
        with self._connection.transaction(), self._connection.cursor() as cursor:
            # In the digests' order, not the reports': a writer that meets a run another
            # uncommitted append inserted waits for that append (the UNIQUE digest). Two appends
            # sharing runs in opposite orders would each wait on a run the other holds, and the
            # server ends one as a deadlock (seen in CI: 24 writers with shared runs,
            # tests/store/test_spool.py). In one order, the append holding the smaller digest
            # never waits on the other. The ids are drawn first, in the reports' order, so a
            # run's id orders it among runs of the same start as SQLite's does; the fleet's
            # tables below are kept in the reports' order too. (A run found stored leaves its
            # drawn id unused, as ON CONFLICT leaves a serial's.)
            ids = sorted(
                int(row[0])
                for row in cursor.execute(
                    "SELECT nextval(pg_get_serial_sequence('runs', 'id')) "
                    "FROM generate_series(1, %s)",
                    (len(reports),),
                ).fetchall()
            )
            for place in sorted(range(len(reports)), key=digests.__getitem__):
                report, source = reports[place]
                digest = digests[place]
                cursor.execute(
                    f"INSERT INTO runs (id, {RUN_INSERT_COLUMNS}, started_time) VALUES ({marks}) "
                    "ON CONFLICT (report_sha256) DO NOTHING RETURNING id",
                    (
                        ids[place],
                        *run_values(report, digest, recorded_at, source),
                        run_started(report.started_at),
                    ),
                )
                inserted = cursor.fetchone()
                if inserted is None:
                    # stored before, or by another writer that committed while this one waited
                    cursor.execute("SELECT id FROM runs WHERE report_sha256 = %s", (digest,))
                    existing = cursor.fetchone()
                    if existing is None:  # pragma: no cover - UNIQUE guarantees one
                        raise HistoryError(f"history {self.location}: run {digest} vanished")
                    stored[place] = (int(existing[0]), False)
                    continue
                run_id = int(inserted[0])
                measurements = measurement_rows(report, run_id)
                for table, columns, rows in (
                    ("measurements", MEASUREMENT_COLUMNS, measurements),
                    ("run_gpus", RUN_GPU_COLUMNS, run_gpu_rows(report, run_id)),
                ):
                    if rows:
                        with cursor.copy(f"COPY {table} ({columns}) FROM STDIN") as copy:
                            for values in rows:
                                copy.write_row(values)
                new[place] = self._fleet_update(report, run_id, measurements)
                stored[place] = (run_id, True)
            if new:
                # The fleet's tables (latest_runs' displaced run, each GPU's newest figure, a
                # timeline's links) are read and rewritten by each append: appends take turns
                # at them, as SQLite's BEGIN IMMEDIATE makes them. After every run of this
                # append is in: a writer holding the lock then waits on no row another writer
                # holds (the fleet's rows of an uncommitted append are not written yet), so no
                # two wait on each other.
                cursor.execute("SELECT pg_advisory_xact_lock(%s)", (_APPEND_LOCK,))
                for place in sorted(new):
                    self._keep_fleet_tables(cursor, new[place])
        return stored

    # -- reading ----------------------------------------------------------------------------

    def gpu_runs(self, uuid: str, limit: int = 200) -> list[tuple[RunRow, int | None, str | None]]:
        rows = self._connection.execute(
            f"SELECT {_RUN_COLUMNS}, run_gpus.gpu_index, run_gpus.serial FROM run_gpus "
            "JOIN runs ON runs.id = run_gpus.run_id WHERE run_gpus.uuid = %s "
            "ORDER BY runs.started_time DESC, runs.id DESC LIMIT %s",
            (uuid, limit),
        ).fetchall()
        return [(self._run_row(row[:10]), row[10], row[11]) for row in rows]

    def newest_start(self) -> str | None:
        row = self._connection.execute(
            "SELECT r.started_at FROM latest_runs l JOIN runs r ON r.id = l.run_id "
            "ORDER BY l.started DESC, l.run_id DESC LIMIT 1"
        ).fetchone()
        return None if row is None else str(row[0])

    def passed_runs(self, run_ids: Sequence[int]) -> set[int]:
        rows = self._connection.execute(
            "SELECT id FROM runs WHERE id = ANY(%s) AND passed = 1", (sorted(set(run_ids)),)
        ).fetchall()
        return {int(row[0]) for row in rows}

    def slower_checks(self, run_ids: Sequence[int]) -> dict[int, CheckResult]:
        rows = self._connection.execute(
            "SELECT id, slower_json FROM runs WHERE id = ANY(%s) AND slower_json IS NOT NULL",
            (list(run_ids),),
        ).fetchall()
        return self._slower(rows)

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
        conditions, parameters = _filters(
            node=node, command=command, level=level, device_mode=device_mode, mark="%s"
        )
        if passed_only:
            conditions.append("passed = 1")
        if started_by is not None:
            conditions.append("started_time <= to_timestamp(%s)")
            parameters.append(started_by)
        if started_since is not None:
            conditions.append("started_time >= to_timestamp(%s)")
            parameters.append(started_since)
        where = f" WHERE {' AND '.join(conditions)}" if conditions else ""
        order = "ASC" if oldest_first else "DESC"
        sql = f"SELECT {_RUN_COLUMNS} FROM runs{where} ORDER BY started_time {order}, id {order}"
        if limit is not None:
            sql += " LIMIT %s"
            parameters.append(limit)
        rows = self._connection.execute(sql, parameters).fetchall()
        return [self._run_row(row) for row in rows]

    def newest_runs(self, command: str) -> list[RunRow]:
        rows = self._connection.execute(
            f"SELECT {_RUN_COLUMNS} FROM runs WHERE id IN (SELECT DISTINCT ON (node) run_id "
            "FROM latest_runs WHERE command = %s ORDER BY node, started DESC, run_id DESC) "
            "ORDER BY hostname NULLS FIRST",
            (command,),
        ).fetchall()
        return [self._run_row(row) for row in rows]

    def report(self, run_id: int) -> RunReport:
        if not -(2**63) <= run_id < 2**63:
            raise HistoryError(f"history {self.location}: no run {run_id}")
        row = self._connection.execute(
            "SELECT report_json FROM runs WHERE id = %s", (run_id,)
        ).fetchone()
        if row is None:
            raise HistoryError(
                f"history {self.location}: no run {run_id} (see `gpuaccept history list`)"
            )
        return self._parsed_report(run_id, row[0])

    def count(self) -> int:
        row = self._connection.execute("SELECT count(*) FROM runs").fetchone()
        return int(row[0]) if row else 0

    def points(
        self,
        metric: str | None = None,
        *,
        node: str | None = None,
        command: str | None = None,
        level: str | None = None,
        latest_only: bool = False,
    ) -> list[MetricPoint]:
        conditions, parameters = _filters(node=node, command=command, level=level, mark="%s")
        if metric is not None:
            check, _, name = metric.rpartition("/")
            conditions.append("m.name = %s")
            parameters.append(name)
            if check:
                conditions.append("m.check_name = %s")
                parameters.append(check)
        where = f" WHERE {' AND '.join(conditions)}" if conditions else ""
        ranked = (
            "SELECT r.id, r.started_at, r.hostname, m.check_name, m.name, m.value, m.unit, "
            "m.device_index, m.device_name, m.gpu_uuid, r.started_time, ROW_NUMBER() OVER "
            "(PARTITION BY m.check_name, m.name, coalesce(m.gpu_uuid, coalesce(r.hostname, '') "
            "|| '#' || coalesce(m.device_index::text, 'node')) "
            "ORDER BY r.started_time DESC, r.id DESC) AS newest "
            f"FROM measurements m JOIN runs r ON r.id = m.run_id{where}"
        )
        sql = f"SELECT * FROM ({ranked}) AS ranked"
        if latest_only:
            sql += " WHERE newest = 1"
        sql += " ORDER BY started_time, id, device_index NULLS FIRST"
        return [_point(row) for row in self._connection.execute(sql, parameters).fetchall()]
