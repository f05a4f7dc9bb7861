"""The burn-in's checks from its windows: drift judged against the tolerance, nothing judged
without a window, the figures per device on GPUs and per node on the CPU twin."""

from __future__ import annotations

import pytest

from gpuaccept.burnin.checks import burnin_checks, drifts, window_starts
from gpuaccept.burnin.plan import BurnInPlan, BurnInProgress, WindowFigures
from gpuaccept.verdict import Status

PLAN = BurnInPlan.build(6 * 3600, 3600, 4, ["gemm-bf16"])


def _progress(rates: list[float], other: float = 700.0) -> BurnInProgress:
    progress = BurnInProgress(plan=PLAN.fingerprint(), devices=["gpu0", "gpu1"])
    for window, rate in enumerate(rates):
        progress.record(
            WindowFigures(
                window=window,
                stressor="gemm-bf16",
                seconds=3600,
                unit="TFLOPS",
                throughput={"gpu0": other, "gpu1": rate},
            )
        )
    return progress


def test_a_device_that_loses_more_than_the_tolerance_over_the_run_fails_as_drifted() -> None:
    falling = _progress([700, 680, 660, 640, 620, 600])  # the fitted line loses 14.3%
    [steady, fell] = drifts(falling.windows)
    assert steady.change_percent == 0
    assert steady.device == "gpu0"
    assert fell.device == "gpu1"
    assert fell.windows == 6
    assert fell.change_percent == pytest.approx(-20 / 650 * 100 * 5)  # 5 h between first and last
    assert fell.percent_per_hour == pytest.approx(-20 / 650 * 100)
    throughput = burnin_checks(falling, PLAN, device_mode="cuda", straggler_tolerance_percent=10)[2]
    assert throughput.status is Status.FAIL
    assert throughput.message == (
        "gpu1 gemm-bf16 drifted -15.4% over 6 windows (-3.08%/h), more than the 10% tolerance"
    )
    lenient = burnin_checks(falling, PLAN, device_mode="cuda", straggler_tolerance_percent=20)[2]
    assert lenient.status is Status.PASS


def test_two_windows_make_no_trend_to_judge() -> None:
    two = _progress([700, 500])
    [_, fell] = drifts(two.windows)
    assert fell.change_percent < -10
    assert fell.windows == 2
    assert (
        burnin_checks(two, PLAN, device_mode="cuda", straggler_tolerance_percent=10)[2].status
        is Status.PASS
    )


def test_no_window_judged_is_nothing_judged() -> None:
    empty = BurnInProgress(plan=PLAN.fingerprint())
    checks = burnin_checks(empty, PLAN, device_mode="cuda", straggler_tolerance_percent=10)
    assert [c.status for c in checks] == [Status.SKIP] * 3


def test_figures_are_per_gpu_on_gpus_and_per_node_on_the_twin() -> None:
    progress = _progress([690, 710, 700])
    gpu = burnin_checks(
        progress,
        PLAN,
        device_mode="cuda",
        straggler_tolerance_percent=10,
        names={"gpu1": "NVIDIA H100 80GB HBM3"},
    )[2].measurements
    assert [(m.name, m.device_index, m.value, m.device_name) for m in gpu] == [
        ("burnin_gemm_bf16", 0, 700.0, None),
        ("burnin_gemm_bf16", 1, 700.0, "NVIDIA H100 80GB HBM3"),
    ]
    cpu = burnin_checks(progress, PLAN, device_mode="cpu", straggler_tolerance_percent=10)[
        2
    ].measurements
    assert [(m.name, m.device_index, m.value) for m in cpu] == [("burnin_gemm_bf16", None, 700.0)]
    assert window_starts(progress.windows) == [0, 3600, 7200]
