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


def test_the_window_keeps_the_majoritys_bits_and_none_without_a_majority() -> None:
    node = _node(3)
    assert judge_window(0, "gemm-fp32", 300.0, node).digest == node["gpu0"].digest
    other = run_window("gemm-fp32", 0.05, seed=6, device_index=None)
    split = {"gpu0": node["gpu0"], "gpu1": other}
    assert judge_window(0, "gemm-fp32", 300.0, split).digest is None


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
        "window 1 (gemm-fp32): gpu3 is a straggler, 80 TFLOPS is -20.8% against the node's "
        "confirmed best 101",
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


def test_counter_growth_in_the_window_is_a_hard_event_of_that_window() -> None:
    from gpuaccept.probe.nvml_health import CounterSnapshot, ErrorCounters

    def snapshot(at: float, replay: int, ecc: int) -> CounterSnapshot:
        return CounterSnapshot(
            at,
            (ErrorCounters("GPU-a", 0, ecc_uncorrected_volatile=ecc, nvlink={2: (0, replay, 0)}),),
        )

    quiet = judge_window(
        4, "hbm", 300.0, _node(), counters=(snapshot(0, 5, 1), snapshot(300, 5, 1))
    )
    assert quiet.hardware == []
    grown = judge_window(
        4, "hbm", 300.0, _node(), counters=(snapshot(0, 5, 1), snapshot(300, 9, 3))
    )
    assert grown.hardware == [
        "window 5 (hbm): NVML GPU 0 (GPU-a): 2 uncorrectable ECC error(s) in the run",
        "window 5 (hbm): NVML GPU 0 (GPU-a): NVLink 2 replay errors grew by 4 in the run",
    ]
    assert grown.counter_growth == [
        {"uuid": "GPU-a", "index": 0, "grew": {"ecc_uncorrected": 2, "nvlink2_replay": 4}}
    ]
    assert quiet.counter_growth == []
    gone = CounterSnapshot(300, ())
    [lost] = judge_window(4, "hbm", 300.0, _node(), counters=(snapshot(0, 5, 1), gone)).hardware
    assert lost.endswith("was read at the start but not at the end (lost?)")


def test_a_hardware_slowdown_fails_and_a_weak_power_hold_warns() -> None:
    node = _node(3)
    node["gpu1"] = dataclasses.replace(
        node["gpu1"],
        load={
            "power_held_share": 0.5,
            "power_p90_w": 640.0,
            "samples": 3010,
            "loaded_samples": 3000,
            "reason_hits": {"hardware slowdown": 12},
        },
        clock_events={"hardware slowdown": 12, "software power cap": 2900},
    )
    node["gpu2"] = dataclasses.replace(
        node["gpu2"], load={"power_held_share": 0.95, "samples": 3010, "loaded_samples": 3000}
    )
    figures = judge_window(0, "gemm-bf16", 300.0, node)
    assert figures.hardware == [
        "window 1 (gemm-bf16): gpu1: hardware slowdown under load in 12 of 3000 samples"
    ]
    assert figures.warnings == [
        "window 1 (gemm-bf16): gpu1 held 90% of its power limit in 50% of the samples (expected "
        "90%): the stress is below what it should reach"
    ]
    assert figures.load["gpu1"] == {"power_held_share": 0.5, "power_p90_w": 640.0}
    assert figures.clock_events == {"gpu1": {"hardware slowdown": 12, "software power cap": 2900}}


def test_all_reduce_ranks_are_not_judged_as_stragglers() -> None:
    node = _node()
    node["gpu3"] = dataclasses.replace(node["gpu3"], throughput=50.0)
    assert judge_window(0, "all-reduce", 300.0, node).stragglers == []
    assert len(judge_window(0, "hbm", 300.0, node).stragglers) == 1


def test_a_lost_device_and_an_event_in_one_window_are_both_hard_findings() -> None:
    from gpuaccept.probe.nvml_events import GpuEvent

    node = _node(3)
    del node["gpu2"]
    event = GpuEvent("xid", "GPU-c", "2026-11-24T00:00:00+00:00", xid=79)
    figures = judge_window(
        1, "hbm", 300.0, node, lost={"gpu2": "worker process died"}, events=[event]
    )
    assert figures.hardware == [
        "window 2 (hbm): gpu2 was lost: worker process died",
        "window 2 (hbm): NVML event GPU-c: XID 79: GPU has fallen off the bus at "
        "2026-11-24T00:00:00+00:00",
    ]
    assert figures.events == [event.describe()]
    assert figures.unit == "TFLOPS"  # the work's own unit (the CPU twin's gemm here)


def test_power_held_exactly_at_the_expectation_and_a_work_without_reference_pass() -> None:
    node = _node(3)
    node["gpu0"] = dataclasses.replace(node["gpu0"], load={"power_held_share": 0.9})
    node["gpu1"] = dataclasses.replace(node["gpu1"], reference=None)
    figures = judge_window(0, "gemm-bf16", 300.0, node)
    assert figures.warnings == []
    assert figures.correctness == []


def test_port_counter_growth_in_the_window_is_judged_as_over_a_run() -> None:
    before = {"mlx5_0:1": {"link_downed": 0, "symbol_error": 3}}
    after = {"mlx5_0:1": {"link_downed": 2, "symbol_error": 3}}
    figures = judge_window(2, "all-reduce", 300.0, _node(), port_counters=(before, after))
    assert figures.hardware == ["window 3 (all-reduce): mlx5_0:1 link_downed grew by 2 in the run"]
    assert figures.counter_growth == [{"port": "mlx5_0:1", "grew": {"link_downed": 2}}]


def test_a_window_where_every_device_was_lost_has_no_unit_and_no_rate() -> None:
    figures = judge_window(0, "hbm", 300.0, {}, lost={"gpu0": "worker died"})
    assert (figures.unit, figures.throughput, figures.digest) == ("", {}, None)
    assert figures.hardware == ["window 1 (hbm): gpu0 was lost: worker died"]


def test_gpu_and_port_counter_growth_are_both_kept() -> None:
    from gpuaccept.probe.nvml_health import CounterSnapshot, ErrorCounters

    before = CounterSnapshot(0, (ErrorCounters("GPU-a", 0, ecc_uncorrected_volatile=1),))
    after = CounterSnapshot(300, (ErrorCounters("GPU-a", 0, ecc_uncorrected_volatile=2),))
    figures = judge_window(
        0,
        "hbm",
        300.0,
        _node(),
        counters=(before, after),
        port_counters=({"mlx5_0:1": {"symbol_error": 0}}, {"mlx5_0:1": {"symbol_error": 4}}),
    )
    assert figures.counter_growth == [
        {"uuid": "GPU-a", "index": 0, "grew": {"ecc_uncorrected": 1}},
        {"port": "mlx5_0:1", "grew": {"symbol_error": 4}},
    ]


def test_a_device_that_measured_no_work_is_recorded_as_lost_with_what_it_reported() -> None:
    """A rate of zero, infinity or NaN is no measurement: the device is lost for the window, and
    its reference check is kept with the others' as it was measured."""
    from gpuaccept.burnin.evidence import record_window
    from gpuaccept.burnin.stress import ReferenceCheck

    node = _node(4)
    wrong = ReferenceCheck("within the bound", 24, 2.5, "element (1, 2) is 3, expected 2")
    node["gpu0"] = dataclasses.replace(node["gpu0"], reference=wrong)
    node["gpu1"] = dataclasses.replace(node["gpu1"], throughput=0.0)
    node["gpu2"] = dataclasses.replace(node["gpu2"], throughput=float("inf"))
    node["gpu3"] = dataclasses.replace(node["gpu3"], throughput=float("nan"))
    record = record_window(0, "gemm-fp32", 300.0, 7, node)
    assert sorted(record.devices) == ["gpu0"]
    assert record.lost == {
        "gpu1": "it measured no work (a rate of 0.0 TFLOPS)",
        "gpu2": "it measured no work (a rate of inf TFLOPS)",
        "gpu3": "it measured no work (a rate of nan TFLOPS)",
    }
    stored = record.devices["gpu0"].reference
    assert stored is not None
    assert (stored.rule, stored.checked, stored.worst_ratio, stored.outside) == (
        "within the bound",
        24,
        2.5,
        "element (1, 2) is 3, expected 2",
    )
