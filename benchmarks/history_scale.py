#!/usr/bin/env python3
"""The history's cost at fleet scale (issue #33 §2, issue #53 §3): load N accept runs of M nodes
with G GPUs each into the history, then time the commands an operator runs and their peak
memory, each in its own process (as the CLI runs): `history fleet --json`, the fleet's page
(`report --fleet --html`), `history list --node`, `history gpu UUID`, `report RUN --html`.

Usage: benchmarks/history_scale.py [--runs 200000] [--nodes 1000] [--gpus 8]
        [--db PATH | --db postgresql://USER@HOST:PORT/DB] [--keep]
        [--old-tree DIR] [--fleet-only] [--append-ab RUNS]
        (an existing --db with as many runs is reused, not loaded again; a PostgreSQL --db
        takes its password from PGPASSFILE/~/.pgpass as gpuaccept does)

--old-tree DIR: a checkout of the code before (`git worktree add /tmp/old COMMIT`): its
`history fleet --json` and fleet page are timed beside this tree's, in the same run, on a copy
of the history made before this tree first opened it (an older schema that this tree upgrades
in place: FILE.old beside an SQLite file, DB_old on the same PostgreSQL server, made by
CREATE DATABASE ... TEMPLATE). Load a new history with the old tree's own copy of this script,
so that it is written as the old code writes it; this tree then times its upgrade.

--append-ab RUNS: the appends' cost instead: RUNS runs into fresh histories (batches of 1,000,
then one run per append for a tenth of them), this tree and the old one alternated, twice (or
--repeat times).

Prints one line per command: seconds, peak RSS (MiB), exit status, and what it wrote; the
reports are made as a run stores them (RunReport.completed: verdict and actions planned), one
in 50 failing a GPU's health check (reset-gpu, naming the GPU), with a full environment capture.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path


def _report(node: int, gpus: int, run: int, at: datetime) -> object:
    from gpuaccept.results import (
        CheckResult,
        Measurement,
        Reference,
        RunReport,
        Status,
        Verdict,
    )

    reference = Reference(value=800.0, lower_fraction=0.8, unit="TFLOPS", source="bench")
    model = "NVIDIA H100 80GB HBM3"
    uuids = [f"GPU-{node:05d}-{i}-0000-0000-000000000000" for i in range(gpus)]
    failing = run % 50 == 7
    measurements = [
        Measurement(
            name=name,
            value=value * (1 + 0.01 * ((node + i + run) % 5)),
            unit=unit,
            device_index=i,
            device_name=model,
            reference=reference if unit == "TFLOPS" else None,
            reference_model=model,
            verdict=reference.judge(value) if unit == "TFLOPS" else Verdict.UNCHECKED,
        )
        for i in range(gpus)
        for name, value, unit in (
            ("matmul_bf16_tflops", 760.0, "TFLOPS"),
            ("membw_copy_gbps", 3000.0, "GB/s"),
        )
    ]
    findings = (
        [
            {
                "status": "fail",
                "text": "gpu3: row remapping pending",
                "kind": "cause",
                "code": "remap-pending",
                "gpu": uuids[3 % gpus],
            }
        ]
        if failing
        else []
    )
    checks = [
        CheckResult(
            name="compute",
            area="COMPUTE",
            status=Status.PASS,
            message="ok",
            duration_seconds=1.0,
            measurements=[m for m in measurements if m.unit == "TFLOPS"],
        ),
        CheckResult(
            name="memory",
            area="MEMORY",
            status=Status.PASS,
            message="ok",
            measurements=[m for m in measurements if m.unit == "GB/s"],
        ),
        CheckResult(
            name="health",
            area="HEALTH",
            status=Status.FAIL if failing else Status.PASS,
            message="gpu3: row remapping pending" if failing else "ok",
            details={"findings": findings} if failing else {},
        ),
    ]
    environment = {
        "system": {"hostname": f"node{node:05d}", "machine_id": f"{node:032x}"},
        "torch": {"version": "2.13.0"},
        "gpus": [
            {"index": i, "name": model, "uuid": uuid, "serial": f"SN{node:05d}{i}"}
            for i, uuid in enumerate(uuids)
        ],
        "packages": [{"name": f"package-{k}", "version": "1.0"} for k in range(120)],
    }
    report = RunReport.completed(
        command="accept",
        level="quick",
        device_mode="cuda",
        started=at,
        monotonic_start=time.monotonic(),
        checks=checks,
        environment=environment,
    )
    return report.model_copy(
        update={
            "finished_at": (at + timedelta(minutes=1)).isoformat(),
            "duration_seconds": 60.0,
        }
    )


def load(db: object, runs: int, nodes: int, gpus: int) -> float:
    from gpuaccept.store.history import History

    start = datetime(2026, 10, 1, tzinfo=UTC)
    began = time.monotonic()
    batch: list[tuple[object, str]] = []
    with History.open(db) as history:  # type: ignore[arg-type]
        for run in range(runs):
            node = run % nodes
            at = start + timedelta(minutes=run * 43200 / runs)  # 30 days of runs
            batch.append((_report(node, gpus, run // nodes, at), "bench"))
            if len(batch) == 1000:
                history.append(batch)  # type: ignore[arg-type]
                batch = []
                print(f"  loaded {run + 1} runs", file=sys.stderr, end="\r")
        if batch:
            history.append(batch)  # type: ignore[arg-type]
    return time.monotonic() - began


# A fresh parent per command: RUSAGE_CHILDREN's peak is the largest child a process ever waited
# for, so each command is measured by a parent of its own. Its stdout goes to the file argv[1].
_MEASURE = (
    "import resource, subprocess, sys; "
    "done = subprocess.run(sys.argv[2:], stdout=open(sys.argv[1], 'wb'), "
    "stderr=subprocess.DEVNULL); "
    "used = resource.getrusage(resource.RUSAGE_CHILDREN); "
    "print(used.ru_maxrss, done.returncode, used.ru_utime + used.ru_stime)"
)


def timed(
    command: list[str], tree: Path | None = None, stdout: str = os.devnull
) -> tuple[float, float, int]:
    """(seconds, peak RSS MiB, exit status) of one CLI command in a process of its own, run by
    the code of `tree` (None: this one), its stdout written to `stdout`. Its CPU seconds (user
    and system, all its threads) are kept in CPU_SECONDS: on a machine others share, the work a
    command does, where its wall time is mostly waiting for a core (a PostgreSQL server's work
    is not in it)."""
    env = dict(os.environ)
    if tree is not None:
        env["PYTHONPATH"] = str(tree / "src")  # ahead of the editable install of this tree
    began = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-c", _MEASURE, stdout, sys.executable, "-m", "gpuaccept", *command],
        capture_output=True,
        text=True,
        check=True,
        env=env,
    )
    seconds = time.monotonic() - began
    peak_kib, code, cpu = done.stdout.split()
    CPU_SECONDS[0] = float(cpu)
    return seconds, int(peak_kib) / 1024, int(code)


CPU_SECONDS = [0.0]  # the last timed command's


def _size(path: Path) -> int:
    """Bytes of a file, or of every file in a directory."""
    if path.is_dir():
        return sum(p.stat().st_size for p in path.iterdir())
    return path.stat().st_size if path.exists() else 0


def fleet_side_by_side(
    db: object, old_db: object | None, old_tree: Path | None, scratch: Path
) -> None:
    """`history fleet --json` and the fleet's page, by the old tree (on its copy) and this one."""
    trees: list[tuple[str, Path | None, object]] = [("new", None, db)]
    if old_tree is not None and old_db is not None:
        trees.insert(0, ("old", old_tree, old_db))
    for name, tree, where in trees:
        out = scratch / f"fleet-{name}.json"
        seconds, peak, code = timed(
            ["history", "fleet", "--history", str(where), "--json"], tree, str(out)
        )
        print(
            f"{name} history fleet --json   {seconds:6.2f} s  CPU {CPU_SECONDS[0]:5.2f} s  "
            f"peak RSS {peak:5.0f} MiB  "
            f"exit {code}  {_size(out) / 1e6:6.2f} MB of JSON"
        )
        page = scratch / f"fleet-{name}.html"
        seconds, peak, code = timed(
            ["report", "--fleet", "--history", str(where), "--html", str(page)], tree
        )
        pages = page.with_name(page.name + ".nodes")
        print(
            f"{name} report --fleet --html  {seconds:6.2f} s  CPU {CPU_SECONDS[0]:5.2f} s  "
            f"peak RSS {peak:5.0f} MiB  "
            f"exit {code}  page {_size(page) / 1e6:5.2f} MB"
            + (
                f", {_size(pages) / 1e6:5.2f} MB in {len(list(pages.iterdir()))} page files"
                if pages.is_dir()
                else ""
            )
        )


def _schema(db: object) -> int:
    """The schema version of an existing history, read without opening it as gpuaccept does
    (which would upgrade it); 0 for an empty PostgreSQL database."""
    from gpuaccept.store.history import PgLocation

    if isinstance(db, PgLocation):
        import psycopg

        with psycopg.connect(db.uri) as connection:
            table = connection.execute("SELECT to_regclass('gpuaccept_history')").fetchone()
            if not table or table[0] is None:
                return 0
            row = connection.execute(
                "SELECT value FROM gpuaccept_history WHERE key = 'schema_version'"
            ).fetchone()
        return int(row[0]) if row else 0
    import sqlite3

    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as connection:
        return int(connection.execute("PRAGMA user_version").fetchone()[0])


def old_copy(db: object, *, make: bool) -> object | None:
    """The old tree's copy of the history: made now if it is not there yet and `make` (the
    history is still at the old tree's schema); None where there is none."""
    from gpuaccept.store.history import PgLocation

    if isinstance(db, PgLocation):
        import psycopg

        base, _, name = db.uri.rpartition("/")
        copy = PgLocation(f"{base}/{name}_old")
        with psycopg.connect(f"{base}/postgres", autocommit=True) as connection:
            exists = connection.execute(
                "SELECT 1 FROM pg_database WHERE datname = %s", (f"{name}_old",)
            ).fetchone()
            if not exists and not make:
                return None
            if not exists:
                began = time.monotonic()
                connection.execute(f'CREATE DATABASE "{name}_old" TEMPLATE "{name}"')
                print(f"copied the history for the old tree in {time.monotonic() - began:.0f} s")
        return copy
    copy = Path(f"{db}.old")
    if not copy.exists() and not make:
        return None
    if not copy.exists():
        began = time.monotonic()
        shutil.copyfile(str(db), copy)
        print(f"copied the history for the old tree in {time.monotonic() - began:.0f} s")
    return copy


def append_ab(
    runs: int, nodes: int, gpus: int, old_tree: Path, pg: str | None, rounds: int = 2
) -> None:
    """RUNS runs into fresh histories by each tree, alternated, `rounds` times: runs per
    second."""
    here = Path(__file__).resolve()
    for round_ in range(1, rounds + 1):
        for name, tree in (("old", old_tree), ("new", here.parent.parent)):
            env = {**os.environ, "PYTHONPATH": str(tree / "src")}
            scratch = tempfile.mkdtemp(prefix="gpuaccept-append-")
            db = str(Path(scratch) / "h.sqlite")
            if pg is not None:
                import psycopg

                base, _, _ = pg.rpartition("/")
                name_db = f"append_{name}_{round_}_{os.getpid()}"
                with psycopg.connect(f"{base}/postgres", autocommit=True) as connection:
                    connection.execute(f'DROP DATABASE IF EXISTS "{name_db}"')
                    connection.execute(f'CREATE DATABASE "{name_db}"')
                db = f"{base}/{name_db}"
            done = subprocess.run(
                [
                    sys.executable,
                    str(here),
                    "--load-only",
                    "--db",
                    db,
                    "--runs",
                    str(runs),
                    "--nodes",
                    str(nodes),
                    "--gpus",
                    str(gpus),
                ],
                capture_output=True,
                text=True,
                check=True,
                env=env,
            )
            print(f"round {round_} {name}: {done.stdout.strip()}")
            shutil.rmtree(scratch, ignore_errors=True)


def load_single(db: object, runs: int, nodes: int, gpus: int) -> float:
    """Runs stored one per append (as nodes do), each its node's newest: seconds."""
    from gpuaccept.store.history import History

    start = datetime(2026, 11, 1, tzinfo=UTC)  # after load()'s 30 days
    began = time.monotonic()
    with History.open(db) as history:  # type: ignore[arg-type]
        for run in range(runs):
            at = start + timedelta(minutes=run)
            history.append([(_report(run % nodes, gpus, 1000 + run // nodes, at), "bench")])  # type: ignore[list-item]
    return time.monotonic() - began


def queries(history: object, newest: int) -> None:
    """The store's own queries, in this process (what a command costs past its start-up)."""
    from gpuaccept.store.history import History

    assert isinstance(history, History)

    def fleet() -> None:
        # what `history fleet` computes, with its defaults (10%, 3 GPUs, 30 days)
        from gpuaccept.compare.fleet import fleet_state

        fleet_state(history, tolerance_percent=10.0, min_samples=3, mtbi_days=30.0)

    def page() -> None:
        # what the fleet's page reads: the same, with each model's distributions counted
        from gpuaccept.compare.fleet import fleet_state

        fleet_state(
            history, tolerance_percent=10.0, min_samples=3, mtbi_days=30.0, distributions=True
        )

    for what, call in (
        ("list --node (query)", lambda: history.list_runs(node="node00042", limit=20)),
        ("gpu UUID (query)", lambda: history.gpu_runs("GPU-00042-3-0000-0000-000000000000")),
        ("report RUN (read)", lambda: history.report(newest)),
        ("fleet (queries)", fleet),
        ("fleet page (queries)", page),
    ):
        began = time.monotonic()
        call()
        print(f"{what:<22} {time.monotonic() - began:7.3f} s")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=200_000)
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--gpus", type=int, default=8)
    parser.add_argument("--db", help="an SQLite file or a postgresql:// URI")
    parser.add_argument("--keep", action="store_true", help="keep the database")
    parser.add_argument("--old-tree", type=Path, help="a checkout of the code before")
    parser.add_argument("--fleet-only", action="store_true", help="time the fleet alone")
    parser.add_argument(
        "--repeat", type=int, default=1, help="time the fleet's commands this many rounds"
    )
    parser.add_argument("--append-ab", type=int, metavar="RUNS", help="time appends instead")
    parser.add_argument("--load-only", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    scratch = tempfile.mkdtemp(prefix="gpuaccept-history-scale-")
    from gpuaccept.store.history import History, PgLocation, as_location

    if args.append_ab:
        if args.old_tree is None:
            parser.error("--append-ab compares with --old-tree")
        rounds = max(2, args.repeat)
        append_ab(args.append_ab, args.nodes, args.gpus, args.old_tree, args.db, rounds)
        return 0
    if args.load_only:  # one tree's appends (--append-ab): batches, then one run per append
        cpu = time.process_time()
        batched = load(as_location(args.db), args.runs, args.nodes, args.gpus)
        batched_cpu, cpu = time.process_time() - cpu, time.process_time()
        single = load_single(as_location(args.db), args.runs // 10, args.nodes, args.gpus)
        single_cpu = time.process_time() - cpu
        # CPU per run as well: on a shared machine the wall rate is mostly the others' load
        print(
            f"{args.runs / batched:6.0f} runs/s in batches of 1,000 "
            f"({1000 * batched_cpu / args.runs:5.2f} ms CPU a run), "
            f"{args.runs // 10 / single:6.1f} runs/s one per append "
            f"({1000 * single_cpu / (args.runs // 10):5.2f} ms CPU a run)"
        )
        return 0
    from gpuaccept.store.history import SCHEMA_VERSION

    db = as_location(args.db or str(Path(scratch) / "history.sqlite"))
    old_db = None
    if args.old_tree is not None and (isinstance(db, PgLocation) or db.exists()):
        old_db = old_copy(db, make=_schema(db) < SCHEMA_VERSION)
    if isinstance(db, PgLocation) or db.exists():
        began = time.monotonic()
        before = _schema(db)
        with History.open(db) as history:
            existing = history.count()
        if 0 < before < SCHEMA_VERSION:
            print(
                f"schema {before} -> {SCHEMA_VERSION}: upgraded when first opened, "
                f"{time.monotonic() - began:.1f} s"
            )
    else:
        existing = 0
    if existing < args.runs:
        seconds = load(db, args.runs - existing, args.nodes, args.gpus)
        print(f"loaded {args.runs - existing} runs in {seconds:.0f} s")
    if isinstance(db, PgLocation):
        import psycopg

        with psycopg.connect(db.uri) as connection:
            row = connection.execute("SELECT pg_database_size(current_database())").fetchone()
        size = (row[0] if row else 0) / 2**20
    else:
        size = db.stat().st_size / 2**20
    print(f"history: {args.runs} runs, {args.nodes} nodes x {args.gpus} GPUs, {size:.0f} MiB")
    with History.open(db, create=False) as history:
        newest = history.list_runs(limit=1)[0].id
        queries(history, newest)
    html = Path(scratch) / "report.html"
    from fresh_bytecode import compile_gpuaccept

    print(compile_gpuaccept())
    if args.old_tree is not None:
        env = {**os.environ, "PYTHONPATH": str(args.old_tree / "src")}
        subprocess.run(
            [
                sys.executable,
                "-c",
                "import compileall, gpuaccept, os; "
                "compileall.compile_dir(os.path.dirname(gpuaccept.__file__), quiet=1)",
            ],
            env=env,
            check=True,
        )
    for round_ in range(args.repeat):  # the trees alternated: a busy spell hits both
        print(f"round {round_ + 1}: load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs")
        fleet_side_by_side(db, old_db, args.old_tree, Path(scratch))
    if args.fleet_only:
        return 0
    commands = [
        ["--version"],  # the interpreter and the CLI's imports alone: every command pays them
        ["history", "list", "--history", str(db), "--node", "node00042", "--limit", "20"],
        ["history", "gpu", "GPU-00042-3-0000-0000-000000000000", "--history", str(db)],
        ["report", str(newest), "--history", str(db), "--html", str(html)],
        ["history", "fleet", "--history", str(db), "--json"],
    ]
    for command in commands:
        seconds, peak, code = timed(command)
        print(
            f"{' '.join(command[:2]):<22} {seconds:7.2f} s  peak RSS {peak:7.0f} MiB  exit {code}"
        )
    if not args.keep and args.db is None and isinstance(db, Path):
        os.unlink(db)
    return 0


if __name__ == "__main__":
    sys.exit(main())
