"""SIGTERM (scancel, preemption, an eviction) and SIGINT during `bench`: what
finished is written, the run is recorded as INTERRUPTED (never a failure, never a pass), and the
exit is 128 + the signal, as for `accept`."""

from __future__ import annotations

import json
import signal
from pathlib import Path

import pytest

from gpuaccept.record.history import History
from tests.processes import gone, workers_of
from tests.signal_runs import start_cli, stop_after

pytestmark = pytest.mark.slow


@pytest.mark.parametrize(("signum", "code"), [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_an_interrupted_bench_writes_its_report_and_history(
    tmp_path: Path, signum: int, code: int
) -> None:
    db, out = tmp_path / "h.sqlite", tmp_path / "bench.json"
    process = start_cli(
        "bench",
        "collectives",
        "--device",
        "cpu",
        "-e",
        "64M",
        "--json",
        str(out),
        "--history",
        str(db),
    )
    ranks: list[int] = []
    stdout, stderr = stop_after(process, "[BENCH] collectives", signum)
    ranks += workers_of(process.pid)
    assert process.returncode == code, stdout + stderr
    assert "Traceback" not in stderr
    name = signal.Signals(signum).name
    assert stdout.rstrip().endswith(
        f"[RESULT] INTERRUPTED by {name} during collectives; no verdict on the rest"
    )
    verdict = json.loads(out.read_text())["verdict"]
    assert (verdict["outcome"], verdict["interrupted_by"]) == ("interrupted", name)
    with History.open(db, create=False) as history:
        (run,) = history.list_runs()
    assert run.verdict.label == "INTERRUPTED (collectives) (CPU mode)"
    assert all(gone(pid) for pid in ranks)
