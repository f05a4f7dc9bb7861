"""The fleet's tables (store/fleet_tables.py, schema 6) held to the rules they count: random
histories, appended out of order in batches of any size (a spool pushed late, `history import`),
with runs of one instant, GPUs that move between hosts, runs without a host, runs that judged
nothing and a run listing one UUID twice, read back from both stores and compared with the rules
stated in Python over the same reports: `act.offenders.node_mtbi` and `gpu_mtbi` for the
incidents of any window, each GPU's newest figure among each node's newest runs, and
`compare.comparison.fleet_view`'s medians and outliers."""

from __future__ import annotations

import random
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from gpuaccept.act.offenders import gpu_mtbi, node_mtbi
from gpuaccept.compare.comparison import fleet_view
from gpuaccept.compare.fleet import fleet_state
from gpuaccept.report.node_verdict import verdict_fitness
from gpuaccept.results import RunReport
from gpuaccept.store.fleet_tables import gpu_key
from gpuaccept.store.history import History, MetricPoint, run_started
from tests.act.test_offenders import _run
from tests.run_reports import T0, gpu_report, rejudged

NODES = ["n1", "n2", "n3", None]
UUIDS = ["GPU-A", "GPU-B", "GPU-C"]


def _random_run(rng: random.Random) -> RunReport:
    node = rng.choice(NODES)
    hours = rng.choice([0, 1, 1, 2, 3, 5, 8, 8, 13])  # repeated: runs of one instant
    shape = rng.choice(["accept", "accept", "failed", "remap", "cpu", "bench", "quick"])
    if shape == "remap" or shape == "quick":
        # one GPU that moves between hosts, named for a remediation or not
        report = _run(node or "n1", hours, remap=rng.random() < 0.5, uuid=rng.choice(UUIDS))
        if rng.random() < 0.2:  # a capture that lists its GPU twice, the second without serial
            gpus = report.environment["gpus"]
            report = rejudged(
                report, environment={**report.environment, "gpus": [*gpus, {**gpus[0]}]}
            )
    else:
        values = [rng.choice([600.0, 700.0, 760.0, 790.0, 800.0, 810.0]) for _ in range(2)]
        report = gpu_report(
            node or "n1",
            values,
            hours=hours,
            passed=shape != "failed",
            command="bench" if shape == "bench" else "accept",
            train_seconds=rng.choice([10.0, 12.0, 15.0]),
        )
        if shape == "cpu":
            report = rejudged(report, device_mode="cpu")  # judged nothing of the node
        if rng.random() < 0.3:  # one GPU's figure of a metric twice in one run: the later wins
            compute = report.checks[0]
            again = compute.measurements[0].model_copy(update={"value": 500.0})
            twice = compute.model_copy(update={"measurements": [*compute.measurements, again]})
            report = rejudged(report, checks=[twice, *report.checks[1:]])
    if rng.random() < 0.3:  # the same instant written with another offset
        moment = datetime.fromisoformat(report.started_at)
        report = rejudged(report, started_at=moment.astimezone().isoformat())
    if node is None:
        report = rejudged(report, environment={**report.environment, "system": {}})
    return report


def _history(rng: random.Random, size: int) -> list[list[RunReport]]:
    """Distinct random runs, shuffled, in batches of random size (the order they are stored)."""
    runs: dict[str, RunReport] = {}
    while len(runs) < size:
        report = _random_run(rng)
        runs.setdefault(report.model_dump_json(), report)
    ordered = list(runs.values())
    rng.shuffle(ordered)
    batches = []
    while ordered:
        cut = rng.randint(1, 5)
        batches.append(ordered[:cut])
        ordered = ordered[cut:]
    return batches


def _started(report: RunReport) -> datetime:
    return run_started(report.started_at)


def _node_reference(stored: list[tuple[int, RunReport]], since: datetime) -> list[Any]:
    judged = {"fail": True, "pass": False}
    return sorted(
        (m.what if m.what != "None" else "", m.incidents, m.hours, m.runs)
        for m in node_mtbi(
            (r.hostname, r.started_at, judged.get(verdict_fitness(r.verdict)))
            for _, r in stored
            if r.command == "accept" and _started(r) >= since
        )
    )


def _gpu_reference(stored: list[tuple[int, RunReport]], since: datetime) -> list[Any]:
    window = [(i, r) for i, r in stored if r.command == "accept" and _started(r) >= since]
    named = [
        (uuid, i)
        for i, r in window
        if not r.verdict.passed
        for uuid in r.action_plan.out_of_service_uuids()
    ]
    uuids = {uuid for uuid, _ in named}
    took_part = []
    for i, r in window:
        seen: dict[str, str | None] = {}
        for gpu in r.environment.get("gpus") or []:
            if gpu.get("uuid") in uuids:
                held = seen.get(gpu["uuid"])
                seen[gpu["uuid"]] = min(filter(None, (held, gpu.get("serial"))), default=None)
        took_part += [(u, i, r.started_at, r.hostname, s) for u, s in seen.items()]
    return sorted(
        (m.what, m.incidents, m.hours, m.runs, m.hosts, m.serial)
        for m in gpu_mtbi(named, took_part)
    )


def _points_reference(stored: list[tuple[int, RunReport]]) -> list[MetricPoint]:
    """Each GPU's newest figure among each node's newest run of each kind (command, level)."""
    latest: dict[tuple[str, str, str], tuple[datetime, int, RunReport]] = {}
    for i, r in stored:
        key = (r.hostname or "", r.command, r.level)
        if key not in latest or (_started(r), i) > latest[key][:2]:
            latest[key] = (_started(r), i, r)
    newest: dict[tuple[str, str, str], tuple[tuple[Any, ...], MetricPoint]] = {}
    for moment, i, r in latest.values():
        uuids = {g.get("index"): g.get("uuid") for g in r.environment.get("gpus") or []}
        figures = [(c.name, m) for c in r.checks for m in c.measurements]
        for ordinal, (check, m) in enumerate(figures):
            uuid = uuids.get(m.device_index)
            point = MetricPoint(
                i,
                r.started_at,
                r.hostname,
                check,
                m.name,
                m.value,
                m.unit,
                m.device_index,
                m.device_name,
                uuid,
            )
            rank = (moment, i, ordinal)
            key = (check, m.name, gpu_key(uuid, r.hostname, m.device_index))
            if key not in newest or rank > newest[key][0]:
                newest[key] = (rank, point)
    ordered = sorted(
        newest.values(),
        key=lambda item: (item[0][:2], item[1].device_index is not None, item[1].device_index or 0),
    )
    return [point for _, point in ordered]


def _rounded(rows: list[Any]) -> list[Any]:
    """Rows whose third value (hours) is rounded to a microsecond: an instant's seconds since the
    epoch and a difference of datetimes agree to that, not to the last bit."""
    return sorted((*row[:2], round(row[2], 9), *row[3:]) for row in rows)


@pytest.mark.parametrize("seed", [1, 2, 3, 4])
@pytest.mark.parametrize("store", ["sqlite", "postgresql"])
def test_the_fleets_tables_count_what_the_rules_say(
    seed: int, store: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    rng = random.Random(seed)
    location = (
        str(tmp_path / "h.sqlite") if store == "sqlite" else request.getfixturevalue("pg_history")
    )
    stored: list[tuple[int, RunReport]] = []
    counted: list[Any] = []
    with History.open(location) as history:
        for batch in _history(rng, 40):
            ids = history.append([(report, "t") for report in batch])
            stored += [(run_id, report) for (run_id, _), report in zip(ids, batch, strict=True)]
        for since in (T0 - timedelta(days=1), T0 + timedelta(hours=1), T0 + timedelta(hours=4)):
            nodes = _rounded(history.node_incidents(since.isoformat()))
            assert nodes == _rounded(_node_reference(stored, since)), since
            gpus = _rounded(history.gpu_incidents(since.isoformat()))
            assert gpus == _rounded(_gpu_reference(stored, since)), since
            counted += [row[1] for row in nodes + gpus]
        points = history.fleet_points()
        assert points == _points_reference(stored)
        runs = history.newest_runs("accept")
        flagged = 0
        for tolerance, min_samples in ((10.0, 3), (1.0, 1), (30.0, 2), (5.0, 50)):
            view = fleet_state(
                history, tolerance_percent=tolerance, min_samples=min_samples, mtbi_days=30.0
            ).view
            wanted = fleet_view(runs, points, tolerance_percent=tolerance, min_samples=min_samples)
            assert view.outliers == wanted.outliers, (tolerance, min_samples)
            assert view.nodes == wanted.nodes
            flagged += len(wanted.outliers)
    # the rules found something to count in these histories, not only empty answers
    assert any(counted)
    assert flagged
