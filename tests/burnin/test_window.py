"""A window judged across the node, from real CPU-twin work with injected faults."""

from __future__ import annotations

import dataclasses

from gpuaccept.burnin.stress import WindowWork, run_window
from gpuaccept.burnin.window import judge_window


def _node(count: int = 4) -> dict[str, WindowWork]:
    work = run_window("gemm-fp32", 0.05, seed=5, device_index=None)
    # the same work on every device of the node, each at its own measured rate
    return {f"gpu{i}": dataclasses.replace(work, throughput=100.0 + i) for i in range(count)}


def test_a_healthy_window_has_its_figures_and_no_failure() -> None:
    figures = judge_window(2, "gemm-fp32", 300.0, _node())
    assert figures.failures == []
    assert figures.throughput == {"gpu0": 100.0, "gpu1": 101.0, "gpu2": 102.0, "gpu3": 103.0}
    assert (figures.window, figures.stressor, figures.seconds) == (2, "gemm-fp32", 300.0)


def test_a_device_with_other_bits_is_named_with_the_window_and_the_first_row() -> None:
    node = _node()
    other = run_window("gemm-fp32", 0.05, seed=6, device_index=None)  # not the node's work
    node["gpu2"] = dataclasses.replace(other, throughput=102.0)
    [failure] = judge_window(2, "gemm-fp32", 300.0, node).failures
    assert failure == (
        "window 3 (gemm-fp32): gpu2 computed other bits than the majority (gpu0, gpu1, gpu3), "
        "first in row 0"
    )


def test_a_device_that_changed_within_the_window_and_a_slow_one_are_both_named() -> None:
    node = _node()
    node["gpu1"] = dataclasses.replace(node["gpu1"], repeats_agree=False)
    node["gpu3"] = dataclasses.replace(node["gpu3"], throughput=80.0)  # 20% slower
    failures = judge_window(0, "gemm-fp32", 300.0, node).failures
    assert failures == [
        "window 1 (gemm-fp32): gpu1 changed its result within the window (first and last "
        "iterations differ bit for bit)",
        "window 1 (gemm-fp32): gpu3 is a straggler, 80 TFLOPS is -20.4% against the node's "
        "median 100.5",
    ]


def test_two_devices_that_disagree_leave_the_decision_to_the_reference() -> None:
    node = _node(2)
    other = run_window("gemm-fp32", 0.05, seed=6, device_index=None)
    node["gpu1"] = dataclasses.replace(other, throughput=101.0)
    [failure] = judge_window(0, "gemm-fp32", 300.0, node).failures
    assert failure == (
        "window 1 (gemm-fp32): the devices disagree with no majority (gpu0, gpu1): the float64 "
        "reference must decide"
    )


def test_the_straggler_tolerance_is_the_callers_and_no_device_is_no_failure() -> None:
    node = _node()
    node["gpu3"] = dataclasses.replace(node["gpu3"], throughput=80.0)  # 20.4% below the median
    assert judge_window(0, "gemm-fp32", 300.0, node, straggler_tolerance_percent=25).failures == []
    assert (
        len(judge_window(0, "gemm-fp32", 300.0, node, straggler_tolerance_percent=20).failures) == 1
    )
    empty = judge_window(0, "hbm", 300.0, {})
    assert (empty.failures, empty.throughput) == ([], {})
