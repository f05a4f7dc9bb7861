"""The suite in its warm workers (CPU mode, real processes): reuse, isolation, replacement,
rank checks across workers, NVML events, and a real SIGTERM in the middle of a check."""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from gpuaccept import suite
from gpuaccept.cli.signals import interrupts_as_exceptions
from gpuaccept.results import CheckResult, Status
from gpuaccept.suite.runner import run_suite
from gpuaccept.suite.selection import LEVELS, CheckSpec
from tests.checks.conftest import cpu_context
from tests.processes import gone, workers_of

ALL = frozenset(LEVELS)


def node(target: str, name: str = "fake") -> CheckSpec:
    return CheckSpec(name, "FAKE", f"tests.faults:{target}", ALL, "node", False)


def device(target: str, name: str = "fake") -> CheckSpec:
    return CheckSpec(name, "FAKE", f"tests.faults:{target}", ALL, "device", False)


def ranks(target: str, name: str = "ranks") -> CheckSpec:
    return CheckSpec(
        name,
        "FAKE",
        f"tests.faults:{target}",
        ALL,
        "ranks",
        False,
        conclude="tests.faults:conclude_values",
    )


def run(specs: list[CheckSpec], timeout: float = 60, **settings: object) -> list[CheckResult]:
    results, _, interrupted = run_suite(specs, cpu_context(**settings), timeout, [])
    assert interrupted is None
    return results


def test_checks_share_one_warm_worker() -> None:
    first, second = run([node("check_reports_pid", "a"), device("check_reports_pid", "b")])
    assert first.status is second.status is Status.PASS
    assert first.details["pid"] == second.details["pid"] != os.getpid()


def test_a_raising_check_is_error_and_the_next_runs_in_a_fresh_worker() -> None:
    before, broken, after = run(
        [
            node("check_reports_pid", "before"),
            node("check_raises", "broken"),
            node("check_reports_pid", "after"),
        ]
    )
    assert broken.status is Status.ERROR
    assert "RuntimeError: injected check failure" in broken.message
    assert after.status is Status.PASS
    assert after.details["pid"] != before.details["pid"]  # replaced: a broken context is not reused


def test_a_dying_check_is_error_and_the_suite_goes_on() -> None:
    died, after = run([node("check_dies", "dies"), node("check_passes")])
    assert died.status is Status.ERROR
    assert "died (exit code 9)" in died.message
    assert after.status is Status.PASS


def test_a_hung_check_times_out_and_its_process_group_is_killed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pid_file = tmp_path / "grandchild.pid"
    monkeypatch.setenv("FAULT_PID_FILE", str(pid_file))
    hung, after = run([node("check_hangs_with_child", "hangs"), node("check_passes")], timeout=4)
    assert hung.status is Status.ERROR
    assert hung.message == "timed out after 4 s"
    assert after.status is Status.PASS
    grandchild = int(pid_file.read_text())
    time.sleep(0.2)
    assert gone(grandchild)


# A suite process whose one check hangs in its worker, after starting a grandchild.
_SUITE_THAT_HANGS = """
from tests.checks.conftest import cpu_context
from tests.suite.test_runner import node
from gpuaccept.suite.runner import run_suite
run_suite([node("check_hangs_with_child", "hangs")], cpu_context(), 600, [])
"""


def test_a_killed_suite_leaves_no_process_even_mid_check(tmp_path: Path) -> None:
    """SIGKILL (the OOM killer, a scheduler's hard stop) gives the suite no chance to stop its
    workers: a worker hung in a check notices by itself and takes its process group with it,
    and the forkserver it came from goes too."""
    pid_file = tmp_path / "grandchild.pid"
    suite_process = subprocess.Popen(
        [sys.executable, "-c", _SUITE_THAT_HANGS],
        cwd=Path(__file__).resolve().parents[2],
        env={**os.environ, "FAULT_PID_FILE": str(pid_file)},
    )
    try:
        deadline = time.monotonic() + 60
        while not pid_file.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        left = workers_of(suite_process.pid, helpers=True)
        workers = workers_of(suite_process.pid)
    finally:
        suite_process.kill()
        suite_process.wait(timeout=60)
    assert len(workers) == 2  # the worker and its grandchild
    assert len(left) > len(workers)  # and the helpers
    deadline = time.monotonic() + 10
    while not all(gone(pid) for pid in left) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert [pid for pid in left if not gone(pid)] == []


def test_a_check_that_needs_the_gpus_idle_runs_with_no_other_worker_alive() -> None:
    """DCGM's diagnostic must not share the GPUs with our workers' CUDA contexts: the suite stops
    them (after collecting their events), runs the check in a worker that owns no GPU, and the
    checks after it get fresh workers."""
    idle = CheckSpec(
        "idle", "FAKE", "tests.faults:check_lists_other_workers", ALL, "node", False, gpus_idle=True
    )
    before_ranks, before, during, after = run(
        [ranks("rank_returns_rank"), node("check_reports_pid"), idle, node("check_reports_pid")]
    )
    assert before_ranks.status is Status.PASS  # two workers were up before
    assert during.status is Status.PASS, during.message
    assert during.details["others"] == []
    assert len({before.details["pid"], during.details["pid"], after.details["pid"]}) == 3
    assert after.status is Status.PASS


def test_rank_checks_use_the_workers_as_ranks() -> None:
    (result,) = run([ranks("rank_returns_rank")])
    assert result.status is Status.PASS, result.message
    assert result.message == "2 gloo ranks"
    assert result.details["values"] == [300, 301]  # all-reduced 1 + 2, then each rank's own


def test_a_rank_that_raises_fails_the_group_with_its_message() -> None:
    (result,) = run([ranks("rank_raises_on_rank1")], rank_timeout_seconds=20.0)
    assert result.status is Status.FAIL
    assert "rank 1: raised RuntimeError: injected rank failure" in result.message


def test_a_hung_rank_is_killed_and_the_check_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    started = time.monotonic()
    (result, after) = run(
        [ranks("rank_hangs_on_rank1"), node("check_passes")], timeout=6, rank_timeout_seconds=3.0
    )
    assert result.status is Status.FAIL
    assert "rank 1" in result.message
    assert time.monotonic() - started < 40
    assert after.status is Status.PASS  # fresh workers after the hung group was killed


def test_the_real_collectives_and_ddp_checks_pass_across_two_workers() -> None:
    specs = [s for s in suite.CHECKS if s.name in ("collectives", "ddp")]
    results = run(specs)
    assert [r.status for r in results] == [Status.PASS, Status.PASS], [r.message for r in results]
    assert "2 gloo rank(s)" in results[0].message


def test_device_checks_merge_per_device_results() -> None:
    spec = device("check_passes")
    parts = {
        "gpu0": CheckResult(name="x", area="X", status=Status.PASS, message="ok"),
        "gpu1": CheckResult(name="x", area="X", status=Status.FAIL, message="gpu1: slow"),
        "gpu2": CheckResult(name="x", area="X", status=Status.ERROR, message="timed out"),
    }
    merged = suite.merge_device_results(spec, parts, 2.5)
    assert merged.status is Status.FAIL
    assert merged.message == "gpu1: slow"
    assert merged.duration_seconds == 2.5
    assert set(merged.details["per_device"]) == {"gpu0", "gpu1", "gpu2"}
    healthy = {k: parts["gpu0"] for k in ("gpu0", "gpu1")}
    assert suite.merge_device_results(spec, healthy, 1.0).message == "2 devices: ok"
    errors = {"gpu0": parts["gpu0"], "gpu2": parts["gpu2"]}
    assert suite.merge_device_results(spec, errors, 1.0).message == "gpu2: timed out"


def test_sigterm_in_a_check_kills_workers_and_keeps_what_finished(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    specs = [node("check_passes", "first"), node("check_hangs", "second"), node("check_passes")]
    started = tmp_path / "second-started"
    monkeypatch.setenv("FAULT_STARTED_FILE", str(started))
    seen_pids: list[int] = []
    before = set(workers_of(os.getpid()))

    def deliver() -> None:
        deadline = time.monotonic() + 60
        while not started.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        seen_pids.extend(set(workers_of(os.getpid())) - before)
        os.kill(os.getpid(), signal.SIGTERM)

    threading.Thread(target=deliver, daemon=True).start()
    with interrupts_as_exceptions():
        results, _, interrupted = run_suite(specs, cpu_context(), 120, [])
    assert interrupted is not None
    assert interrupted.error.exit_code == 143
    assert interrupted.check == specs[1].name  # the check under way, not a failed one
    assert [r.status for r in results] == [Status.PASS, Status.ERROR, Status.SKIP], results
    assert results[1].message == "interrupted by SIGTERM"
    assert results[2].message == "not run: the run was interrupted by SIGTERM"
    assert seen_pids  # the workers existed...
    time.sleep(0.2)
    assert all(gone(pid) for pid in seen_pids)  # ...and are gone


@pytest.mark.parametrize("gpus_idle", [False, True])
def test_nvml_events_are_caught_with_the_check_that_was_running(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, gpus_idle: bool
) -> None:
    """Also while the GPU workers are stopped for a check such as DCGM's: the worker that owns
    no GPU watches them all meanwhile."""
    started = tmp_path / "burn-started"
    scenario = {
        "gpus": [{"uuid": "GPU-fake-0", "name": "NVIDIA H100 80GB HBM3"}],
        "events": [{"gpu": 0, "type": "xid", "data": 79, "after_file": str(started)}],
    }
    (tmp_path / "nvml.json").write_text(json.dumps(scenario))
    monkeypatch.setenv("FAULT_STARTED_FILE", str(started))
    monkeypatch.setenv("GPUACCEPT_NVML_MODULE", "tests.fake_nvml")
    monkeypatch.setenv("FAKE_NVML_SCENARIO", str(tmp_path / "nvml.json"))
    burn = dataclasses.replace(node("check_sleeps", "burn"), gpus_idle=gpus_idle)
    _, events, _ = run_suite([burn], cpu_context(), 60, [])
    (event,) = events
    assert (event.kind, event.xid, event.gpu_uuid, event.during) == (
        "xid",
        79,
        "GPU-fake-0",
        "burn",
    )
    assert event.fails_node
    assert "fallen off the bus" in event.describe()


class _SignalInAFinalizer:
    """Delivers SIGTERM while Python runs this object's finalizer: the handler's exception is
    raised there and lost ("Exception ignored in ..."), as seen in CI at accept's start-up."""

    def __del__(self) -> None:
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(0.05)  # the handler runs here, inside the finalizer


@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
def test_a_signal_whose_exception_was_lost_stops_the_run_at_the_next_check() -> None:
    specs = [node("check_passes", "first"), node("check_passes", "second")]
    # nested, as `accept --json` nests them: the signal came before the inner block began
    with interrupts_as_exceptions():
        _SignalInAFinalizer()  # collected at once: the exception goes nowhere
        with interrupts_as_exceptions():
            results, _, interrupted = run_suite(specs, cpu_context(), 60, [])
    assert interrupted is not None
    assert interrupted.error.exit_code == 143
    assert [r.message for r in results] == ["not run: the run was interrupted by SIGTERM"] * 2


@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
def test_a_signal_lost_during_the_last_check_still_ends_the_run_interrupted() -> None:
    specs = [node("check_passes", "only")]

    class Losing:
        def started(self, spec: CheckSpec, labels: list[str]) -> None:
            pass

        def note(self, text: str) -> None:
            pass

        def finished(self, result: CheckResult) -> None:
            _SignalInAFinalizer()

    with interrupts_as_exceptions():
        results, _, interrupted = run_suite(specs, cpu_context(), 60, [], Losing())  # type: ignore[arg-type]
    assert interrupted is not None
    assert [r.status for r in results] == [Status.PASS]  # what finished is kept


def test_a_signal_while_workers_start_leaves_every_started_worker_in_the_pool(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A worker started but not yet in the pool is one its close never ends: the signal that lands
    while the pool starts its workers is raised after they are all in it."""
    import os
    import signal

    from gpuaccept import interrupts
    from gpuaccept.cli.signals import interrupts_as_exceptions
    from gpuaccept.errors import Interrupted
    from gpuaccept.suite import pool

    started: list[int] = []

    class Started:
        def __init__(self, spec: object) -> None:
            started.append(len(started))
            if len(started) == 1:
                os.kill(os.getpid(), signal.SIGTERM)  # as the first worker starts

    monkeypatch.setattr(pool, "_Worker", Started)
    workers = pool.WorkerPool("cpu", [])
    try:
        with pytest.raises(Interrupted), interrupts_as_exceptions():
            workers.start([0, 1, 2])
    finally:
        interrupts.clear()
    assert started == [0, 1, 2]
    assert workers.live_slots() == [0, 1, 2]  # so the pool's close ends all three
