"""What `history fleet` reads, kept by every append in both stores (schema 6, issue #33 §2: the
fleet's view counted by the database, bounded by the fleet; benchmarks/history_scale.py measures
it, docs/results/2026-11-26-history-scale-session7.md).

- `fleet_figures`: the figures of each node's newest run of each kind (the runs latest_runs
  names), each marked `newest` when it is its GPU's newest figure of its metric among them (a
  GPU by its UUID wherever it ran, a figure without one per node and device: `gpu_key`). The
  medians come from an index on the newest figures' values, a few seeks per GPU model and
  metric; only the figures beyond a median's bounds are read.
- `node_timeline`: every accept run of each node in start order, with whether the node's judged
  run before it failed and when that run started. An incident starts at a failed run whose
  previous judged run passed, or lies before the window, or does not exist
  (`act.offenders.incidents`): counted by one aggregate over the window, no run passed through
  Python.
- `gpu_timeline`: the same for each GPU across hosts, failed for the GPU when the run named it
  for a remediation (`act.offenders.gpu_mtbi`).

Both stores run the statements here (SQLite's `?`, psycopg's `%s` as `{m}`); a store's start is
its own instant type (seconds since the epoch in SQLite, a timestamptz in PostgreSQL).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from gpuaccept.record.identity import node_name_of

if TYPE_CHECKING:
    # annotations only: `history list` and `history gpu` never build a report, and the report
    # models' import is a fifth of their start-up (benchmarks/history_scale.py)
    from gpuaccept.actions import ActionPlan
    from gpuaccept.results import RunReport


class Cursor(Protocol):
    """What both drivers give: an sqlite3 connection, a psycopg cursor (whose executemany is one
    round trip to the server, in a pipeline)."""

    def execute(self, sql: str, parameters: Sequence[Any], /) -> Any: ...

    def executemany(self, sql: str, parameters: Iterable[Sequence[Any]], /) -> Any: ...


JUDGED = ("pass", "fail")

# {id}, {instant}, {real}, {int}, {without_rowid}: the store's column types
TABLES = (
    """CREATE TABLE IF NOT EXISTS fleet_figures (
        run_id {id} NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
        ordinal INTEGER NOT NULL,
        started {instant} NOT NULL,
        started_at TEXT NOT NULL,
        hostname TEXT,
        check_name TEXT NOT NULL,
        name TEXT NOT NULL,
        value {real} NOT NULL,
        unit TEXT NOT NULL,
        device_index {int},
        device_name TEXT,
        gpu_uuid TEXT,
        gpu_key TEXT NOT NULL,
        model TEXT NOT NULL,
        newest INTEGER NOT NULL DEFAULT 0,
        PRIMARY KEY (run_id, ordinal)
    ){without_rowid}""",
    "CREATE INDEX IF NOT EXISTS fleet_figures_by_key ON fleet_figures "
    "(check_name, name, gpu_key, started, run_id, ordinal)",
    # the newest figures alone, in value order within each model and metric: a median is a
    # seek to the middle, the figures beyond its bounds two ranges. `newest` is in it, not only
    # in its WHERE, so SQLite answers from the index alone (without: the groups' count read
    # 160,000 table rows, 0.31 s against 0.06 s, benchmarks/history_scale.py)
    "CREATE INDEX IF NOT EXISTS fleet_figures_newest ON fleet_figures "
    "(model, check_name, name, value, unit, newest) WHERE newest = 1",
    """CREATE TABLE IF NOT EXISTS node_timeline (
        node TEXT NOT NULL,
        started {instant} NOT NULL,
        run_id {id} NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
        fitness TEXT NOT NULL,
        action TEXT NOT NULL,
        prev_failed INTEGER,
        prev_started {instant},
        stack TEXT NOT NULL DEFAULT '',
        why TEXT NOT NULL DEFAULT '',
        passed INTEGER NOT NULL DEFAULT 0,
        slower INTEGER NOT NULL DEFAULT 0,
        PRIMARY KEY (node, started, run_id)
    ){without_rowid}""",
    """CREATE TABLE IF NOT EXISTS gpu_timeline (
        uuid TEXT NOT NULL,
        started {instant} NOT NULL,
        run_id {id} NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
        node TEXT NOT NULL,
        serial TEXT,
        named INTEGER NOT NULL,
        prev_named INTEGER,
        prev_started {instant},
        prev_node TEXT,
        prev_serial TEXT,
        PRIMARY KEY (uuid, started, run_id)
    ){without_rowid}""",
    "CREATE INDEX IF NOT EXISTS gpu_timeline_named ON gpu_timeline (started, uuid) WHERE named = 1",
    # schema 8: each stack's accept runs by UTC day (days since the epoch), kept by every append,
    # so the stacks' pass rates are a read of a few rows a day, not of the window's runs
    """CREATE TABLE IF NOT EXISTS stack_days (
        stack TEXT NOT NULL,
        day {int} NOT NULL,
        judged {int} NOT NULL,
        passed {int} NOT NULL,
        first {instant} NOT NULL,
        last {instant} NOT NULL,
        PRIMARY KEY (stack, day)
    ){without_rowid}""",
)

SQLITE_TYPES = {
    "id": "INTEGER",
    "instant": "REAL",
    "real": "REAL",
    "int": "INTEGER",
    "without_rowid": " WITHOUT ROWID",
}
PG_TYPES = {
    "id": "BIGINT",
    "instant": "TIMESTAMPTZ",
    "real": "DOUBLE PRECISION",
    "int": "BIGINT",
    "without_rowid": "",
}


def tables(types: dict[str, str]) -> tuple[str, ...]:
    """The statements that create schema 6's tables in a store with these column types."""
    return tuple(statement.format(**types) for statement in TABLES)


FIGURE_ROW_COLUMNS = (
    "run_id, ordinal, started, started_at, hostname, check_name, name, value, unit, "
    "device_index, device_name, gpu_uuid, gpu_key, model"
)
_LATEST_RUN = "SELECT run_id FROM latest_runs WHERE node = {m} AND command = {m} AND level = {m}"
# A run becomes its kind's latest on its node only when it started later (or as late, and was
# stored later): an older run imported or pushed from a spool after a newer one changes nothing.
# `started` is seconds since the epoch here, a timestamptz in PostgreSQL.
LATEST_UPSERT = (
    "INSERT INTO latest_runs (node, command, level, started, run_id) "
    "VALUES ({m}, {m}, {m}, {m}, {m}) ON CONFLICT (node, command, level) DO UPDATE "
    "SET started = excluded.started, run_id = excluded.run_id "
    "WHERE (excluded.started, excluded.run_id) > (latest_runs.started, latest_runs.run_id)"
)
# the same, saying whether the run became its kind's newest on its node (a row back)
LATEST_UPSERT_RETURNING = LATEST_UPSERT + " RETURNING run_id"
# every figure of one metric and GPU gets newest = 1 when it is the newest of them (the latest
# start, then the later run, then the later of a run's own figures), else 0
_RENEW_NEWEST = (
    "UPDATE fleet_figures SET newest = CASE WHEN (run_id, ordinal) = (SELECT f.run_id, "
    "f.ordinal FROM fleet_figures f WHERE f.check_name = {m} AND f.name = {m} AND "
    "f.gpu_key = {m} ORDER BY f.started DESC, f.run_id DESC, f.ordinal DESC LIMIT 1) THEN 1 "
    "ELSE 0 END WHERE check_name = {m} AND name = {m} AND gpu_key = {m}"
)


def gpu_key(uuid: str | None, hostname: str | None, device_index: int | None) -> str:
    """Whose figure it is: a GPU by its UUID wherever it ran; a figure without one (the CPU
    twins, a capture without UUIDs, a node's own) by node and device."""
    if uuid is not None:
        return f"gpu:{uuid}"
    return f"node:{hostname or ''}#{'node' if device_index is None else device_index}"


def figure_rows(
    measurements: Iterable[Sequence[Any]], started: Any, started_at: str, hostname: str | None
) -> list[tuple[Any, ...]]:
    """fleet_figures rows (FIGURE_ROW_COLUMNS) of one run from its measurement rows
    (history.MEASUREMENT_COLUMNS: run id, check, name, value, unit, device, model, UUID, ...), in
    the order the run holds them."""
    return [
        (
            run_id,
            ordinal,
            started,
            started_at,
            hostname,
            check,
            name,
            value,
            unit,
            device,
            model,
            uuid,
            gpu_key(uuid, hostname, device),
            model or "cpu",
        )
        for ordinal, (run_id, check, name, value, unit, device, model, uuid, *_) in enumerate(
            measurements
        )
    ]


def keep_latest(db: Cursor, m: str, key: tuple[str, str, str], started: Any, run_id: int) -> bool:
    """Make the run its kind's newest on its node when it started later (LATEST_UPSERT's rule);
    whether it became that."""
    return (
        db.execute(LATEST_UPSERT_RETURNING.format(m=m), (*key, started, run_id)).fetchone()
        is not None
    )


def keep_fleet_figures(
    db: Cursor, m: str, run_id: int, rows: Sequence[tuple[Any, ...]], previous: int | None
) -> None:
    """For a run that just became its kind's newest on its node: its figures replace those of
    the run it displaced (`previous`, read before), and every metric and GPU either touches is
    given its newest figure again."""
    keys = {(row[5], row[6], row[12]) for row in rows}
    if previous is not None and previous != run_id:
        keys |= {
            (check, name, key)
            for check, name, key in db.execute(
                f"DELETE FROM fleet_figures WHERE run_id = {m} RETURNING check_name, name, gpu_key",
                (previous,),
            ).fetchall()
        }
    marks = ", ".join([m] * len(FIGURE_ROW_COLUMNS.split(", ")))
    db.executemany(f"INSERT INTO fleet_figures ({FIGURE_ROW_COLUMNS}) VALUES ({marks})", rows)
    db.executemany(_RENEW_NEWEST.format(m=m), [(*key, *key) for key in sorted(keys)])


def previous_latest(db: Cursor, m: str, latest_key: tuple[str, str, str]) -> int | None:
    """The run latest_runs names for this node and kind before an append changes it."""
    row = db.execute(_LATEST_RUN.format(m=m), latest_key).fetchone()
    return None if row is None else int(row[0])


@dataclass(frozen=True)
class TimelineRun:
    """An accept run as the timelines keep it."""

    run_id: int
    node: str  # '' for a run without a hostname
    started: Any  # the store's instant
    fitness: str  # pass, fail or not-judged (report.node_verdict.verdict_fitness)
    action: str  # the recommended action of a failed run, '' otherwise
    gpus: tuple[tuple[str, str | None, bool], ...]  # (UUID, serial, named for a remediation)
    stack: str = ""  # stack_label of its environment
    why: str = ""  # plan_why of a failed run's plan, '' otherwise
    passed: bool = False  # its verdict passed (a pass in CPU mode too)
    slower: bool = False  # its own history check found the node slower (results.stored_drop)
    day: int = 0  # its start's UTC day, days since the epoch


@dataclass(frozen=True)
class FleetUpdate:
    """What the fleet's tables keep of one stored run (History._fleet_update)."""

    run_id: int
    key: Any  # latest_runs' key of the run (history.latest_key)
    started: Any  # the store's instant
    started_at: str
    hostname: str | None
    measurements: Sequence[Any]  # its measurement rows, in the order the run holds them
    timeline: TimelineRun | None  # accept runs only


def failed_plan(report: RunReport) -> ActionPlan | None:
    """The action plan of a run that did not pass (its recommended action, the GPUs it names for
    a remediation); None for one that passed."""
    from gpuaccept.actions import plan_of

    return None if report.verdict.passed else plan_of(report)


def timeline_run(
    report: RunReport, run_id: int, started: Any, fitness: str, day: int = 0
) -> TimelineRun:
    """What the timelines keep of a stored accept run. A UUID a capture lists twice is one GPU
    there (its least serial)."""
    from gpuaccept.actions import out_of_service_uuids
    from gpuaccept.results import stored_drop

    plan = failed_plan(report)
    named = set(out_of_service_uuids(report)) if plan is not None else set()
    serials: dict[str, str | None] = {}
    for gpu in report.environment.get("gpus") or []:
        if isinstance(gpu, dict) and isinstance(uuid := gpu.get("uuid"), str):
            serial = gpu.get("serial")
            serial = serial if isinstance(serial, str) else None
            held = serials.get(uuid)
            serials[uuid] = min(filter(None, (held, serial)), default=None)
    return TimelineRun(
        run_id,
        node_name_of(report) or "",
        started,
        fitness,
        plan.action.value if plan is not None else "",
        tuple((uuid, serial, uuid in named) for uuid, serial in serials.items()),
        stack_label(report.environment),
        plan_why(plan) if plan is not None else "",
        report.verdict.passed,
        stored_drop(report) is not None,
        day,
    )


def _version(value: object) -> str:
    return "-" if value is None or value == "" else str(value)


def stack_label(environment: dict[str, Any]) -> str:
    """The software a run ran on, as the fleet's stacks table names it: torch (its version
    carries its CUDA build), the CUDA runtime and the driver, the parts of `stack_sha256`
    (record/environment.py) that an upgrade changes fleet-wide. STACK_FROM_JSON is the same
    rule in SQL, for the runs stored before schema 8."""
    torch, cuda = environment.get("torch"), environment.get("cuda")
    torch = torch if isinstance(torch, dict) else {}
    cuda = cuda if isinstance(cuda, dict) else {}
    return (
        f"torch {_version(torch.get('version'))} / CUDA {_version(cuda.get('runtime'))} / "
        f"driver {_version(cuda.get('driver_version'))}"
    )


def plan_why(plan: ActionPlan) -> str:
    """Why a failed run's node takes its action, in one line: the first finding that asks for
    that action, with its check (WHY_FROM_JSON in SQL)."""
    first = next((r for r in plan.recommendations if r.action is plan.action), None)
    return "" if first is None else f"{first.check}: {first.finding}"


# stack_label and plan_why as SQLite computes them from a stored report (the schema-8 upgrade);
# PostgreSQL's forms are in history_pg.py. A version that is not text (a number) is its JSON text
# in both, as str() gives it in Python.
def _sqlite_version(path: str) -> str:
    return f"coalesce(nullif(CAST(json_extract(r.report_json, '{path}') AS TEXT), ''), '-')"


STACK_FROM_JSON_SQLITE = (
    f"'torch ' || {_sqlite_version('$.environment.torch.version')} || ' / CUDA ' || "
    f"{_sqlite_version('$.environment.cuda.runtime')} || ' / driver ' || "
    f"{_sqlite_version('$.environment.cuda.driver_version')}"
)
WHY_FROM_JSON_SQLITE = (
    "coalesce((SELECT json_extract(rec.value, '$.check') || ': ' || json_extract(rec.value, "
    "'$.finding') FROM json_each(r.report_json, '$.actions.recommendations') AS rec WHERE "
    "json_extract(rec.value, '$.action') = t.action ORDER BY rec.key LIMIT 1), '')"
)


# a run added to its stack's day: counted, and the day's first and last start widened to it
STACK_DAY_UPSERT = (
    "INSERT INTO stack_days (stack, day, judged, passed, first, last) VALUES ({m}, {m}, {m}, "
    "{m}, {m}, {m}) ON CONFLICT (stack, day) DO UPDATE SET judged = stack_days.judged + "
    "excluded.judged, passed = stack_days.passed + excluded.passed, first = CASE WHEN "
    "excluded.first < stack_days.first THEN excluded.first ELSE stack_days.first END, last = "
    "CASE WHEN excluded.last > stack_days.last THEN excluded.last ELSE stack_days.last END"
)


def _stack_day_row(run: TimelineRun) -> tuple[Any, ...]:
    """STACK_DAY_UPSERT's values for one run."""
    judged, passed = int(run.fitness in JUDGED), int(run.fitness == "pass")
    return (run.stack, run.day, judged, passed, run.started, run.started)


def keep_stack_days(db: Cursor, m: str, runs: Sequence[TimelineRun]) -> None:
    """Add an append's accept runs to their stacks' days: summed here first, one upsert per
    stack and day."""
    days: dict[tuple[str, int], list[Any]] = {}
    for run in runs:
        judged, passed = int(run.fitness in JUDGED), int(run.fitness == "pass")
        held = days.get((run.stack, run.day))
        if held is None:
            days[(run.stack, run.day)] = [judged, passed, run.started, run.started]
        else:
            held[0] += judged
            held[1] += passed
            held[2] = min(held[2], run.started)
            held[3] = max(held[3], run.started)
    db.executemany(
        STACK_DAY_UPSERT.format(m=m), [(*key, *sums) for key, sums in sorted(days.items())]
    )


def keep_timelines(db: Cursor, m: str, run: TimelineRun, *, stack_day: bool = False) -> None:
    """Add an accept run to its node's and its GPUs' timelines: its link to the judged run
    before it, and the judged run after it (one stored late goes between) linked to it.
    `stack_day`: add it to its stack's day in the same statement (PostgreSQL, whose every
    statement is a round trip: a statement of its own cost a run appended alone 13% more of
    the client's CPU; SQLite sums an append's runs with keep_stack_days instead)."""
    judged = run.fitness in JUDGED
    day = (
        (f"WITH day AS ({STACK_DAY_UPSERT.format(m=m)} RETURNING 1) ", _stack_day_row(run))
        if stack_day
        else ("", ())
    )
    # the predecessor's columns, NULL without one: (SELECT 1) LEFT JOIN the judged run before
    db.execute(
        f"{day[0]}INSERT INTO node_timeline (node, started, run_id, fitness, action, stack, why, "
        "passed, "
        f"slower, prev_failed, prev_started) SELECT {m}, {m}, {m}, {m}, {m}, {m}, {m}, {m}, {m}, "
        "CASE WHEN p.fitness IS NULL THEN NULL "
        "WHEN p.fitness = 'fail' THEN 1 ELSE 0 END, p.started FROM (SELECT 1 AS one) AS one "
        "LEFT JOIN (SELECT fitness, started FROM node_timeline WHERE node = "
        f"{m} AND fitness IN ('pass', 'fail') AND (started, run_id) < ({m}, {m}) ORDER BY "
        f"started DESC, run_id DESC LIMIT 1) AS p ON {m}",
        (
            *day[1],
            *(run.node, run.started, run.run_id, run.fitness, run.action, run.stack, run.why),
            *(int(run.passed), int(run.slower)),
            *(run.node, run.started, run.run_id),
            judged,  # a run that judged nothing is linked to no run
        ),
    )
    if judged:
        db.execute(
            f"UPDATE node_timeline SET prev_failed = {m}, prev_started = {m} WHERE (node, "
            f"started, run_id) = (SELECT node, started, run_id FROM node_timeline WHERE node = "
            f"{m} AND fitness IN ('pass', 'fail') AND (started, run_id) > ({m}, {m}) ORDER BY "
            "started, run_id LIMIT 1)",
            (int(run.fitness == "fail"), run.started, run.node, run.started, run.run_id),
        )
    if not run.gpus:
        return
    db.executemany(
        "INSERT INTO gpu_timeline (uuid, started, run_id, node, serial, named, prev_named, "
        f"prev_started, prev_node, prev_serial) SELECT {m}, {m}, {m}, {m}, {m}, {m}, p.named, "
        "p.started, p.node, p.serial FROM (SELECT 1 AS one) AS one LEFT JOIN (SELECT named, "
        f"started, node, serial FROM gpu_timeline WHERE uuid = {m} AND (started, run_id) < "
        f"({m}, {m}) ORDER BY started DESC, run_id DESC LIMIT 1) AS p ON 1 = 1",
        [
            (uuid, run.started, run.run_id, run.node, serial, int(named), *link)
            for uuid, serial, named in run.gpus
            for link in [(uuid, run.started, run.run_id)]
        ],
    )
    db.executemany(
        f"UPDATE gpu_timeline SET prev_named = {m}, prev_started = {m}, prev_node = {m}, "
        f"prev_serial = {m} WHERE (uuid, started, run_id) = (SELECT uuid, started, run_id FROM "
        f"gpu_timeline WHERE uuid = {m} AND (started, run_id) > ({m}, {m}) ORDER BY started, "
        "run_id LIMIT 1)",
        [
            (int(named), run.started, run.node, serial, uuid, run.started, run.run_id)
            for uuid, serial, named in run.gpus
        ],
    )


# -- reading ------------------------------------------------------------------------------------

# each node's accept runs in the window: how many were judged, its first and last judged run,
# and its incidents (a failed run whose judged predecessor passed, lies before the window, or
# does not exist)
NODE_INCIDENTS = (
    "SELECT node, count(*) FILTER (WHERE fitness IN ('pass', 'fail')), "
    "min(started) FILTER (WHERE fitness IN ('pass', 'fail')), "
    "max(started) FILTER (WHERE fitness IN ('pass', 'fail')), "
    "count(*) FILTER (WHERE fitness = 'fail' AND (prev_failed IS NULL OR prev_failed = 0 "
    "OR prev_started < {m})) FROM node_timeline WHERE started >= {m} GROUP BY node"
)
# the same for each GPU a run in the window named, over its runs in the window on any host
_NAMED_IN_WINDOW = "(SELECT uuid FROM gpu_timeline WHERE named = 1 AND started >= {m})"
GPU_INCIDENTS = (
    "SELECT uuid, count(*), min(started), max(started), count(*) FILTER (WHERE named = 1 AND "
    "(prev_named IS NULL OR prev_named = 0 OR prev_started < {m})) FROM gpu_timeline "
    f"WHERE started >= {{m}} AND uuid IN {_NAMED_IN_WINDOW} GROUP BY uuid"
)
# of those GPUs, the runs that begin a stretch on one host with one serial in the window (the
# first there, or the first after a move or a new serial): where it was, and its serials
GPU_STRETCHES = (
    "SELECT uuid, node, serial, started FROM gpu_timeline WHERE started >= {m} AND "
    f"uuid IN {_NAMED_IN_WINDOW} AND (prev_started IS NULL OR prev_started < {{m}} OR "
    "prev_node != node OR coalesce(prev_serial, '') != coalesce(serial, ''))"
)
# PostgreSQL's form of the two (PgHistory._gpu_windows), one pass: each named GPU's runs read
# from the index of its runs (schema 7, history_pg.py) one GPU at a time, its stretches as arrays
# beside its counts and every start as seconds. Given the statements above, PostgreSQL's planner
# reads the whole window's GPU rows (0.31 s at 2.4 million) whenever it expects many named GPUs;
# a GPU's rows are a few index pages. As two LATERAL statements (schema 7's first form) they
# took 0.26-0.29 s at 10,000 GPUs and handed 20,000 timestamps to Python; as one, 0.18-0.20 s
# (docs/results/2026-11-27-session9.md). SQLite has no LATERAL and needs none: it already reads
# each named GPU's rows by its key.
_NAMED_GPUS = "(SELECT DISTINCT uuid FROM gpu_timeline WHERE named = 1 AND started >= {m}) AS n"
_STRETCH = (
    "prev_started IS NULL OR prev_started < {m} OR prev_node != node OR "
    "coalesce(prev_serial, '') != coalesce(serial, '')"
)
_EPOCH = "extract(epoch FROM {})::float8"
GPU_WINDOWS_LATERAL = (
    f"SELECT n.uuid, w.runs, {_EPOCH.format('w.first')}, {_EPOCH.format('w.last')}, "
    f"w.incidents, w.starts, w.nodes, w.serials FROM {_NAMED_GPUS} CROSS JOIN LATERAL "
    "(SELECT count(*) AS runs, min(started) AS first, max(started) AS last, count(*) FILTER "
    "(WHERE named = 1 AND (prev_named IS NULL OR prev_named = 0 OR prev_started < {m})) AS "
    f"incidents, array_agg({_EPOCH.format('started')}) FILTER (WHERE {_STRETCH}) AS starts, "
    f"array_agg(node) FILTER (WHERE {_STRETCH}) AS nodes, "
    f"array_agg(serial) FILTER (WHERE {_STRETCH}) AS serials "
    "FROM gpu_timeline t WHERE t.uuid = n.uuid AND t.started >= {m}) AS w"
)
# each metric's newest figures by GPU model: how many, and their units (one, but for a metric
# whose unit changed between versions)
FIGURE_GROUPS = (
    "SELECT model, check_name, name, count(*), min(unit), max(unit) FROM fleet_figures "
    "WHERE newest = 1 GROUP BY model, check_name, name"
)
FIGURE_UNITS = (
    "SELECT unit, count(*) FROM fleet_figures WHERE newest = 1 AND model = {m} AND "
    "check_name = {m} AND name = {m} GROUP BY unit"
)
_GROUP = "newest = 1 AND model = {m} AND check_name = {m} AND name = {m}"
# the two middle values of one model's metric (one when their count is odd)
MIDDLE_VALUES = (
    f"SELECT value FROM fleet_figures WHERE {_GROUP} ORDER BY value LIMIT {{m}} OFFSET {{m}}"
)
# the newest figures of one model's metric and unit below a bound and above another (two ranges
# of the index), in the order the fleet's figures are listed (oldest run first, a node's own
# figure before its GPUs')
_BEYOND = (
    "SELECT run_id, started_at, hostname, check_name, name, value, unit, device_index, "
    f"device_name, gpu_uuid, started, ordinal FROM fleet_figures WHERE {_GROUP} AND unit = {{m}} "
)
FIGURES_BEYOND = (
    f"SELECT * FROM ({_BEYOND}AND value < {{m}} UNION ALL {_BEYOND}AND value > {{m}}) AS beyond "
    "ORDER BY started, run_id, device_index NULLS FIRST, ordinal"
)
NEWEST_FIGURES = (
    "SELECT run_id, started_at, hostname, check_name, name, value, unit, device_index, "
    "device_name, gpu_uuid FROM fleet_figures WHERE newest = 1 "
    "ORDER BY started, run_id, device_index NULLS FIRST, ordinal"
)
# the actions of the failing newest accept of each node, and why (schema 8)
NEWEST_ACCEPT_ACTIONS = (
    "SELECT t.run_id, t.action, t.why FROM latest_runs l JOIN node_timeline t ON t.node = "
    "l.node AND t.started = l.started AND t.run_id = l.run_id WHERE l.command = 'accept' AND "
    "t.action != ''"
)

# -- the first screen (issue #53 §2, schema 8) --------------------------------------------------

# each node's newest accept (of any level), as newest_runs picks it: latest_runs' rows ranked
_NEWEST_ACCEPT = (
    "(SELECT node, started, run_id, ROW_NUMBER() OVER (PARTITION BY node ORDER BY started DESC, "
    "run_id DESC) AS k FROM latest_runs WHERE command = 'accept') AS n"
)
# What changed since an instant: of the nodes whose newest accept started after it, that run
# (passed, found the node slower) and the node's newest accept at or before it (the same, NULL
# without one), one index seek per such node into node_timeline's (node, started, run_id); no
# row of `runs` read (SQLite keeps a run's report inline: a column after it is a walk through
# the report's pages)
NODE_CHANGES = (
    "SELECT n.node, n.run_id, t.passed, t.slower, p.run_id, p.passed, p.slower FROM "
    f"{_NEWEST_ACCEPT} JOIN node_timeline t ON t.node = n.node AND t.started = n.started AND "
    "t.run_id = n.run_id LEFT JOIN node_timeline p ON p.node = n.node AND (p.started, "
    "p.run_id) = (SELECT q.started, q.run_id FROM node_timeline q WHERE q.node = n.node AND "
    "q.started <= {m} ORDER BY q.started DESC, q.run_id DESC LIMIT 1) WHERE n.k = 1 AND "
    "n.started > {m}"
)
# PostgreSQL's form: the node's run at or before the instant as a LATERAL subquery, one index
# seek per node. Given NODE_CHANGES, its planner joined each node's 30 timeline rows and ran the
# seek once per row (300,000 seeks and 300,000 heap blocks: 2.5 s at 10,000 nodes, EXPLAIN
# ANALYZE in docs/results/2026-11-29-fleet-first-screen.md); SQLite has no LATERAL and runs the
# subquery once per node as it is.
NODE_CHANGES_LATERAL = (
    "SELECT n.node, n.run_id, t.passed, t.slower, p.run_id, p.passed, p.slower FROM "
    f"{_NEWEST_ACCEPT} JOIN node_timeline t ON t.node = n.node AND t.started = n.started AND "
    "t.run_id = n.run_id LEFT JOIN LATERAL (SELECT q.run_id, q.passed, q.slower FROM "
    "node_timeline q WHERE q.node = n.node AND q.started <= {m} ORDER BY q.started DESC, "
    "q.run_id DESC LIMIT 1) AS p ON TRUE WHERE n.k = 1 AND n.started > {m}"
)
# each stack's accept runs from a UTC day on: judged, passed, first and last start (read from
# the days' sums: at 10,000 nodes, grouping the window's 300,000 runs by stack took 0.09 s of
# CPU, a sort of every run)
STACK_RUNS = (
    "SELECT stack, sum(judged), sum(passed), min(first), max(last) FROM stack_days "
    "WHERE day >= {m} GROUP BY stack"
)
# the same sums from the timeline, for a history stored before schema 8 ({day}: the store's
# UTC day of `started`)
STACK_DAYS_FROM_TIMELINE = (
    "INSERT INTO stack_days (stack, day, judged, passed, first, last) SELECT stack, {day}, "
    "count(*) FILTER (WHERE fitness IN ('pass', 'fail')), count(*) FILTER (WHERE fitness = "
    "'pass'), min(started), max(started) FROM node_timeline GROUP BY stack, {day}"
)
# how many nodes' newest accept ran on each stack
STACK_NODES = (
    f"SELECT t.stack, count(*) FROM {_NEWEST_ACCEPT} JOIN node_timeline t ON t.node = n.node "
    "AND t.started = n.started AND t.run_id = n.run_id WHERE n.k = 1 GROUP BY t.stack"
)
# one model's metric in one unit: its least and greatest newest figure (two index seeks), then
# how many fall in each of `bins` equal bins between them ({bin}: the store's floor of
# (value - low) / span * bins), read from the index of the newest figures' values
FIGURE_RANGE = f"SELECT min(value), max(value) FROM fleet_figures WHERE {_GROUP} AND unit = {{m}}"
FIGURE_BINS = (
    f"SELECT {{bin}} AS bin, count(*) FROM fleet_figures WHERE {_GROUP} AND unit = {{m}} GROUP BY 1"
)
