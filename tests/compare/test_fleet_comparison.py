"""A burn-in's GPUs against the same GPU model on other nodes (the history's passing burn-ins):
a GPU more than the tolerance below their median fails, named with its model and the peers."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

from gpuaccept.burnin.checks import burnin_checks
from gpuaccept.burnin.plan import BurnInPlan, BurnInProgress, WindowFigures, window_seed
from gpuaccept.compare.fleet_comparison import compare_with_fleet
from gpuaccept.results import RunReport
from gpuaccept.store.history import History
from gpuaccept.verdict import Status
from tests.run_reports import T0, history_with, judged_report

PLAN = BurnInPlan.build(600, 300, 2, ["gemm-bf16"])
H100 = "NVIDIA H100 80GB HBM3"


def burnin_report(
    host: str,
    rates: list[float],
    *,
    model: str = H100,
    hours: float = 0.0,
    correct: bool = True,
    mode: str = "cuda",
    digests: tuple[str | None, str | None] = ("a" * 64, "b" * 64),
    stack: str = "2.13.0",
    hbm: list[float] | None = None,
    named: bool = True,
    models: list[str | None] | None = None,
) -> RunReport:
    devices = [f"gpu{i}" for i in range(len(rates))]
    progress = BurnInProgress(plan=PLAN.fingerprint(), devices=devices)
    rounds = [("gemm-bf16", "TFLOPS", rates)] * 2 + ([("hbm", "GB/s", hbm)] if hbm else [])
    for window, (stressor, unit, values) in enumerate(rounds):
        progress.record(
            WindowFigures(
                window=window,
                stressor=stressor,
                seconds=300,
                unit=unit,
                throughput=dict(zip(devices, values, strict=True)),
                digest=digests[window] if window < 2 else None,
                seed=window_seed(0, window),
                correctness=[] if correct else ["window 1 (gemm-bf16): gpu0 computed other bits"],
            )
        )
    checks = burnin_checks(
        progress,
        PLAN,
        device_mode=mode,
        straggler_tolerance_percent=10,
        names={
            device: name
            for device, name in zip(devices, models or [model] * len(devices), strict=True)
            if name is not None
        }
        if named
        else {},
    )
    started = T0 + timedelta(hours=hours)
    return judged_report(
        command="burnin",
        level="10m",
        device_mode=mode,
        started_at=started.isoformat(),
        finished_at=(started + timedelta(minutes=10)).isoformat(),
        duration_seconds=600.0,
        checks=checks,
        environment={
            "system": {"hostname": host},
            "torch": {"version": stack},
            "gpus": [{"name": model} for _ in devices],
        },
    )


def _compare(tmp_path: Path, report: RunReport, *past: RunReport, tolerance: float = 10.0) -> Any:
    with History.open(history_with(tmp_path / "h.sqlite", *past)) as history:
        return compare_with_fleet(report, history, tolerance)


def test_a_node_whose_gpus_are_all_equally_slow_is_caught_against_other_nodes(
    tmp_path: Path,
) -> None:
    fleet = [burnin_report(f"node{i}", [700.0, 705.0]) for i in range(2)]
    slow_node = burnin_report("node9", [600.0, 600.0], hours=1)  # no straggler within the node
    assert all(c.status is Status.PASS for c in slow_node.checks)
    check = _compare(tmp_path, slow_node, *fleet)
    assert check.status is Status.FAIL
    assert check.message == (
        "gpu0 burnin_gemm_bf16 600 TFLOPS is -14.6% against the median 702.5 of 4 "
        f"{H100} GPUs on other nodes; gpu1 burnin_gemm_bf16 600 TFLOPS is -14.6% against the "
        f"median 702.5 of 4 {H100} GPUs on other nodes"
    )
    healthy = burnin_report("node8", [690.0, 710.0], hours=1)
    assert _compare(tmp_path / "b", healthy, *fleet).status is Status.PASS


def test_only_other_nodes_passing_gpu_burn_ins_of_the_same_model_count(tmp_path: Path) -> None:
    this = burnin_report("node9", [600.0], hours=1)
    past = [
        burnin_report("node9", [700.0, 700.0, 700.0, 700.0]),  # this node's own past
        burnin_report("node1", [700.0, 700.0], correct=False),  # a failed burn-in
        burnin_report("node2", [700.0, 700.0], model="NVIDIA A100-SXM4-80GB"),
        burnin_report("node3", [700.0, 700.0], mode="cpu"),
        burnin_report("node4", [700.0, 700.0]),  # two peers: not enough for a median
    ]
    check = _compare(tmp_path, this, *past)
    assert check.status is Status.SKIP
    assert check.message == (
        f"not compared with other nodes: fewer than 3 GPUs of {H100} on other nodes in the "
        "history's passing burn-ins"
    )
    # one more passing node of the model makes three peers: now it is judged
    more = [*past, burnin_report("node5", [700.0])]
    assert _compare(tmp_path / "b", this, *more).status is Status.FAIL


def test_the_newest_burn_in_of_each_node_is_its_figure(tmp_path: Path) -> None:
    this = burnin_report("node9", [650.0], hours=5)
    past = [burnin_report(f"node{i}", [600.0], hours=0) for i in range(3)] + [
        burnin_report(f"node{i}", [750.0], hours=1) for i in range(3)
    ]
    check = _compare(tmp_path, this, *past)
    assert check.status is Status.FAIL  # against 750 (the newest), not 600 or a mix
    assert "against the median 750 of 3" in check.message


def test_the_cpu_twin_is_not_compared(tmp_path: Path) -> None:
    twin = burnin_report("node9", [1.0, 1.0], mode="cpu")
    check = _compare(tmp_path, twin)
    assert check.status is Status.SKIP
    assert check.message.startswith("CPU mode")


def test_a_node_whose_gpus_agree_on_wrong_bits_is_caught_by_the_other_nodes(
    tmp_path: Path,
) -> None:
    fleet = [burnin_report(f"node{i}", [700.0]) for i in range(3)]
    wrong = burnin_report("node9", [700.0], hours=1, digests=("a" * 64, "c" * 64))
    check = _compare(tmp_path, wrong, *fleet)
    assert check.status is Status.FAIL
    assert check.message == (
        "window 2 (gemm-bf16): this node's GPUs computed other bits than 3 other nodes (node0, "
        "node1, node2) on the same stack"
    )
    assert check.details["windows_compared_bit_for_bit"] == 2
    right = burnin_report("node8", [700.0], hours=1)
    assert _compare(tmp_path / "b", right, *fleet).message == (
        "1 figure(s) within 10% of the same GPU model and 2 window(s) bit for bit equal on "
        "other nodes"
    )


def test_one_other_node_that_disagrees_warns_and_another_stack_is_not_compared(
    tmp_path: Path,
) -> None:
    wrong = burnin_report("node9", [700.0], hours=1, digests=("a" * 64, "c" * 64))
    check = _compare(tmp_path, wrong, burnin_report("node0", [700.0]))
    assert check.status is Status.WARN
    assert check.message.startswith(
        "window 2 (gemm-bf16): this node's GPUs computed other bits than node0 on the same stack"
    )
    other_stack = [burnin_report(f"node{i}", [700.0], stack="2.12.0") for i in range(3)]
    unmatched = _compare(tmp_path / "b", wrong, *other_stack)
    assert unmatched.details["windows_compared_bit_for_bit"] == 0
    assert unmatched.status is Status.PASS  # the rates were compared; the bits could not be


def test_each_figure_is_compared_with_its_own_metric_and_model_and_the_tolerance_is_a_bound(
    tmp_path: Path,
) -> None:
    fleet = [burnin_report(f"node{i}", [700.0], hbm=[1000.0]) for i in range(3)]
    # gpu0 is a model no other node has (left out); gpu1 is exactly 25% below the H100s' 700
    mixed = burnin_report(
        "node9", [100.0, 525.0], models=["NVIDIA B200", H100], digests=(None, None), hours=1
    )
    check = _compare(tmp_path, mixed, *fleet, tolerance=25.0)
    assert check.area == "BURNIN"
    assert check.status is Status.PASS, check.message  # at the bound: within it
    assert check.details["figures"] == [
        {
            "metric": "burnin_gemm_bf16",
            "gpu": "gpu1",
            "model": H100,
            "value": 525.0,
            "unit": "TFLOPS",
            "median": 700.0,  # the gemm figures only, not the hbm ones beside them
            "peers": 3,
            "change_percent": -25.0,
        }
    ]
    assert check.details["not_compared"] == ["NVIDIA B200"]
    assert check.details["tolerance_percent"] == 25.0
    below = burnin_report(
        "node9", [100.0, 524.0], models=["NVIDIA B200", H100], digests=(None, None), hours=1
    )
    failed = _compare(tmp_path / "b", below, *fleet, tolerance=25.0)
    assert failed.status is Status.FAIL
    assert failed.message == (
        f"gpu1 burnin_gemm_bf16 524 TFLOPS is -25.1% against the median 700 of 3 {H100} GPUs on "
        "other nodes"
    )


def test_gpus_without_a_model_name_and_reports_without_figures_are_not_compared(
    tmp_path: Path,
) -> None:
    fleet = [burnin_report(f"node{i}", [700.0]) for i in range(3)]
    nameless = burnin_report("node9", [100.0], named=False, hours=1, digests=(None, None))
    check = _compare(tmp_path, nameless, *fleet)
    assert check.status is Status.SKIP
    assert check.message == "not compared with other nodes: no per-GPU figure to compare"
    assert check.details["not_compared"] == []
    not_a_burnin = burnin_report("node9", [100.0], hours=1).model_copy(update={"checks": []})
    assert not_a_burnin.checks == []
    assert _compare(tmp_path / "b", not_a_burnin, *fleet).status is Status.SKIP


def test_bits_are_held_against_each_other_nodes_newest_passing_run_only(
    tmp_path: Path, monkeypatch: Any
) -> None:
    wrong = ("a" * 64, "c" * 64)
    past = [
        burnin_report("node0", [700.0], digests=wrong),  # node0's older run: superseded
        burnin_report("node0", [700.0], hours=1),
        burnin_report("node1", [700.0], hours=1),
        burnin_report("node2", [700.0], hours=2, digests=wrong, correct=False),  # failed
    ]
    this = burnin_report("node9", [700.0], hours=3, digests=wrong)
    check = _compare(tmp_path, this, *past)
    assert check.status is Status.FAIL
    assert check.message == (
        "window 2 (gemm-bf16): this node's GPUs computed other bits than 2 other nodes (node0, "
        "node1) on the same stack"
    )
    # only the newest runs are read: accept runs after the burn-ins do not push them out, and
    # a node whose burn-ins are all past the limit is not compared
    monkeypatch.setattr("gpuaccept.compare.fleet_comparison._RUNS_READ", 2)
    accepts = [
        burnin_report("node5", [700.0], hours=4).model_copy(update={"command": "accept"})
        for _ in range(1)
    ]
    limited = _compare(tmp_path / "b", this, *past, *accepts)
    assert limited.status is Status.WARN  # node2 (failed) and node1 read: one node, no majority
    assert limited.message.startswith(
        "window 2 (gemm-bf16): this node's GPUs computed other bits than node1 on the same stack"
    )


def test_a_gpu_without_a_name_is_skipped_and_the_next_one_still_compared(tmp_path: Path) -> None:
    fleet = [burnin_report(f"node{i}", [700.0]) for i in range(3)]
    this = burnin_report("node9", [100.0, 600.0], models=[None, H100], digests=(None, None))
    check = _compare(tmp_path, this, *fleet)
    assert check.status is Status.FAIL
    assert check.area == "BURNIN"
    assert check.message.startswith("gpu1 burnin_gemm_bf16 600 TFLOPS is -14.3% against")


def test_a_window_no_other_node_ran_is_passed_over_for_the_next(tmp_path: Path) -> None:
    fleet = [burnin_report(f"node{i}", [700.0], digests=(None, "b" * 64)) for i in range(2)]
    this = burnin_report("node9", [700.0], hours=1, digests=("a" * 64, "c" * 64))
    check = _compare(tmp_path, this, *fleet)
    assert check.details["windows_compared_bit_for_bit"] == 1
    assert check.status is Status.FAIL
    assert check.message.startswith("window 2 (gemm-bf16): this node's GPUs computed other bits")
    skipped = _compare(
        tmp_path / "b", burnin_report("node9", [700.0], named=False, digests=(None, None))
    )
    assert (skipped.area, skipped.status) == ("BURNIN", Status.SKIP)


def test_a_node_on_another_stack_does_not_stop_the_others_being_read(tmp_path: Path) -> None:
    past = [
        burnin_report("node0", [700.0]),
        burnin_report("node1", [700.0]),
        burnin_report("node2", [700.0], hours=2, stack="2.12.0"),  # the newest: another stack
    ]
    this = burnin_report("node9", [700.0], hours=3, digests=("a" * 64, "c" * 64))
    check = _compare(tmp_path, this, *past)
    assert check.details["windows_compared_bit_for_bit"] == 2
    assert check.status is Status.FAIL
