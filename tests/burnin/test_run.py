"""The burn-in's window loop on the CPU twin (three workers standing in for GPUs), with injected
faults: a device with wrong bits, one 20% slower, an XID in window 3, a lost device, an all-reduce
rank with wrong bits. Each fault must be caught in its window, under its stressor, naming its
device; a healthy run must pass."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuaccept.burnin.checks import burnin_checks
from gpuaccept.burnin.plan import BurnInPlan, BurnInProgress, window_seed
from gpuaccept.burnin.run import BurnInSettings, run_burnin
from gpuaccept.burnin.stress import Fault
from gpuaccept.probe.nvml_events import GpuEvent
from gpuaccept.verdict import Status
from tests.cpu_turns import cpu_turn

WINDOW = 0.6
HEALTHY_TOLERANCE = 75.0


def _burnin(windows: int, **settings: object) -> tuple[BurnInProgress, Path | None]:
    from gpuaccept.distributed.children import start_server

    start_server()
    plan = BurnInPlan.build(windows * WINDOW, WINDOW, 3)
    progress = BurnInProgress(plan=plan.fingerprint())
    with cpu_turn():  # judged on timing: never beside the LLM twin's training
        stop = run_burnin(BurnInSettings(plan, "cpu", seed=7, **settings), progress)  # type: ignore[arg-type]
    assert stop is None
    assert [w.window for w in progress.windows] == list(range(windows))
    return progress, None


@pytest.fixture(scope="module")
def faulty() -> BurnInProgress:
    """Six windows (gemm-bf16, gemm-fp32, hbm, host-transfer, all-reduce, gemm-bf16), a fault in
    most of them."""
    progress, _ = _burnin(
        6,
        # the twin's workers share two cores with the rest of the suite: equal workers read up
        # to 21% apart against the node's confirmed best (CI), so the injected straggler is 60%
        # slow and held to 40%
        straggler_tolerance_percent=40.0,
        faults={
            (1, "cpu2"): Fault(flip_bit=True),
            (3, "cpu0"): Fault(die=True),
            (4, "cpu1"): Fault(flip_bit=True),
            (5, "cpu1"): Fault(slow_percent=60.0),
        },
        injected_events={2: [GpuEvent("xid", "GPU-x", "2026-11-24T00:00:00+00:00", xid=79)]},
    )
    return progress


@pytest.fixture(scope="module")
def healthy() -> BurnInProgress:
    # the twin's three workers share two cores with whatever the suite's other worker runs:
    # a healthy worker read 55.8% below the node's confirmed best in a 0.6 s gemm-fp32 window
    # once in CI (fresh clone at b1b7cbd); the straggler rule itself is held to 40% against a
    # 60%-slow worker in `faulty`
    progress, _ = _burnin(5, straggler_tolerance_percent=HEALTHY_TOLERANCE)
    return progress


def test_a_healthy_burn_in_finds_nothing_and_passes(healthy: BurnInProgress) -> None:
    assert [w.stressor for w in healthy.windows] == [
        "gemm-bf16",
        "gemm-fp32",
        "hbm",
        "host-transfer",
        "all-reduce",
    ]
    for number, window in enumerate(healthy.windows):
        assert window.failures == [], window.failures
        assert window.seed == window_seed(7, number)  # the run's --seed 7, new every window
        assert window.digest is not None  # the bits all three workers agreed on
        assert sorted(window.throughput) == ["cpu0", "cpu1", "cpu2"]
        assert all(rate > 0 for rate in window.throughput.values())
    plan = BurnInPlan.build(5 * WINDOW, WINDOW, 3)
    checks = burnin_checks(
        healthy, plan, device_mode="cpu", straggler_tolerance_percent=HEALTHY_TOLERANCE
    )
    assert [c.status for c in checks] == [Status.PASS] * 3
    assert {m.name for m in checks[2].measurements} == {
        "burnin_gemm_bf16",
        "burnin_gemm_fp32",
        "burnin_hbm",
        "burnin_host_transfer",
        "burnin_all_reduce",
    }
    series = checks[2].details["series"]
    assert [round(w["start_seconds"], 3) for w in series] == [
        round(i * WINDOW, 3) for i in range(5)
    ]


def test_a_device_with_wrong_bits_fails_its_window_with_the_row_and_the_reference(
    faulty: BurnInProgress,
) -> None:
    window = faulty.windows[1]
    assert window.stressor == "gemm-fp32"
    assert window.correctness[0].startswith(
        "window 2 (gemm-fp32): cpu2 computed other bits than the majority (cpu0, cpu1), first in "
        "row "
    )
    assert window.correctness[1].startswith(
        "window 2 (gemm-fp32): cpu2 is wrong against the reference (within gamma_K|A||B| of float64"
    )
    assert len(window.correctness) == 2
    assert faulty.windows[0].correctness == []


def test_an_xid_in_window_3_fails_window_3_only(faulty: BurnInProgress) -> None:
    [text] = faulty.windows[2].hardware
    assert text == (
        "window 3 (hbm): NVML event GPU-x: XID 79: GPU has fallen off the bus at "
        "2026-11-24T00:00:00+00:00"
    )
    assert faulty.windows[2].events
    assert "79" in faulty.windows[2].events[0]
    assert all(not w.hardware for i, w in enumerate(faulty.windows) if i not in (2, 3))


def test_a_device_lost_in_a_window_is_named_and_replaced_for_the_next(
    faulty: BurnInProgress,
) -> None:
    window = faulty.windows[3]
    assert window.hardware == [
        "window 4 (host-transfer): cpu0 was lost: worker process died (exit code 70) before "
        "reporting a result"
    ]
    assert sorted(window.throughput) == ["cpu1", "cpu2"]
    assert sorted(faulty.windows[4].throughput) == ["cpu0", "cpu1", "cpu2"]  # a fresh worker


def test_an_all_reduce_rank_with_wrong_bits_is_caught_by_majority_and_exact_sum(
    faulty: BurnInProgress,
) -> None:
    window = faulty.windows[4]
    assert window.stressor == "all-reduce"
    assert window.correctness[0].startswith(
        "window 5 (all-reduce): cpu1 computed other bits than the majority (cpu0, cpu2)"
    )
    assert (
        "cpu1 is wrong against the reference (bit for bit equal to the exact sum)"
        in (window.correctness[1])
    )


def test_a_device_slower_by_60_percent_is_a_straggler_in_its_window(
    faulty: BurnInProgress,
) -> None:
    # The twin's workers share two cores with the rest of the suite: its memory windows can read
    # 10% apart under load and its GEMM windows up to 21% (CI, against the confirmed best), so
    # only the slowed device and the GEMM windows, within the 40% tolerance, are held to exact
    # findings.
    window = faulty.windows[5]
    [text] = [t for t in window.stragglers if "cpu1" in t]
    assert text.startswith("window 6 (gemm-bf16): cpu1 is a straggler, ")
    rates = window.throughput
    others = sorted(v for d, v in rates.items() if d != "cpu1")
    assert rates["cpu1"] < 0.6 * others[0]
    assert faulty.windows[0].stragglers == faulty.windows[1].stragglers == []


def test_the_faulty_run_fails_each_check_for_its_own_findings(faulty: BurnInProgress) -> None:
    plan = BurnInPlan.build(6 * WINDOW, WINDOW, 3)
    correctness, hardware, throughput = burnin_checks(
        faulty, plan, device_mode="cpu", straggler_tolerance_percent=40.0
    )
    assert (correctness.status, hardware.status, throughput.status) == (Status.FAIL,) * 3
    assert len(correctness.details["failures"]) == 4
    assert correctness.message.endswith("(and 1 more: see the details)")
    assert hardware.details["events"] == {"3": faulty.windows[2].events}
    assert set(faulty.windows[5].stragglers) <= set(throughput.details["failures"])


def test_the_ports_counters_are_read_around_every_window(monkeypatch: pytest.MonkeyPatch) -> None:
    reads = []

    def counters() -> dict[str, dict[str, int | None]]:
        reads.append(len(reads))
        # the link goes down once during the second window (after the third read)
        return {"mlx5_0:1": {"link_downed": 0 if len(reads) < 3 else 1}}

    monkeypatch.setattr("gpuaccept.burnin.run.read_port_counters", counters)
    progress, _ = _burnin(2, straggler_tolerance_percent=50.0)
    assert len(reads) == 3  # before the first window, after each
    assert progress.windows[0].hardware == []
    assert progress.windows[1].hardware == [
        "window 2 (gemm-fp32): mlx5_0:1 link_downed grew by 1 in the run"
    ]


@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
def test_a_signal_whose_exception_was_lost_runs_no_window_more() -> None:
    """A SIGTERM whose exception Python lost in a finalizer (seen in CI at accept's start-up):
    the burn-in must stop at the next window, not run its whole plan."""
    import os
    import signal
    import time

    from gpuaccept.cli.signals import interrupts_as_exceptions
    from gpuaccept.distributed.children import start_server

    class SignalInAFinalizer:
        def __del__(self) -> None:
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(0.05)

    start_server()
    plan = BurnInPlan.build(3 * WINDOW, WINDOW, 3)
    progress = BurnInProgress(plan=plan.fingerprint())
    with interrupts_as_exceptions():
        SignalInAFinalizer()
        stop = run_burnin(BurnInSettings(plan, "cpu", seed=7), progress)
    assert stop is not None
    assert stop.error.exit_code == 143
    assert progress.windows == []


def test_the_windows_are_judged_with_the_runs_rules(monkeypatch: pytest.MonkeyPatch) -> None:
    """The loop hands the site's --rules to each window's judging (the limits its counters are
    held to: tests/burnin/test_checkpoint.py), not the built-in tables."""
    from gpuaccept.actions import ActionRules, LimitRow, builtin_rules
    from gpuaccept.burnin import run

    strict = builtin_rules().merged(
        ActionRules.model_validate({"limit": {"nvlink_crc_per_second": LimitRow(value=1)}}),
        "site strict.toml",
    )
    seen: list[object] = []
    judge = run.judge_record

    def spy(*args: object, **kwargs: object):  # type: ignore[no-untyped-def]
        seen.append(args[3] if len(args) > 3 else kwargs.get("rules"))
        return judge(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(run, "judge_record", spy)
    _burnin(1, rules=strict)
    assert seen == [strict]
