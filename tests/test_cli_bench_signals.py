"""SIGTERM (scancel, preemption, an eviction) and SIGINT during `bench`: what
finished is written, the run is recorded as INTERRUPTED (never a failure, never a pass), and the
exit is 128 + the signal, as for `accept`."""

from __future__ import annotations

import json
import shutil
import signal
import tempfile
import time
from pathlib import Path

import pytest

from gpuaccept.store.history import History
from tests.processes import gone, workers_of
from tests.signal_runs import start_cli, stop_after

pytestmark = pytest.mark.slow


@pytest.mark.parametrize(("signum", "code"), [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_an_interrupted_bench_writes_its_report_and_history(
    tmp_path: Path, request: pytest.FixtureRequest, signum: int, code: int
) -> None:
    db, out = tmp_path / "h.sqlite", tmp_path / "bench.json"
    # its own temporary directory, so what is left there is its own; short, so the forkserver
    # (whose leftovers this looks for) is used: under pytest's deep one, ranks are spawned
    scratch = Path(tempfile.mkdtemp(dir="/tmp", prefix="ga-bench-"))
    request.addfinalizer(lambda: shutil.rmtree(scratch, ignore_errors=True))
    process = start_cli(
        "bench",
        "collectives",
        "--device",
        "cpu",
        # a sweep far longer than the test waits: however late the line is read on a loaded
        # machine, the benchmark is still running when the signal comes
        "-e",
        "1G",
        "--json",
        str(out),
        "--history",
        str(db),
        env={"TMPDIR": str(scratch)},
    )
    ranks: list[int] = []

    def note_ranks() -> None:  # wait until both ranks run (they start after the header)
        deadline = time.monotonic() + 60  # the forkserver imports torch first: slow when loaded
        while len(ranks) < 2 and time.monotonic() < deadline:
            ranks[:] = workers_of(process.pid)
            time.sleep(0.05)
        # a rank still starting when the run ends printed a forkserver traceback ("No such file
        # or directory", once, under load): the signal comes once both ranks have started
        time.sleep(0.5)

    # the header comes first; the ranks are seen running before the signal is sent
    stdout, stderr = stop_after(process, "[BENCH] collectives all_reduce", signum, note_ranks)
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
    time.sleep(0.5)
    assert all(gone(pid) for pid in ranks)  # ranks, forkserver, resource tracker: none left
    assert sorted(scratch.iterdir()) == []  # no rank directory, no pymp-* left behind
