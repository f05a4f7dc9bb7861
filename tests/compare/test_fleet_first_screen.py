"""The fleet's first screen (issue #53 §2): the nodes to act on, the most severe action first;
what changed since a time the operator picks; the stacks in use with their pass rates, the one
before an upgrade beside the one after; the node table paged, those to act on first. Each on
both stores, whose statements (store/fleet_tables.py) answer it, and the schema-8 upgrade that
gives an older history the columns it reads."""

from __future__ import annotations

import json
from datetime import timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

from gpuaccept.commands.history import fleet
from gpuaccept.commands.output import Collected
from gpuaccept.compare.fleet import FleetState, fleet_state, parse_since
from gpuaccept.errors import InputError
from gpuaccept.results import CheckResult, RunReport, Status
from gpuaccept.store.history import History
from tests.run_reports import T0, gpu_report, rejudged


@pytest.fixture(params=["sqlite", "postgresql"])
def location(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return str(tmp_path / "h.sqlite")
    return str(request.getfixturevalue("pg_history"))


def failing(node: str, hours: float, code: str, finding: str, value: float = 800.0) -> RunReport:
    """An accept run of `node` whose health check failed on a finding of cause `code` (its
    action from the [cause] table: remap-failure replace, ecc-uncorrectable drain,
    remap-pending reset-gpu, below-floor rerun)."""
    base = gpu_report(node, [value], hours=hours)
    health = CheckResult(
        name="health",
        area="HEALTH",
        status=Status.FAIL,
        message=finding,
        details={
            "findings": [
                {"status": "fail", "text": finding, "kind": "cause", "code": code, "gpu": None}
            ]
        },
    )
    return rejudged(base, checks=[*base.checks, health])


def slower(node: str, hours: float) -> RunReport:
    """A passing accept whose own history check found the node slower than before."""
    base = gpu_report(node, [800.0], hours=hours)
    check = CheckResult(
        name="history",
        area="HISTORY",
        status=Status.WARN,
        message="compute/matmul_bf16_tflops 14.0% below this node's median of 4 runs",
    )
    return rejudged(base, checks=[*base.checks, check])


def _state(location: str, *reports: RunReport, **asked: Any) -> FleetState:
    with History.open(location) as history:
        history.append([(report, "t") for report in reports])
        return fleet_state(history, tolerance_percent=10.0, min_samples=3, mtbi_days=30.0, **asked)


def test_the_nodes_to_act_on_come_most_severe_action_first(location: str) -> None:
    state = _state(
        location,
        gpu_report("ok-1", [800.0]),
        gpu_report("ok-2", [800.0]),
        failing("a-rerun", 1, "below-floor", "gpu0 matmul 500 TFLOPS below floor 640"),
        failing("b-reset", 1, "remap-pending", "gpu0: row remapping pending"),
        failing("c-drain", 1, "ecc-uncorrectable", "gpu0: volatile DBE"),
        failing("d-replace", 1, "remap-failure", "gpu0: row remapping failed"),
        gpu_report("e-lags", [600.0]),  # 25% under the H100s' median of 800
        slower("f-slower", 1),
    )
    assert [(e.node, e.action) for e in state.act_now] == [
        ("d-replace", "replace"),
        ("c-drain", "drain"),
        ("b-reset", "reset-gpu"),
        ("a-rerun", "rerun"),
        ("e-lags", "monitor"),
        ("f-slower", "monitor"),
    ]
    why = {e.node: e.why for e in state.act_now}
    assert why["d-replace"] == "health: gpu0: row remapping failed"  # the check and its finding
    assert why["e-lags"].startswith("GPU figure lags: gpu0 compute/matmul_bf16_tflops 600 ")
    assert "-25.0% against the NVIDIA H100 80GB HBM3 median 800" in why["e-lags"]
    assert why["f-slower"].startswith("compute/matmul_bf16_tflops 14.0% below")
    # the node table's default order: those to act on, in that order, then the rest by name
    assert [run.hostname for run in state.attention_order()] == [
        *(e.node for e in state.act_now),
        "ok-1",
        "ok-2",
    ]
    assert state.counts() == {"pass": 4, "fail": 4}


def test_a_node_with_several_reasons_is_listed_once_by_its_most_severe(location: str) -> None:
    state = _state(
        location,
        gpu_report("ok-1", [800.0]),
        gpu_report("ok-2", [800.0]),
        gpu_report("ok-3", [800.0]),
        # failing on a pending remap, and its GPU lags the fleet too
        failing("both", 1, "remap-pending", "gpu0: row remapping pending", value=500.0),
    )
    (entry,) = state.act_now
    assert (entry.node, entry.action, entry.failing, entry.more) == ("both", "reset-gpu", True, 1)


def test_what_changed_since_a_time_the_operator_picks(location: str) -> None:
    reports = [
        gpu_report("a-newly-failing", [800.0], hours=0),
        failing("a-newly-failing", 10, "ecc-uncorrectable", "gpu0: volatile DBE"),
        failing("b-returned", 0, "ecc-uncorrectable", "gpu0: volatile DBE"),
        gpu_report("b-returned", [800.0], hours=9),
        gpu_report("c-newly-slow", [800.0], hours=0),
        slower("c-newly-slow", 8),
        failing("d-still-failing", 0, "ecc-uncorrectable", "gpu0: volatile DBE"),
        failing("d-still-failing", 9, "ecc-uncorrectable", "gpu0: volatile DBE"),
        gpu_report("e-nothing-since", [800.0], hours=0),
        failing("f-new-and-failing", 7, "below-floor", "gpu0 below floor"),
        slower("g-still-slow", 0),
        slower("g-still-slow", 9),
    ]

    def changed(**asked: Any) -> tuple[list[str], list[str], list[str]]:
        state = _state(location, *reports, **asked)
        assert state.changes is not None
        return (
            sorted(c.node for c in state.changes.newly_failing),
            sorted(c.node for c in state.changes.newly_slow),
            sorted(c.node for c in state.changes.returned),
        )

    # 6 h before the newest run (10 h after T0): since 4 h after T0
    assert changed(since=timedelta(hours=6)) == (
        ["a-newly-failing", "f-new-and-failing"],
        ["c-newly-slow"],
        ["b-returned"],
    )
    # an instant: since 8.5 h after T0, c's slower run (8 h) and f's failure (7 h) are before it
    assert changed(since=T0 + timedelta(hours=8.5)) == (
        ["a-newly-failing"],
        [],
        ["b-returned"],
    )
    # the same instant with an offset counts alike and is said in UTC, as the screens' times are
    east = timezone(timedelta(hours=2))
    assert changed(since=(T0 + timedelta(hours=8.5)).astimezone(east)) == (
        ["a-newly-failing"],
        [],
        ["b-returned"],
    )
    said = _state(location, *reports, since=(T0 + timedelta(hours=8.5)).astimezone(east))
    assert said.changes is not None
    assert said.changes.since == "2026-11-01T16:30:00+00:00"
    # after the newest run nothing can have changed: refused, not an empty screen
    with pytest.raises(InputError, match="after the history's newest run"):
        changed(since=T0 + timedelta(hours=11))


def test_the_stacks_in_use_before_and_after_an_upgrade_with_their_pass_rates(
    location: str,
) -> None:
    def on(report: RunReport, torch: str) -> RunReport:
        environment = {
            **report.environment,
            "torch": {"version": torch},
            "cuda": {"runtime": "12.8", "driver_version": "570.86.15"},
        }
        return rejudged(report, environment=environment)

    old, new = "2.12.0+cu128", "2.13.0+cu128"
    state = _state(
        location,
        on(gpu_report("n1", [800.0], hours=0), old),
        on(gpu_report("n2", [800.0], hours=1), old),
        on(failing("n3", 2, "ecc-uncorrectable", "gpu0: volatile DBE"), old),
        on(gpu_report("n1", [800.0], hours=5), new),
        on(failing("n2", 6, "ecc-uncorrectable", "gpu0: volatile DBE"), new),
        on(failing("n3", 7, "below-floor", "gpu0 below floor"), new),
        on(rejudged(gpu_report("n4", [800.0], hours=8), device_mode="cpu"), new),
    )
    assert [(s.stack, s.nodes_now, s.judged, s.passed) for s in state.stacks] == [
        (f"torch {old} / CUDA 12.8 / driver 570.86.15", 0, 3, 2),
        # a pass in CPU mode judged no GPU: n4 runs it now, its run counts for neither
        (f"torch {new} / CUDA 12.8 / driver 570.86.15", 4, 3, 1),
    ]


def test_since_takes_hours_days_or_an_instant_and_refuses_the_rest() -> None:
    assert parse_since("24h") == timedelta(hours=24)
    assert parse_since("1.5d") == timedelta(days=1.5)
    assert parse_since("2026-11-28").isoformat() == "2026-11-28T00:00:00+00:00"  # type: ignore[union-attr]
    assert parse_since("2026-11-28T06:00+02:00").isoformat() == "2026-11-28T06:00:00+02:00"  # type: ignore[union-attr]
    for text in ("0h", "-1d", "yesterday", "nan", "1e3h", "", "24"):
        with pytest.raises(InputError) as refused:
            parse_since(text)
        assert "--since" in str(refused.value)
        assert "\n" not in str(refused.value)
    with pytest.raises(InputError, match="--since"):
        fleet.FleetRequest(since="last week")
    from gpuaccept.commands.report import ReportRequest

    with pytest.raises(InputError, match="--since 'soon'"):
        ReportRequest(source=None, fleet=True, html=Path("p.html"), since="soon")
    with pytest.raises(InputError, match="give --fleet"):
        ReportRequest(source="1", since="24h")
    for page, size, said in ((0, 50, "--page 0"), (1, 0, "--page-size 0")):
        with pytest.raises(InputError, match=said):
            fleet.FleetRequest(page=page, page_size=size)


def test_history_fleet_leads_with_the_decision_and_pages_the_nodes(tmp_path: Path) -> None:
    path = tmp_path / "h.sqlite"
    with History.open(path) as history:
        history.append(
            [
                *[(gpu_report(f"ok-{i}", [800.0]), "t") for i in range(5)],
                (failing("z-drain", 1, "ecc-uncorrectable", "gpu0: volatile DBE"), "t"),
                (failing("y-replace", 1, "remap-failure", "gpu0: row remapping failed"), "t"),
            ]
        )
    out = Collected()
    result = fleet.run(fleet.FleetRequest(history=str(path), page=2, page_size=3), out)
    assert result.exit_code == 1
    lines = out.text().splitlines()
    assert lines[0] == "Fleet: 7 node(s), each by its newest accept: 5 pass · 2 fail"
    act = lines.index("Act now, most severe first (2 node(s)):")
    assert lines[act + 3].split()[:2] == ["y-replace", "replace"]
    assert lines[act + 4].split()[:2] == ["z-drain", "drain"]
    assert any(line.startswith("Changed since ") for line in lines[act:])
    # the first screen comes before the node table, whose page 2 holds the 4th to 6th nodes
    table = lines.index("Nodes, those to act on first (page 2 of 3, 3 of 7; --page N):")
    assert table > act
    assert [line.split()[0] for line in lines[table + 3 : table + 6]] == ["ok-1", "ok-2", "ok-3"]
    as_json = Collected()
    fleet.run(fleet.FleetRequest(history=str(path), as_json=True, page=3, page_size=3), as_json)
    view = json.loads(as_json.text())
    assert view["nodes_page"] == {
        "page": 3,
        "pages": 3,
        "page_size": 3,
        "total": 7,
        "order": "those to act on first (most severe action first), then by name",
    }
    assert [n["node"] for n in view["nodes"]] == ["ok-4"]
    assert [(a["node"], a["action"]) for a in view["act_now"]] == [
        ("y-replace", "replace"),
        ("z-drain", "drain"),
    ]
    assert view["summary"]["states"] == {"pass": 5, "fail": 2}
    with pytest.raises(InputError, match="--page 4: the node table has 3 page"):
        fleet.run(fleet.FleetRequest(history=str(path), page=4, page_size=3), Collected())


def test_a_schema_7_postgresql_history_gains_the_stacks_and_whys_when_opened(
    pg_server: Any, pg_history: str, caplog: pytest.LogCaptureFixture
) -> None:
    import psycopg

    reports = [
        gpu_report("n1", [800.0]),
        failing("n2", 1, "remap-failure", "gpu0: row remapping failed"),
    ]
    stored = failing("n3", 2, "ecc-uncorrectable", "gpu0: volatile DBE")
    reports.append(stored.model_copy(update={"actions": stored.action_plan}))  # a plan stored
    reports.append(slower("n4", 3))
    with History.open(pg_history) as history:
        history.append([(r, "t") for r in reports])
    read = "SELECT run_id, stack, why, passed, slower FROM node_timeline ORDER BY run_id"
    with psycopg.connect(pg_history, passfile=str(pg_server.passfile)) as connection:
        kept = connection.execute(read).fetchall()
    assert [row[2:] for row in kept] == [
        ("", 1, 0),
        ("health: gpu0: row remapping failed", 0, 0),
        ("health: gpu0: volatile DBE", 0, 0),
        ("", 1, 1),
    ]
    with psycopg.connect(pg_history, passfile=str(pg_server.passfile)) as connection:
        days = connection.execute("SELECT * FROM stack_days").fetchall()
    database = pg_history.rsplit("/", 1)[1]
    pg_server.sql("DROP TABLE stack_days", database)
    for column in ("stack", "why", "passed", "slower"):
        pg_server.sql(f"ALTER TABLE node_timeline DROP COLUMN {column}", database)
    pg_server.sql("UPDATE gpuaccept_history SET value = '7' WHERE key = 'schema_version'", database)
    caplog.clear()
    with History.open(pg_history, create=False) as history:
        # said before it starts, with how many runs it rewrites
        (said,) = [r.getMessage() for r in caplog.records if r.name == "gpuaccept.store"]
        assert "upgrading it from schema 7 to 8, once (4 stored run(s)" in said
        assert [
            e.action
            for e in fleet_state(
                history, tolerance_percent=10.0, min_samples=3, mtbi_days=30.0
            ).act_now
        ] == ["replace", "drain", "monitor"]
    with psycopg.connect(pg_history, passfile=str(pg_server.passfile)) as connection:
        assert connection.execute(read).fetchall() == kept
        assert connection.execute("SELECT * FROM stack_days").fetchall() == days
        version = connection.execute(
            "SELECT value FROM gpuaccept_history WHERE key = 'schema_version'"
        ).fetchone()
    assert version == ("8",)


def test_the_command_line_takes_since_and_the_page_and_refuses_them_in_one_line(
    tmp_path: Path,
) -> None:
    from typer.testing import CliRunner

    from gpuaccept.cli import app

    path = tmp_path / "h.sqlite"
    with History.open(path) as history:
        history.append(
            [
                (gpu_report("n1", [800.0], hours=0), "t"),
                (failing("n1", 10, "ecc-uncorrectable", "gpu0: volatile DBE"), "t"),
                (gpu_report("n2", [800.0], hours=10), "t"),
            ]
        )
    base = ["history", "fleet", "--history", str(path)]
    said = CliRunner().invoke(app, [*base, "--since", "6h", "--page-size", "1", "--json"])
    assert said.exit_code == 1, said.output
    view = json.loads(said.stdout)
    assert [c["node"] for c in view["changed"]["newly_failing"]] == ["n1"]
    assert [n["node"] for n in view["nodes"]] == ["n1"]  # the one to act on, first
    assert view["nodes_page"]["pages"] == 2
    page = tmp_path / "fleet.html"
    drawn = CliRunner().invoke(
        app, ["report", "--fleet", "--history", str(path), "--html", str(page), "--since", "6h"]
    )
    assert drawn.exit_code == 0, drawn.output
    assert "<b>1 newly failing</b>: n1" in page.read_text()
    for argv, line in (
        ([*base, "--since", "yesterday"], "--since 'yesterday': give hours or days"),
        ([*base, "--page", "3", "--page-size", "1"], "--page 3: the node table has 2 page(s)"),
        (["report", "1", "--history", str(path), "--since", "6h"], "give --fleet"),
    ):
        result = CliRunner().invoke(app, argv)
        assert result.exit_code == 2, result.output
        (said_line,) = result.stderr.strip().splitlines()
        assert line in said_line, said_line


def test_a_node_its_watch_failed_after_its_newest_accept_is_to_act_on(location: str) -> None:
    """The watch between jobs records its failures as runs of command watch: a node whose watch
    failed since its newest accept passed is on the act-now list with the watch's own action and
    why (it was on no fleet screen); a watch failure its newer accept answered is not."""

    def watch(report: RunReport) -> RunReport:
        return rejudged(report, command="watch", level="watch")

    state = _state(
        location,
        gpu_report("a-watch-failed-since", [800.0], hours=0),
        watch(failing("a-watch-failed-since", 2, "ecc-uncorrectable", "gpu0: volatile DBE")),
        watch(failing("b-accepted-since", 0, "remap-failure", "gpu0: row remapping failed")),
        gpu_report("b-accepted-since", [800.0], hours=3),
        gpu_report("c-watch-passed", [800.0], hours=0),
        watch(gpu_report("c-watch-passed", [800.0], hours=1)),
    )
    assert [(e.node, e.action, e.why, e.failing) for e in state.act_now] == [
        ("a-watch-failed-since", "drain", "watch: gpu0: volatile DBE", True)
    ]
