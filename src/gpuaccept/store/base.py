"""What both history stores share (issue #51 §2): the interface the comparisons and commands
read (`History`, with the fleet's queries both answer by the same statements), the rows it
returns, where a history is (`HistoryLocation`), its errors, and a run's rows as both store
them. The SQLite store (store/history.py) and the PostgreSQL one (store/history_pg.py) import
this module and not each other; store/history.py, above both, picks one for a location.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import os
import re
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, NamedTuple
from urllib.parse import parse_qsl, urlsplit

from gpuaccept.errors import InputError
from gpuaccept.record.identity import node_name_of
from gpuaccept.store.fleet_tables import (
    FIGURE_BINS,
    FIGURE_GROUPS,
    FIGURE_RANGE,
    FIGURE_UNITS,
    FIGURES_BEYOND,
    GPU_INCIDENTS,
    GPU_STRETCHES,
    MIDDLE_VALUES,
    NEWEST_ACCEPT_ACTIONS,
    NEWEST_FIGURES,
    NODE_CHANGES,
    NODE_INCIDENTS,
    STACK_NODES,
    STACK_RUNS,
    Cursor,
    FleetUpdate,
    failed_plan,
    figure_rows,
    keep_fleet_figures,
    keep_latest,
    keep_timelines,
    previous_latest,
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


class NodeChange(NamedTuple):
    """A node whose newest accept started after an instant: that run, and the node's newest
    accept at or before the instant (None: it had none)."""

    node: str
    run_id: int
    passed: bool
    slower: bool  # its own history check found the node slower than before
    then_run: int | None
    then_passed: bool | None
    then_slower: bool | None


class StackUse(NamedTuple):
    """A stack's accept runs in a window (History.stack_use)."""

    stack: str
    judged: int  # runs that judged the node's GPUs (passed or failed on them)
    passed: int
    nodes_now: int  # nodes whose newest accept ran it
    first: float  # its first and last run in the window, seconds since the epoch
    last: float


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
# 8: node_timeline keeps each accept's stack and, for a failed one, why its action (issue #53
# §2: the fleet's first screen, what to act on and the stacks' pass rates, read from it)
SCHEMA_VERSION = 8


def say_upgrade(where: str, found: int, runs: int) -> None:
    """Say an upgrade before it starts: it rewrites every stored accept's rows, so at a fleet's
    size a command pauses for it (300,000 runs: 7 to 25 s on SQLite, about 2 minutes on
    PostgreSQL, docs/results/2026-11-29-fleet-first-screen.md). A warning of gpuaccept's logger:
    on stderr as one line unless the caller's logging sends it elsewhere."""
    logging.getLogger("gpuaccept.store").warning(
        "history %s: upgrading it from schema %d to %d, once (%s stored run(s); at 300,000 this "
        "took 7 to 25 s on SQLite, about 2 minutes on PostgreSQL)",
        where,
        found,
        SCHEMA_VERSION,
        f"{runs:,}",
    )


class HistoryError(InputError):
    """The history database cannot be used as asked (exit 2)."""


class HistoryUnreachable(HistoryError):
    """The history's server cannot be reached now (down, refused, timed out, TLS refused): a
    run keeps its report in the spool instead (`gpuaccept history push` delivers it later)."""


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


# (location, create) -> the open history, as a context manager (History.open)
Opener = Callable[["HistoryLocation | str", bool], AbstractContextManager["History"]]


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
    from gpuaccept.actions import out_of_service_uuids
    from gpuaccept.results import stored_drop, verdict_fitness

    plan = failed_plan(report) if report.command == "accept" else None
    named = out_of_service_uuids(report) if plan is not None else []
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


class History(ABC):
    """An open history: the embedded SQLite file (one node, the default) or a PostgreSQL
    database (a fleet's one store, issue #33 §2). Open either with `History.open(location)` as
    a context manager; both keep the same schema and answer the same queries."""

    location: HistoryLocation
    # a GPU's runs in a window (store/fleet_tables.py): PostgreSQL has its own forms
    _gpu_incidents = GPU_INCIDENTS
    _gpu_stretches = GPU_STRETCHES
    _node_changes = NODE_CHANGES  # what changed since an instant: PostgreSQL has its own form

    @property
    def path(self) -> HistoryLocation:
        """Where the history is, as messages name it (a PostgreSQL URL has no password)."""
        return self.location

    # Opens the history at a location in the store that keeps it: set by gpuaccept.store.history,
    # the module above both stores that picks one (this class, below them, names neither)
    _opener: ClassVar[Opener | None] = None

    @classmethod
    @contextmanager
    def open(cls, location: HistoryLocation | str, *, create: bool = True) -> Iterator[History]:
        """Open (and, when `create`, initialise) the history at `location`; refuse foreign
        databases and files. A PostgreSQL server that cannot be reached raises
        `HistoryUnreachable` (a run keeps its report in the spool). The store is picked by
        `gpuaccept.store.history.open_history`."""
        if History._opener is None:  # only where History was imported from here, not there
            raise RuntimeError("import History from gpuaccept.store.history: it picks the store")
        with History._opener(location, create) as history:
            yield history

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
                f"history {self.path}: run {run_id}'s stored verdict is damaged "
                f"({_first_line(error)}); restore the database from a copy"
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
        return {run_id: action for run_id, (action, _) in self.newest_accept_plans().items()}

    def newest_accept_plans(self) -> dict[int, tuple[str, str]]:
        """(recommended action, why in one line) of each node's newest accept run that did not
        pass, by run id (why: '' where the plan names no finding for it)."""
        return {
            int(run_id): (str(action), str(why or ""))
            for run_id, action, why in self._rows(NEWEST_ACCEPT_ACTIONS)
        }

    def node_changes(self, since: str) -> list[NodeChange]:
        """The nodes whose newest accept started after `since`, with their newest accept at or
        before it: read by one statement, a seek per such node."""
        start = self._instant(since)
        return [
            NodeChange(
                str(node),
                int(run_id),
                bool(passed),
                bool(slower),
                None if then_run is None else int(then_run),
                None if then_passed is None else bool(then_passed),
                None if then_slower is None else bool(then_slower),
            )
            for node, run_id, passed, slower, then_run, then_passed, then_slower in self._rows(
                self._node_changes, (start, start)
            )
        ]

    def stack_use(self, since: str) -> list[StackUse]:
        """Each stack's accept runs from the UTC day of `since` on (whole days), and the nodes
        whose newest accept ran it, first seen first: counted in the database."""
        now = {str(stack): int(count) for stack, count in self._rows(STACK_NODES)}
        found = [
            StackUse(
                str(stack),
                int(judged),
                int(passed),
                now.pop(str(stack), 0),
                self._seconds(first),
                self._seconds(last),
            )
            for stack, judged, passed, first, last in self._rows(
                STACK_RUNS, (int(run_started(since).timestamp() // 86400),)
            )
        ]
        return sorted(found, key=lambda s: (s.first, s.stack))

    # the store's floor of a figure's bin, (value - low) / span * bins (FIGURE_BINS)
    _bin: str

    def figure_bins(
        self, model: str, metric: str, unit: str, bins: int
    ) -> tuple[float, float, list[int]] | None:
        """A model's newest figures of a metric in `unit`: (least, greatest, how many in each of
        `bins` equal bins between them; no bins when the least is the greatest), counted by the
        database; None when there are none."""
        check, _, name = metric.rpartition("/")
        group = (model, check, name, unit)
        ((low, high),) = self._rows(FIGURE_RANGE, group)
        if low is None:
            return None
        low, high = float(low), float(high)
        counts = [0] * bins
        if high == low:  # no spread: nothing to bin (the caller knows how many)
            return low, high, []
        span = high - low
        sql = FIGURE_BINS.format(bin=self._bin, m="{m}")
        for index, count in self._rows(sql, (low, span, bins, *group)):
            counts[min(bins - 1, int(index))] += int(count)
        return low, high, counts

    def _fleet_update(
        self, report: RunReport, run_id: int, measurements: Sequence[Any]
    ) -> FleetUpdate:
        """What the fleet's tables keep of a stored run: small beside the report, so an append
        of many runs holds these, not the reports, until it writes them."""
        started = self._instant(report.started_at)
        timeline = None
        if report.command == "accept":
            from gpuaccept.results import verdict_fitness

            day = int(run_started(report.started_at).timestamp() // 86400)
            timeline = timeline_run(report, run_id, started, verdict_fitness(report.verdict), day)
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
            keep_timelines(db, self._mark, update.timeline, stack_day=self._stack_day_inline)

    # whether keep_timelines adds a run to its stack's day (else the append, keep_stack_days)
    _stack_day_inline = False

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

    def _v8_whys(self, db: Cursor, unplanned: str, m: str) -> None:
        """Schema 8's `why` of the failed accepts whose stored report holds no plan (stored
        before plans were): planned from their checks, as an append plans them."""
        from gpuaccept.store.fleet_tables import plan_why

        rows = db.execute(unplanned, ()).fetchall()
        updates = []
        for node, started, run_id, text in rows:
            plan = failed_plan(self._parsed_report(int(run_id), text))
            if plan is not None and (why := plan_why(plan)):
                updates.append((why, node, started, run_id))
        if updates:
            db.executemany(
                f"UPDATE node_timeline SET why = {m} WHERE node = {m} AND started = {m} AND "
                f"run_id = {m}",
                updates,
            )

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


def _point(row: Sequence[Any]) -> MetricPoint:
    """A MetricPoint from a figure's run id, start, host, check, name, value, unit, device,
    model and UUID, in that order (`points`, and fleet_tables' readers)."""
    return MetricPoint(int(row[0]), *row[1:10])


def _first_line(error: Exception) -> str:
    """What is wrong, in one line: pydantic's first fault with where it is (its own text is a
    count of errors, then one per line, then a URL), or any other error's first line."""
    from pydantic import ValidationError

    if isinstance(error, ValidationError) and error.errors():
        from gpuaccept.input_files import first_validation_error

        return first_validation_error(error)
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
