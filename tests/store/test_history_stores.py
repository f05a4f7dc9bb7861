"""The two stores of the history (issue #33 §2): the embedded SQLite file and a PostgreSQL
database, held to one behaviour. The same runs are stored in both and every query is asked of
both: the answers must be the same, run ids included. The PostgreSQL tests run against a real
server the tests start (tests/pg_server.py)."""

from __future__ import annotations

import json
import math
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from gpuaccept.results import CheckResult, RunReport, Status
from gpuaccept.store.history import (
    SCHEMA_VERSION,
    History,
    HistoryError,
    HistoryUnreachable,
    PgLocation,
    as_location,
    default_history,
)
from tests.act.test_offenders import UUID, _run
from tests.run_reports import T0, gpu_report, rejudged


def _corpus() -> list[tuple[RunReport, str]]:
    """Runs of three nodes with every shape the queries tell apart: two commands, two levels,
    a NaN figure, remediations (stored with their actions and from before actions were
    stored), a GPU that moved hosts, the same report twice, and a start written with a +05:00
    offset whose text sorts after runs it started before."""
    runs = [
        gpu_report("node-a", [790.0, 780.0], hours=0),
        gpu_report("node-b", [795.0, 600.0], hours=1, passed=False),
        gpu_report("node-a", [785.0, 770.0], hours=2, command="bench"),
        gpu_report("node-c", [float("nan"), 700.0], hours=3),
        _run("node-a", 4, remap=True),  # the plan from its checks (no stored actions)
        _run("node-b", 5, remap=False),  # UUID moved to node-b
    ]
    remediated = _run("node-b", 6, remap=True)
    runs.append(remediated.model_copy(update={"actions": remediated.action_plan}))
    quick = rejudged(gpu_report("node-c", [790.0, 700.0], hours=7), level="quick")
    runs.append(quick)
    # 10:30+05:00 is 05:30 UTC, before T0 (08:00 UTC): first in time, last as text
    offset = OFFSET_START
    runs.append(rejudged(gpu_report("node-d", [800.0], hours=0), started_at=offset))
    slower = gpu_report("node-e", [700.0], hours=8)
    history_check = CheckResult(
        name="history",
        area="HISTORY",
        status=Status.WARN,
        message="compute/matmul_bf16_tflops 12.5% below this node's median of 5 runs",
    )
    runs.append(rejudged(slower, checks=[*slower.checks, history_check]))
    runs.append(runs[0])  # the same report again: stored once
    return [(report, f"test-{i}") for i, report in enumerate(runs)]


OFFSET_START = T0.strftime("%Y-%m-%dT") + "10:30:00+05:00"
FLEET_TABLES = ("fleet_figures", "node_timeline", "gpu_timeline", "stack_days")


def _table(path: Path, table: str) -> list[tuple[Any, ...]]:
    import sqlite3

    with sqlite3.connect(path) as raw:
        return sorted(raw.execute(f"SELECT * FROM {table}").fetchall(), key=repr)


def _answers(history: History) -> dict[str, Any]:
    since = (T0 - timedelta(days=1)).isoformat()
    answers: dict[str, Any] = {
        "count": history.count(),
        "runs": history.list_runs(),
        "oldest": history.list_runs(oldest_first=True),
        "node-a": history.list_runs(node="node-a"),
        "accept-2": history.list_runs(command="accept", limit=2),
        "standard-cuda": history.list_runs(level="standard", device_mode="cuda"),
        "passed": history.list_runs(passed_only=True),
        "started-by": history.list_runs(started_by=(T0 + timedelta(hours=2.5)).timestamp()),
        "started-since": history.list_runs(
            started_since=(T0 + timedelta(hours=5)).timestamp(), oldest_first=True
        ),
        "newest-accept": history.newest_runs("accept"),
        "newest-bench": history.newest_runs("bench"),
        "fleet-points": history.fleet_points(),
        "points": history.points(),
        "latest": history.points(latest_only=True),
        "metric": history.points("compute/matmul_bf16_tflops", node="node-c"),
        "bare-metric": history.points("train_elapsed", command="accept", level="standard"),
        "gpu-runs": history.gpu_runs(UUID),
        "gpu-runs-1": history.gpu_runs(UUID, limit=1),
        "gpu-incidents": sorted(history.gpu_incidents(since)),
        "gpu-incidents-late": sorted(history.gpu_incidents((T0 + timedelta(hours=5)).isoformat())),
        "newest-start": history.newest_start(),
        "node-incidents": sorted(history.node_incidents(since)),
        "node-incidents-late": sorted(
            history.node_incidents((T0 + timedelta(hours=1)).isoformat())
        ),
        "groups": sorted(history.figure_groups()),
        "actions": history.newest_accept_actions(),
    }
    answers["middle"] = [
        history.middle_values(model, f"{check}/{name}", count)
        for model, check, name, _, count in answers["groups"]
    ]
    answers["beyond"] = [
        history.figures_beyond(model, f"{check}/{name}", unit, 700.0, 790.0)
        for model, check, name, unit, _ in answers["groups"]
    ]
    answers["passed-runs"] = sorted(history.passed_runs([r.id for r in answers["runs"]]))
    slower = history.slower_checks([run.id for run in answers["runs"]])
    answers["slower"] = {run_id: check.model_dump_json() for run_id, check in slower.items()}
    # as JSON: a NaN figure is not equal to itself
    answers["reports"] = [history.report(run.id).model_dump_json() for run in answers["runs"]]
    return answers


def test_both_stores_answer_every_query_alike(tmp_path: Path, pg_history: str) -> None:
    corpus = _corpus()
    answers = []
    for location in (tmp_path / "history.sqlite", pg_history):
        with History.open(location) as history:
            stored = history.append(corpus)
            assert [new for _, new in stored].count(False) == 1  # the repeated report
            assert stored[-1] == (stored[0][0], False)
            answers.append(_answers(history))
    sqlite, postgresql = answers
    for key in sqlite:
        assert sqlite[key] == postgresql[key], key
    # and the answers are the ones wanted, not merely equal
    runs = sqlite["runs"]
    assert sqlite["count"] == len(corpus) - 1
    assert runs[-1].hostname == "node-d"  # the +05:00 start is the earliest in time
    assert sqlite["oldest"] == list(reversed(runs))
    assert [r.command for r in sqlite["accept-2"]] == ["accept", "accept"]
    assert all(r.verdict.passed for r in sqlite["passed"])
    assert sqlite["passed-runs"] == sorted(r.id for r in sqlite["passed"])
    assert {r.started_at for r in sqlite["started-by"]} <= {r.started_at for r in runs[-4:]}
    assert len(sqlite["started-by"]) == 4  # node-d, node-a 0h, node-b 1h, node-a 2h (bench)
    # NaN is no point; the report keeps it
    assert not any(math.isnan(p.value) for p in sqlite["points"])
    nan_run = next(r for r in runs if r.hostname == "node-c" and r.level == "standard")
    stored_nan = RunReport.model_validate_json(sqlite["reports"][runs.index(nan_run)])
    assert math.isnan(stored_nan.checks[0].measurements[0].value)
    # the moved GPU's runs on both hosts, newest first
    assert [r.hostname for r, _, _ in sqlite["gpu-runs"]] == ["node-b", "node-b", "node-a"]
    assert len(sqlite["gpu-runs-1"]) == 1
    # remediations: the stored plan (node-b, 6 h) and the planned one (node-a, 4 h), a pass of
    # the moved GPU on node-b (5 h) between: two incidents over the 2 h from its first run in
    # the window to its last, on both hosts
    by_id = {r.id: r for r in runs}
    (moved,) = sqlite["gpu-incidents"]
    assert moved == (UUID, 2, 2.0, 3, ("node-a", "node-b"), "SN1")
    assert sqlite["gpu-incidents-late"] == [(UUID, 1, 1.0, 2, ("node-b",), "SN1")]
    incidents = {node: rest for node, *rest in sqlite["node-incidents"]}
    assert incidents["node-b"] == [2, 5.0, 3]  # failed at 1 h, passed at 5 h, failed at 6 h
    assert incidents["node-a"] == [1, 4.0, 2]  # passed at 0 h, failed at 4 h (2 h: a bench)
    late = {node: rest for node, *rest in sqlite["node-incidents-late"]}
    assert late["node-a"] == [1, 0.0, 1]  # its pass at 0 h is before the window
    assert "node-d" not in late  # it ran before the window
    # the failing newest accepts' actions, and no passing one's
    assert {by_id[run_id].hostname for run_id in sqlite["actions"]} == {"node-a", "node-b"}
    assert [r.started_at for r in sqlite["started-since"]] == [
        (T0 + timedelta(hours=h)).isoformat() for h in (5, 6, 7, 8)
    ]
    assert [(r.hostname, r.started_at) for r in sqlite["newest-accept"]] == [
        ("node-a", (T0 + timedelta(hours=4)).isoformat()),
        ("node-b", (T0 + timedelta(hours=6)).isoformat()),
        ("node-c", (T0 + timedelta(hours=7)).isoformat()),
        ("node-d", OFFSET_START),
        ("node-e", (T0 + timedelta(hours=8)).isoformat()),
    ]
    # the run whose own history check found its node slower, and no other
    (slower_id,) = sqlite["slower"]
    assert next(r for r in runs if r.id == slower_id).hostname == "node-e"
    assert sqlite["newest-start"] == (T0 + timedelta(hours=8)).isoformat()
    assert [r.hostname for r in sqlite["newest-bench"]] == ["node-a"]
    # the fleet's figures: those of the newest run of each node and kind (command, level), the
    # newest per GPU among them. Run 6 (node-b's first quick accept) is not one: its compute
    # figure of the moved GPU, still the newest of that metric in the whole history, is not
    # compared; node-a's standard accept (run 1) is one, its figures superseded by its bench.
    assert {p.run_id for p in sqlite["fleet-points"]} == {2, 3, 5, 7, 8, 9, 10}
    assert 6 in {p.run_id for p in sqlite["latest"]}
    assert (by_id[6].hostname, by_id[6].level) == ("node-b", "quick")
    # the newest figure per GPU: node-c's quick run supersedes its standard one
    latest_c = [p for p in sqlite["latest"] if p.hostname == "node-c" and p.name != "train_elapsed"]
    assert {p.value for p in latest_c} == {790.0, 700.0}


@pytest.fixture(params=["sqlite", "postgresql"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return str(tmp_path / "history.sqlite")
    return str(request.getfixturevalue("pg_history"))


def test_an_empty_store_opened_to_read_is_refused(store: str) -> None:
    with (
        pytest.raises(HistoryError, match="nothing recorded yet"),
        History.open(store, create=False),
    ):
        pass


def test_a_store_checks_it_can_be_written(store: str) -> None:
    with History.open(store) as history:
        history.check_writable()
        assert history.count() == 0  # the check leaves nothing behind


def test_an_unknown_run_is_said(store: str) -> None:
    with History.open(store) as history:
        history.append([(gpu_report("n", [790.0]), "t")])
        with pytest.raises(HistoryError, match="no run 99"):
            history.report(99)


def test_a_uri_with_a_password_is_refused_before_any_connection() -> None:
    for uri in (
        "postgresql://ops:hunter2@db.example/gpuaccept",
        "postgresql://db.example/gpuaccept?password=hunter2",
    ):
        with pytest.raises(HistoryError, match="pgpass") as raised:
            as_location(uri)
        assert "hunter2" not in str(raised.value)
    with pytest.raises(HistoryError, match="not a PostgreSQL URI"):
        as_location("postgresql://db.example:notaport/gpuaccept")
    assert as_location("postgres://db/gpuaccept") == PgLocation("postgres://db/gpuaccept")
    assert as_location("postgresql-notes.sqlite") == Path("postgresql-notes.sqlite")
    assert as_location("runs/a:b//h.sqlite") == Path("runs/a:b//h.sqlite")
    for other in ("sqlite:///h.sqlite", "file:///var/h.sqlite", "POSTGRESQL://db/gpuaccept"):
        with pytest.raises(HistoryError, match="no scheme"):
            as_location(other)
    assert default_history({"GPUACCEPT_HISTORY": "postgresql:///fleet"}) == PgLocation(
        "postgresql:///fleet"
    )


def test_a_server_that_cannot_be_reached_is_said_in_one_line(pg_server: Any) -> None:
    closed = pg_server.uri(database="x").replace(str(pg_server.port), "1")
    with pytest.raises(HistoryUnreachable, match="cannot reach it") as raised, History.open(closed):
        pass
    assert "\n" not in str(raised.value)


def _setting(server: Any, name: str) -> str:
    import psycopg

    with psycopg.connect(server.uri(), passfile=str(server.passfile)) as connection:
        row = connection.execute(f"SHOW {name}").fetchone()
    assert row is not None
    return str(row[0])


def test_the_benchmarks_server_syncs_its_writes_and_the_tests_server_does_not(
    pg_server: Any,
) -> None:
    # the published PostgreSQL figures (docs/results) are of a server that syncs, as a fleet's
    # would: `durable` was once ignored and every server ran with fsync off
    from tests import pg_server as servers

    assert _setting(pg_server, "fsync") == "off"
    with servers.running(durable=True) as durable:
        assert _setting(durable, "fsync") == "on"


def test_tls_required_of_a_server_without_it_is_unreachable(
    pg_history: str,
) -> None:
    with (
        pytest.raises(HistoryUnreachable, match=r"(?i)ssl"),
        History.open(pg_history + "?sslmode=require"),
    ):
        pass


def test_the_password_comes_from_the_password_file(
    pg_history: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("PGPASSFILE", str(tmp_path / "no-such-file"))
    monkeypatch.delenv("PGPASSWORD", raising=False)
    with pytest.raises(HistoryUnreachable, match="password"), History.open(pg_history):
        pass


def test_a_database_of_another_application_is_refused_and_left_alone(
    pg_server: Any, pg_history: str
) -> None:
    database = pg_history.rsplit("/", 1)[1]
    pg_server.sql("CREATE TABLE runs (id integer, what text)", database)
    with pytest.raises(HistoryError, match="not a gpuaccept history"), History.open(pg_history):
        pass
    import psycopg

    with psycopg.connect(pg_history, passfile=str(pg_server.passfile)) as connection:
        tables = connection.execute(
            "SELECT tablename FROM pg_tables WHERE schemaname = 'public'"
        ).fetchall()
    assert tables == [("runs",)]


def test_a_newer_schema_is_refused(pg_server: Any, pg_history: str) -> None:
    with History.open(pg_history) as history:
        history.append([(gpu_report("n", [790.0]), "t")])
    database = pg_history.rsplit("/", 1)[1]
    pg_server.sql(
        "UPDATE gpuaccept_history SET value = '99' WHERE key = 'schema_version'", database
    )
    with pytest.raises(HistoryError, match="newer gpuaccept"), History.open(pg_history):
        pass


def test_a_role_that_may_only_read_is_refused_before_a_run(
    pg_server: Any, pg_history: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    with History.open(pg_history) as history:
        history.append([(gpu_report("n", [790.0]), "t")])
    database = pg_history.rsplit("/", 1)[1]
    pg_server.sql("CREATE ROLE reader LOGIN PASSWORD 'reader-secret'")
    pg_server.sql("GRANT SELECT ON ALL TABLES IN SCHEMA public TO reader", database)
    passfile = tmp_path / "pgpass"
    passfile.write_text(f"127.0.0.1:{pg_server.port}:*:reader:reader-secret\n")
    passfile.chmod(0o600)
    monkeypatch.setenv("PGPASSFILE", str(passfile))
    reader = pg_server.uri(database, user="reader")
    with History.open(reader) as history:
        assert history.count() == 1  # reading is allowed
        with pytest.raises(HistoryError, match="may not insert runs"):
            history.check_writable()
    # granted what an append wrote before schema 6, not the fleet's tables: refused before a
    # run too (its append would fail half-way)
    for grant in (
        "GRANT INSERT ON runs, measurements, run_gpus TO reader",
        "GRANT USAGE ON SEQUENCE runs_id_seq TO reader",
        "GRANT INSERT, UPDATE ON latest_runs TO reader",
    ):
        pg_server.sql(grant, database)
    with History.open(reader) as history:
        with pytest.raises(HistoryError, match="may not insert runs"):
            history.check_writable()
        pg_server.sql("GRANT INSERT, UPDATE, DELETE ON fleet_figures TO reader", database)
        pg_server.sql(
            "GRANT INSERT, UPDATE ON node_timeline, gpu_timeline, stack_days TO reader", database
        )
        history.check_writable()  # now it may
        history.append([(gpu_report("m", [780.0]), "t")])
        assert history.count() == 2


def test_history_fleet_says_the_same_from_either_store(tmp_path: Path, pg_history: str) -> None:
    from typer.testing import CliRunner

    from gpuaccept.cli import app

    said = []
    for location in (str(tmp_path / "history.sqlite"), pg_history):
        with History.open(location) as history:
            history.append(_corpus())
        result = CliRunner().invoke(app, ["history", "fleet", "--history", location, "--json"])
        assert result.exit_code == 1, result.output  # node-b's newest accept failed
        said.append(json.loads(result.stdout))
    assert said[0] == said[1]
    # those to act on first (issue #53 §2), then the rest by name
    assert [n["node"] for n in said[0]["nodes"]] == [
        "node-a",
        "node-b",
        "node-e",
        "node-c",
        "node-d",
    ]
    assert [s["node"] for s in said[0]["slower_than_before"]] == ["node-e"]


def test_an_older_history_gains_the_fleets_index_when_opened(
    tmp_path: Path, pg_server: Any, pg_history: str
) -> None:
    import sqlite3

    path = tmp_path / "h.sqlite"
    corpus = _corpus()
    with History.open(path) as history:
        history.append(corpus)
        before = _answers(history)
        fleet = {table: _table(path, table) for table in FLEET_TABLES}
    # as schema 3 left it: no fleet columns, no index
    with sqlite3.connect(path) as raw:
        for table in ("latest_runs", *FLEET_TABLES):
            raw.execute(f"DROP TABLE {table}")
        raw.execute("DROP INDEX runs_by_kind")
        for column in ("fitness", "remediated", "slower_json"):
            raw.execute(f"ALTER TABLE runs DROP COLUMN {column}")
        raw.execute("PRAGMA user_version = 3")
    with History.open(path, create=False) as history:
        # filled in from the stored reports: every answer as before, remediations included
        assert _answers(history) == before
        assert next(r.hostname for r in history.newest_runs("accept")) == "node-a"
    # the fleet's tables as the appends kept them, row for row
    assert {table: _table(path, table) for table in FLEET_TABLES} == fleet
    with sqlite3.connect(path) as raw:
        assert raw.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION == 8
        indexes = {row[1] for row in raw.execute("PRAGMA index_list(runs)")}
        latest = raw.execute("SELECT count(*) FROM latest_runs").fetchone()[0]
    assert "runs_by_kind" in indexes
    kinds = {(report.hostname, report.command, report.level) for report, _ in corpus}
    assert latest == len(kinds) == 9  # one row per node and kind (command, level)
    # the same of a PostgreSQL history as schema 3 left it
    with History.open(pg_history) as history:
        history.append(corpus)
    database = pg_history.rsplit("/", 1)[1]
    for table in ("latest_runs", *FLEET_TABLES):
        pg_server.sql(f"DROP TABLE {table}", database)
    pg_server.sql("DROP INDEX runs_by_kind", database)
    for column in ("fitness", "remediated", "slower_json"):
        pg_server.sql(f"ALTER TABLE runs DROP COLUMN {column}", database)
    pg_server.sql("UPDATE gpuaccept_history SET value = '3' WHERE key = 'schema_version'", database)
    with History.open(pg_history, create=False) as history:
        assert _answers(history) == before
    import psycopg

    with psycopg.connect(pg_history, passfile=str(pg_server.passfile)) as connection:
        version = connection.execute(
            "SELECT value FROM gpuaccept_history WHERE key = 'schema_version'"
        ).fetchone()
        index = connection.execute("SELECT to_regclass('runs_by_kind')::text").fetchone()
        window = connection.execute("SELECT to_regclass('gpu_timeline_window')::text").fetchone()
        latest = connection.execute("SELECT count(*) FROM latest_runs").fetchone()
    assert version == ("8",)
    assert latest == (len(kinds),)
    assert index == ("runs_by_kind",)
    assert window == ("gpu_timeline_window",)  # schema 7: PostgreSQL's index of a GPU's runs


def test_an_older_run_stored_after_a_newer_one_leaves_the_newer_the_nodes_latest(
    tmp_path: Path, pg_history: str
) -> None:
    """latest_runs is kept by each append: a run pushed from a spool or imported after a newer
    one of its node and kind must not become the node's newest; of two that started at the same
    instant (one written with an offset), the one stored later is."""
    newer = gpu_report("node-a", [700.0], hours=5)
    older = gpu_report("node-a", [790.0], hours=1)
    same_instant = rejudged(
        gpu_report("node-b", [650.0], hours=0),
        started_at=OFFSET_START.replace("10:30", "13:00"),  # 08:00 UTC, T0 itself
    )
    first_b = gpu_report("node-b", [800.0], hours=0)
    for location in (tmp_path / "history.sqlite", pg_history):
        with History.open(location) as history:
            (newer_id, _), (first_b_id, _) = history.append([(newer, "a"), (first_b, "b")])
            history.append([(older, "c")])
            (tie_id, _) = history.append([(same_instant, "d")])[0]
            assert tie_id > first_b_id
            newest = {run.hostname: run.id for run in history.newest_runs("accept")}
            assert newest == {"node-a": newer_id, "node-b": tie_id}, location
            figures = {
                (p.hostname, p.value)
                for p in history.fleet_points()
                if p.name == "matmul_bf16_tflops"
            }
            assert figures == {("node-a", 700.0), ("node-b", 650.0)}, location
