"""SIGTERM (scancel, preemption, an eviction) and SIGINT during `train mnist`: what
finished is written, the run is recorded as INTERRUPTED (never a failure, never a pass), and the
exit is 128 + the signal, as for `accept`."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from gpuaccept.record.history import History

pytestmark = pytest.mark.slow


def _start(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "gpuaccept", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _stop_after(process: subprocess.Popen[str], prefix: str, signum: int) -> tuple[str, str]:
    """Read until a line starts with `prefix`, send `signum`, return the rest of the output."""
    assert process.stdout is not None
    watchdog = threading.Timer(120, process.kill)
    watchdog.start()
    seen = []
    try:
        for line in process.stdout:
            seen.append(line)
            if line.startswith(prefix):
                process.send_signal(signum)
                break
        rest, errors = process.communicate(timeout=90)
    finally:
        watchdog.cancel()
    return "".join(seen) + rest, errors


def test_an_interrupted_training_run_is_recorded_as_interrupted(
    small_tarball: Path, tmp_path: Path
) -> None:
    db = tmp_path / "h.sqlite"
    process = _start(
        "train",
        "mnist",
        "--device",
        "cpu",
        "--data",
        str(small_tarball),
        "--epochs",
        "50",
        "--history",
        str(db),
        "--report-dir",
        str(tmp_path / "reports"),
    )
    stdout, stderr = _stop_after(process, "[TRAIN] epoch", signal.SIGTERM)
    assert process.returncode == 143, stdout + stderr
    assert "Traceback" not in stderr
    assert "[RESULT] INTERRUPTED by SIGTERM during mnist" in stdout
    (report,) = (tmp_path / "reports").iterdir()
    assert json.loads(report.read_text())["verdict"]["outcome"] == "interrupted"
    with History.open(db, create=False) as history:
        (run,) = history.list_runs()
    assert run.verdict.outcome == "interrupted"
