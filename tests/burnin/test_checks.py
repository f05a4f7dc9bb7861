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


def _three(rates: list[float], seconds: list[float], **extra: list[list[str]]) -> BurnInProgress:
    progress = BurnInProgress(plan=PLAN.fingerprint(), devices=["gpu0", "gpu1"])
    for window, (rate, length) in enumerate(zip(rates, seconds, strict=True)):
        progress.record(
            WindowFigures(
                window=window,
                stressor="gemm-bf16",
                seconds=length,
                unit="TFLOPS",
                throughput={"gpu0": 700.0, "gpu1": rate},
                **{k: v[window] for k, v in extra.items()},  # type: ignore[arg-type]
            )
        )
    return progress


def test_the_checks_say_what_they_judged_and_keep_the_whole_series() -> None:
    progress = _three(
        [700.0, 700.0, 700.0],
        [3600, 3600, 1800],
        events=[[], ["GPU-a: XID 63"], []],
        warnings=[[], [], ["window 3 (gemm-bf16): gpu1: SM clock sag"]],
    )
    correctness, hardware, throughput = burnin_checks(
        progress, PLAN, device_mode="cuda", straggler_tolerance_percent=10, seconds=9000.5
    )
    assert [c.name for c in (correctness, hardware, throughput)] == [
        "burnin-correctness",
        "burnin-hardware",
        "burnin-throughput",
    ]
    assert {c.area for c in (correctness, hardware, throughput)} == {"BURNIN"}
    assert {c.duration_seconds for c in (correctness, hardware, throughput)} == {9000.5}
    assert correctness.status is Status.PASS
    assert correctness.message == (
        "3 window(s), 2h30m of load: every device computed the majority's bits, the same within "
        "each window, and within its CPU reference"
    )
    assert correctness.details == {"failures": [], "warnings": []}
    assert hardware.status is Status.WARN
    assert hardware.message == "window 3 (gemm-bf16): gpu1: SM clock sag"
    assert hardware.details == {
        "failures": [],
        "warnings": ["window 3 (gemm-bf16): gpu1: SM clock sag"],
        "events": {"2": ["GPU-a: XID 63"]},
    }
    assert throughput.status is Status.PASS
    assert throughput.message == (
        "3 window(s), 2h30m of load: no straggler beyond 10% of the node's confirmed best, no "
        "drift beyond it"
    )
    details = throughput.details
    assert {k: v for k, v in details.items() if k not in ("series", "drift")} == {
        "failures": [],
        "warnings": [],
        "plan": PLAN.fingerprint(),
        "stressors": ["gemm-bf16"],
        "window_seconds": 3600,
        "duration_seconds": 21600,
        "load_seconds": 9000,
        "windows_sha256": progress.records_sha256(),
        "devices": ["gpu0", "gpu1"],
        "straggler_tolerance_percent": 10,
    }
    assert details["drift"] == [
        {
            "device": "gpu0",
            "stressor": "gemm-bf16",
            "windows": 3,
            "percent_per_hour": 0.0,
            "change_percent": 0.0,
        },
        {
            "device": "gpu1",
            "stressor": "gemm-bf16",
            "windows": 3,
            "percent_per_hour": 0.0,
            "change_percent": 0.0,
        },
    ]
    assert [w["start_seconds"] for w in details["series"]] == [0, 3600, 7200]
    assert details["series"][1]["events"] == ["GPU-a: XID 63"]
    assert details["series"][0]["throughput"] == {"gpu0": 700.0, "gpu1": 700.0}


def test_drift_is_timed_at_each_windows_middle_and_judged_from_three_windows_at_the_bound() -> None:
    # middles at 0.5 h, 1.5 h and 2.25 h (the last window is half as long)
    progress = _three([700.0, 665.0, 638.75], [3600, 3600, 1800])
    [_, fell] = drifts(progress.windows)
    hours = [0.5, 1.5, 2.25]
    values = [700.0, 665.0, 638.75]
    mean_h, mean_v = sum(hours) / 3, sum(values) / 3
    slope = sum((h - mean_h) * (v - mean_v) for h, v in zip(hours, values, strict=True)) / sum(
        (h - mean_h) ** 2 for h in hours
    )
    assert fell.percent_per_hour == pytest.approx(slope / mean_v * 100)
    assert fell.change_percent == pytest.approx(slope / mean_v * 100 * 1.75)
    tolerance = -fell.change_percent  # exactly at the bound: not past it
    at_bound = burnin_checks(
        progress, PLAN, device_mode="cuda", straggler_tolerance_percent=tolerance
    )
    assert at_bound[2].status is Status.PASS
    past = burnin_checks(
        progress, PLAN, device_mode="cuda", straggler_tolerance_percent=tolerance - 0.01
    )
    assert past[2].status is Status.FAIL


def test_a_device_seen_in_one_window_only_has_no_trend_and_hides_no_other() -> None:
    progress = _three([700.0, 600.0, 500.0], [3600, 3600, 3600])
    first = progress.windows[0]
    progress.windows[0] = first.model_copy(
        update={"throughput": {"gpu-lost": 1.0, **first.throughput}}
    )
    assert [d.device for d in drifts(progress.windows)] == ["gpu0", "gpu1"]


def test_findings_are_spelled_out_three_at_a_time() -> None:
    texts = [f"window {i} (gemm-bf16): gpu1 computed other bits" for i in range(1, 5)]
    progress = _three([700.0] * 4, [60] * 4, correctness=[[t] for t in texts])
    correctness = burnin_checks(progress, PLAN, device_mode="cuda", straggler_tolerance_percent=10)[
        0
    ]
    assert correctness.message == "; ".join(texts[:3]) + " (and 1 more: see the details)"
    three = _three([700.0] * 3, [60] * 3, correctness=[[t] for t in texts[:3]])
    assert burnin_checks(three, PLAN, device_mode="cuda", straggler_tolerance_percent=10)[
        0
    ].message == "; ".join(texts[:3])
    assert (
        burnin_checks(three, PLAN, device_mode="cuda", straggler_tolerance_percent=10)[0].details[
            "failures"
        ]
        == texts[:3]
    )


def test_no_window_finished_says_so_in_every_check() -> None:
    empty = BurnInProgress(plan=PLAN.fingerprint())
    checks = burnin_checks(empty, PLAN, device_mode="cuda", straggler_tolerance_percent=10)
    assert {c.duration_seconds for c in checks} == {0.0}
    untimed = burnin_checks(
        _three([700.0], [60]), PLAN, device_mode="cuda", straggler_tolerance_percent=10
    )
    assert {c.duration_seconds for c in untimed} == {0.0}
    assert [(c.name, c.message) for c in checks] == [
        ("burnin-correctness", "no window finished"),
        ("burnin-hardware", "no window finished"),
        ("burnin-throughput", "no window finished"),
    ]


def test_the_twins_node_figures_cover_every_stressor() -> None:
    progress = BurnInProgress(plan=PLAN.fingerprint(), devices=["cpu0", "cpu1", "cpu2"])
    for window, (stressor, unit) in enumerate([("gemm-bf16", "TFLOPS"), ("hbm", "GB/s")]):
        progress.record(
            WindowFigures(
                window=window,
                stressor=stressor,
                seconds=60,
                unit=unit,
                throughput={"cpu0": 1.0, "cpu1": 2.0, "cpu2": 3.0},
            )
        )
    cpu = burnin_checks(progress, PLAN, device_mode="cpu", straggler_tolerance_percent=25)[2]
    assert [(m.name, m.value, m.unit) for m in cpu.measurements] == [
        ("burnin_gemm_bf16", 2.0, "TFLOPS"),
        ("burnin_hbm", 2.0, "GB/s"),
    ]
