"""SIGTERM (scancel, preemption, an eviction) and SIGINT during `train llm`: its ranks are ended,
what is known is written, the run is recorded as INTERRUPTED (never a failure, never a pass), and
the exit is 128 + the signal, as for `accept` and `train mnist`."""

from __future__ import annotations

import json
import signal
import time
import uuid
from pathlib import Path

import pytest

from gpuaccept.store.history import History
from tests.cpu_turns import cpu_turn
from tests.signal_runs import start_cli, stop_after

pytestmark = pytest.mark.slow


def _processes_with(marker: str) -> list[int]:
    """Live processes whose environment holds `marker` (everything the CLI starts inherits it)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if marker.encode() in (entry / "environ").read_bytes():
                found.append(int(entry.name))
        except OSError:
            continue
    return found


def _command(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


def _ranks(marker: str, cli: int) -> list[int]:
    """The rank processes among them: children of the forkserver (spawned ones: the CLI's, run
    through spawn_main), not multiprocessing's resource tracker or the server itself."""
    ranks = []
    for pid in _processes_with(marker):
        try:
            command = Path(f"/proc/{pid}/cmdline").read_bytes()
            parent = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        if pid == cli or b"resource_tracker" in command:
            continue
        if b"spawn_main" in command or parent != cli:
            ranks.append(pid)
    return ranks


@pytest.mark.parametrize(
    "when",
    [
        # both ranks are running: an end-to-end run of ~30 s, in the long runs' step of CI
        pytest.param("training", marks=pytest.mark.service),
        "starting",  # as the ranks start: one cut in two was left to die with a traceback
    ],
)
def test_an_interrupted_llm_run_is_recorded_as_interrupted_and_leaves_no_process(
    tmp_path: Path, when: str
) -> None:
    marker = f"GPUACCEPT_TEST_MARK={uuid.uuid4().hex}"
    key, value = marker.split("=")
    db = tmp_path / "h.sqlite"
    with cpu_turn():
        process = start_cli(
            "train", "llm", "--device", "cpu", "--steps", "100000", "--history", str(db),
            "--report-dir", str(tmp_path / "reports"), env={key: value},
        )  # fmt: skip
        seen: list[int] = []

        def ranks_running() -> None:
            deadline = time.monotonic() + 60
            while len(seen) < 2 and time.monotonic() < deadline:
                seen[:] = _ranks(marker, process.pid)
                time.sleep(0.1)

        def ranks_starting() -> None:
            # the forkserver is up: the ranks are being forked from it now
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline and not any(
                b"multiprocessing.forkserver" in _command(pid) for pid in _processes_with(marker)
            ):
                time.sleep(0.02)

        waiting = ranks_running if when == "training" else ranks_starting
        stdout, stderr = stop_after(process, "[TRAIN] llm tiny", signal.SIGTERM, waiting)
    if when == "training":
        assert len(seen) >= 2, "the rank processes were never seen"
    assert process.returncode == 143, stdout + stderr
    assert "Traceback" not in stderr, stderr
    assert "[RESULT] INTERRUPTED by SIGTERM during workload" in stdout
    (report,) = (tmp_path / "reports").iterdir()
    written = json.loads(report.read_text())
    assert written["verdict"]["outcome"] == "interrupted"
    assert written["command"] == "train-llm"
    assert written["verdict"]["interrupted_check"] == "workload"
    with History.open(db, create=False) as history:
        (run,) = history.list_runs()
    assert run.verdict.outcome == "interrupted"
    # nothing the command started outlives it (a rank would hold both cores for 100,000 steps)
    deadline = time.monotonic() + 10
    while _processes_with(marker) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert _processes_with(marker) == []


def test_a_signal_whose_exception_was_lost_ends_the_ranks_wait(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A SIGTERM whose exception Python lost (raised in a finalizer, as seen in CI for accept):
    the handler noted it, and the wait for the ranks ends at once, INTERRUPTED, exit 143, instead
    of training for the whole plan."""
    from typer.testing import CliRunner

    from gpuaccept import interrupts
    from gpuaccept.cli import app

    monkeypatch.delenv("WORLD_SIZE", raising=False)
    interrupts.note(signal.SIGTERM)  # as the handler leaves it when its exception is lost
    started = time.monotonic()
    try:
        with cpu_turn():
            result = CliRunner().invoke(
                app,
                ["train", "llm", "--device", "cpu", "--steps", "100000", "--no-history",
                 "--report-dir", str(tmp_path)],
            )  # fmt: skip
    finally:
        interrupts.clear()
    assert result.exit_code == 143, result.output
    assert time.monotonic() - started < 60  # 100,000 steps would take hours
    assert "INTERRUPTED by SIGTERM" in result.stdout
    (report,) = tmp_path.glob("*.json")
    assert json.loads(report.read_text())["verdict"]["interrupted_by"] == "SIGTERM"


def test_ranks_a_signal_ended_are_an_interruption_not_a_failure(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A scheduler signals the whole job: the ranks die of it and the wait reports them dead. If
    the parent's own exception was lost, that must read as the interruption, not as a failed
    workload (exit 1, a node judged broken)."""
    from gpuaccept import interrupts
    from gpuaccept.checks import workload
    from gpuaccept.checks.context import CheckContext
    from gpuaccept.distributed.local_ranks import RanksFailed
    from gpuaccept.errors import Interrupted
    from gpuaccept.references import load_shipped_references
    from gpuaccept.suite import level_settings

    def died(*_: object) -> list[object]:
        raise RanksFailed("rank process died without a result (rank 0 exit -15)")

    monkeypatch.setattr(workload, "run_ranks", died)
    context = CheckContext(
        level="quick",
        device_mode="cpu",
        settings=level_settings("quick", "cpu"),
        references=load_shipped_references(),
    )
    assert workload.run(context).status.is_failure  # no signal: the deaths fail the check
    interrupts.note(signal.SIGTERM)
    try:
        with pytest.raises(Interrupted) as raised:
            workload.run(context)
    finally:
        interrupts.clear()
    assert raised.value.signum == signal.SIGTERM
