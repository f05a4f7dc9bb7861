"""SIGTERM (scancel, preemption, an eviction) and SIGINT during `train mnist`: what
finished is written, the run is recorded as INTERRUPTED (never a failure, never a pass), and the
exit is 128 + the signal, as for `accept`."""

from __future__ import annotations

import json
import signal
from pathlib import Path

import pytest

from gpuaccept.store.history import History
from tests.signal_runs import start_cli, stop_after

pytestmark = pytest.mark.slow


def test_an_interrupted_training_run_is_recorded_as_interrupted(
    small_tarball: Path, tmp_path: Path
) -> None:
    db = tmp_path / "h.sqlite"
    process = start_cli(
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
    stdout, stderr = stop_after(process, "[TRAIN] epoch", signal.SIGTERM)
    assert process.returncode == 143, stdout + stderr
    assert "Traceback" not in stderr
    assert "[RESULT] INTERRUPTED by SIGTERM during mnist" in stdout
    (report,) = (tmp_path / "reports").iterdir()
    assert json.loads(report.read_text())["verdict"]["outcome"] == "interrupted"
    with History.open(db, create=False) as history:
        (run,) = history.list_runs()
    assert run.verdict.outcome == "interrupted"
