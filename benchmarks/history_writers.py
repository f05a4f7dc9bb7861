#!/usr/bin/env python3
"""Many writers at once into one history (issue #33 §2): W processes append runs, one run per
transaction as a node's `accept` does, for S seconds; every fifth run is one another writer
also appends (a retry, a second push of one spool). Then every run must be stored exactly once.

Usage: benchmarks/history_writers.py --db postgresql://USER@HOST:PORT/DB [--writers 64]
        [--seconds 60]        (or --db FILE.sqlite: the same on one host's SQLite file)

Prints the runs appended, the distinct runs expected, the runs stored, the appends per second
and each writer's slowest append; exits 1 when a run is lost or stored twice.
"""

from __future__ import annotations

import argparse
import multiprocessing
import sys
import time
from datetime import UTC, datetime, timedelta
from typing import Any


def _writer(db: str, writer: int, seconds: float, start: Any) -> tuple[list[str], float]:
    sys.path.insert(0, "benchmarks")
    from history_scale import _report

    from gpuaccept.store.history import History

    base = datetime(2026, 11, 1, tzinfo=UTC)
    appended: list[str] = []
    slowest = 0.0
    start.wait()
    deadline = time.monotonic() + seconds
    run = 0
    while time.monotonic() < deadline:
        # every fifth run is shared: writer w's run k*5 is also writer (w+1)'s
        shared = run % 5 == 0
        node = 100_000 + (run if shared else writer * 1_000_000 + run)
        report = _report(node, 8, 0, base + timedelta(seconds=run))
        began = time.monotonic()
        with History.open(db) as history:
            history.append([(report, f"writer-{writer}")])  # type: ignore[list-item]
        slowest = max(slowest, time.monotonic() - began)
        appended.append(f"node{node:05d}@{run}")
        run += 1
    return appended, slowest


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", required=True)
    parser.add_argument("--writers", type=int, default=64)
    parser.add_argument("--seconds", type=float, default=60.0)
    args = parser.parse_args()
    from gpuaccept.store.history import History

    with History.open(args.db) as history:
        before = history.count()
    context = multiprocessing.get_context("spawn")
    start = context.Manager().Event()
    with context.Pool(args.writers) as pool:
        jobs = [
            pool.apply_async(_writer, (args.db, w, args.seconds, start))
            for w in range(args.writers)
        ]
        time.sleep(5)  # every writer imported and waiting
        began = time.monotonic()
        start.set()
        results = [job.get(timeout=args.seconds + 600) for job in jobs]
        elapsed = time.monotonic() - began
    appended = [run for runs, _ in results for run in runs]
    expected = len(set(appended))
    with History.open(args.db) as history:
        stored = history.count() - before
    slowest = max(s for _, s in results)
    print(
        f"{args.writers} writers, {elapsed:.0f} s: {len(appended)} appends "
        f"({len(appended) / elapsed:.0f}/s), {expected} distinct runs, {stored} stored; "
        f"slowest append {slowest:.2f} s"
    )
    if stored != expected:
        print(f"LOST OR DUPLICATED: {expected - stored:+d}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
