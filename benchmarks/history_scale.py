#!/usr/bin/env python3
"""The history's cost at fleet scale (issue #33 §2): load N accept runs of M nodes with G GPUs
each into the SQLite history, then time the commands an operator runs and their peak memory,
each in its own process (as the CLI runs): `history fleet`, `history list --node`,
`history gpu UUID`, `report RUN --html`.

Usage: benchmarks/history_scale.py [--runs 200000] [--nodes 1000] [--gpus 8]
        [--db PATH | --db postgresql://USER@HOST:PORT/DB] [--keep]
        (an existing --db with as many runs is reused, not loaded again; a PostgreSQL --db
        takes its password from PGPASSFILE/~/.pgpass as gpuaccept does)

Prints one line per command: seconds, peak RSS (MiB), and the database's size. The reports are
made as a run stores them (RunReport.completed: verdict and actions planned), one in 50 failing a
GPU's health check (reset-gpu, naming the GPU), with a full environment capture.
"""

from __future__ import annotations

import argparse
import os
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
# for, so each command is measured by a parent of its own.
_MEASURE = (
    "import resource, subprocess, sys; "
    "done = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL); "
    "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, done.returncode)"
)


def timed(command: list[str]) -> tuple[float, float, int]:
    """(seconds, peak RSS MiB, exit status) of one CLI command in a process of its own."""
    began = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-c", _MEASURE, sys.executable, "-m", "gpuaccept", *command],
        capture_output=True,
        text=True,
        check=True,
    )
    seconds = time.monotonic() - began
    peak_kib, code = done.stdout.split()
    return seconds, int(peak_kib) / 1024, int(code)


def queries(history: object, newest: int) -> None:
    """The store's own queries, in this process (what a command costs past its start-up)."""
    from gpuaccept.store.history import History

    assert isinstance(history, History)

    def fleet() -> None:
        # what `history fleet` computes, with its defaults (10%, 3 GPUs, 30 days)
        from gpuaccept.compare.fleet import fleet_state

        fleet_state(history, tolerance_percent=10.0, min_samples=3, mtbi_days=30.0)

    for what, call in (
        ("list --node (query)", lambda: history.list_runs(node="node00042", limit=20)),
        ("gpu UUID (query)", lambda: history.gpu_runs("GPU-00042-3-0000-0000-000000000000")),
        ("report RUN (read)", lambda: history.report(newest)),
        ("fleet (queries)", fleet),
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
    args = parser.parse_args()
    scratch = tempfile.mkdtemp(prefix="gpuaccept-history-scale-")
    from gpuaccept.store.history import History, PgLocation, as_location

    db = as_location(args.db or str(Path(scratch) / "history.sqlite"))
    existing = 0
    if isinstance(db, PgLocation) or db.exists():
        with History.open(db) as history:
            existing = history.count()
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
