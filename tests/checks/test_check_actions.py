"""Issue #31 §1 through the real checks: each fault the fake NVML, the kernel log or sysfs plays
turns into the finding's cause and the action its table row gives. Each row of data/actions.toml
that a check can reach has a case here that fails when the row (or the cause the check names)
changes."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from gpuaccept.actions import Action, plan_actions
from gpuaccept.checks import events, health
from gpuaccept.checks.judging import Findings, Target
from gpuaccept.probe.kernel_log import KernelLogScan, parse_kernel_log
from gpuaccept.results import CheckResult, Status
from tests.checks.conftest import gpu_context, h100_sxm


def _health(fake_gpus: Any, gpu: dict[str, Any]) -> CheckResult:
    fake_gpus({"gpus": [gpu, h100_sxm(1)]})
    return health.run(gpu_context())


def _ecc(**counts: int) -> dict[str, Any]:
    table: dict[str, Any] = {
        scope: {kind: {"dram": 0, "sram": 0} for kind in ("corrected", "uncorrected")}
        for scope in ("volatile", "aggregate")
    }
    for key, value in counts.items():
        scope, kind, where = key.split("_")
        table[scope][kind][where] = value
    return table


@pytest.mark.parametrize(
    ("facts", "action", "cause"),
    [
        # NVML: "a reset will be required to actually remap the row"
        ({"remapped_rows": [0, 0, 1, 0]}, Action.RESET_GPU, "nvmlDeviceGetRemappedRows"),
        # a failed remapping is past what a reset gives back: the RMA policy
        ({"remapped_rows": [0, 0, 0, 1]}, Action.REPLACE, "RMA policy"),
        ({"remapped_rows": [0, 512, 0, 0]}, Action.REPLACE, "UNCORRECTABLE_ROW_REMAP_LIMIT"),
        (
            {"retired_pages": {"sbe": 0, "dbe": 1, "pending": True}},
            Action.RESET_GPU,
            "PENDING_PAGE_RETIREMENTS",
        ),
        (
            {"retired_pages": {"sbe": 40, "dbe": 22, "pending": True}},
            Action.DRAIN,  # the full table (drain) outranks the pending retirement (reset)
            "RETIRED_PAGES_LIMIT",
        ),
        ({"ecc": _ecc(volatile_uncorrected_sram=1)}, Action.DRAIN, "VOLATILE_DBE_DETECTED"),
        ({"ecc": _ecc(aggregate_corrected_sram=10_001)}, Action.DRAIN, "aznhc check_gpu_ecc"),
        (
            {"nvlink": [{"active": i != 3, "version": 4} for i in range(18)]},
            Action.DRAIN,
            "NVLINK_DOWN",
        ),
        ({"fabric": {"state": 1}}, Action.DRAIN, "NVSWITCH_FATAL_ERROR"),
        ({"recovery_action": 1}, Action.RESET_GPU, "NVML recovery action 'GPU reset'"),
        ({"recovery_action": 2}, Action.REBOOT_NODE, "NVML recovery action 'node reboot'"),
        ({"recovery_action": 4}, Action.RESET_GPU, "NVML recovery action 'drain and reset'"),
        ({"lost": True}, Action.REBOOT_NODE, "XID 79"),
    ],
)
def test_each_health_fault_recommends_its_sources_action(
    fake_gpus: Any, facts: dict[str, Any], action: Action, cause: str
) -> None:
    result = _health(fake_gpus, h100_sxm(**facts))
    assert result.status is Status.FAIL, result.message
    plan = plan_actions([result])
    assert plan.action is action, plan
    worst = [r for r in plan.recommendations if r.action is action]
    assert any(cause in r.cause for r in worst), [r.cause for r in worst]
    # the GPU is named by its UUID, so a reset names the GPU to reset
    assert worst[0].gpu == "GPU-00000000-0000-0000-0000-000000000000"


def test_a_warning_never_recommends_more_than_monitor(fake_gpus: Any) -> None:
    """NVML asks for drain P2P: DCGM warns on it, and so does gpuaccept; the table's `drain` is
    held to `monitor`, since a passing verdict takes no node out of service."""
    result = _health(fake_gpus, h100_sxm(recovery_action=3))
    assert result.status is Status.WARN
    plan = plan_actions([result])
    assert plan.action is Action.MONITOR
    assert plan.recommendations[0].cause == "NVML recovery action 'drain P2P'"


@pytest.mark.parametrize(
    ("xid", "action"),
    [
        (79, Action.REBOOT_NODE),  # RESTART_BM
        (48, Action.RESET_GPU),  # WORKFLOW_XID_48
        (74, Action.RESET_GPU),  # WORKFLOW_NVLINK_ERR
        (95, Action.RESET_GPU),  # RESET_GPU
        (119, Action.RESET_GPU),  # GSP_RPC_TIMEOUT: RESET_GPU
        (58, Action.REPLACE),  # "Unused": CONTACT_SUPPORT
        (63, Action.RERUN),  # IGNORE, but a failing finding (aznhc fails it): at least rerun
        (94, Action.RERUN),  # RESTART_APP
    ],
)
def test_a_critical_xid_in_the_kernel_log_recommends_the_catalogues_action(
    fake_gpus: Any, monkeypatch: pytest.MonkeyPatch, xid: int, action: Action
) -> None:
    log = f"[ 5.0] NVRM: Xid (PCI:0000:1b:00): {xid}, pid=7, something\n"
    scan = KernelLogScan(True, "dmesg", tuple(parse_kernel_log(log)))
    monkeypatch.setattr(events, "scan_kernel_log", lambda: scan)
    fake_gpus({"gpus": [h100_sxm()]})
    result = events.run(gpu_context())
    assert result.status is Status.FAIL, result.message
    (recommendation,) = plan_actions([result]).recommendations
    assert (recommendation.action, recommendation.gpu) == (action, "PCI 0000:1b:00")
    assert recommendation.cause.startswith(f"XID {xid} ")


def test_an_application_xid_warns_and_recommends_no_more_than_monitor(
    fake_gpus: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = "[ 5.0] NVRM: Xid (PCI:0000:1b:00): 13, pid=7, Graphics Exception\n"  # RESTART_APP
    scan = KernelLogScan(True, "dmesg", tuple(parse_kernel_log(log)))
    monkeypatch.setattr(events, "scan_kernel_log", lambda: scan)
    fake_gpus({"gpus": [h100_sxm()]})
    result = events.run(gpu_context())
    assert result.status is Status.WARN
    assert plan_actions([result]).action is Action.MONITOR  # rerun, capped for a warning


def test_an_xid_the_catalogue_ignores_is_said_and_never_judged(
    fake_gpus: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = "[ 5.0] NVRM: Xid (PCI:0000:1b:00): 43, pid=7, channel reset\n"  # IGNORE
    scan = KernelLogScan(True, "dmesg", tuple(parse_kernel_log(log)))
    monkeypatch.setattr(events, "scan_kernel_log", lambda: scan)
    fake_gpus({"gpus": [h100_sxm()]})
    result = events.run(gpu_context())
    assert result.status is Status.PASS
    assert "XID 43" in result.details["ignored"][0]
    assert "1 finding(s) the action tables ignore" in result.message


def test_a_gpu_lost_during_the_run_recommends_a_reboot(fake_gpus: Any) -> None:
    from gpuaccept.probe.nvml_health import read_snapshot

    fake_gpus({"gpus": [h100_sxm(0), h100_sxm(1)]})
    start = read_snapshot()
    fake_gpus({"gpus": [h100_sxm(0)]})
    result = events.run(replace(gpu_context(), start_counters=start))
    assert result.status is Status.FAIL
    plan = plan_actions([result])
    assert plan.action is Action.REBOOT_NODE
    assert plan.recommendations[0].gpu == "GPU-00000000-0000-0000-0000-000000000001"


def test_a_figure_below_its_floor_is_rerun_and_a_wrong_result_beside_it_drains() -> None:
    """A slow figure is rerun before a drain (issue #31 §1); a failure no cause names takes its
    check's action, which outranks it."""
    context = gpu_context()
    findings = Findings("compute", "COMPUTE")
    findings.judge(
        context, Target(0, "NVIDIA H100 80GB HBM3"), "matmul_bf16_tflops", 300.0, "TFLOPS"
    )
    slow = findings.conclude("ok")
    assert slow.status is Status.FAIL
    (alone,) = plan_actions([slow]).recommendations
    assert (alone.action, alone.cause) == (
        Action.RERUN,
        "a figure below its floor: rerun, and drain when it repeats (issue #31 §1)",
    )
    findings.failures.append("gpu0 matmul result differs from the reference")
    both = plan_actions([findings.conclude("ok")])
    assert both.action is Action.DRAIN
    assert [r.action for r in both.recommendations] == [Action.DRAIN, Action.RERUN]


def test_a_nan_figure_is_a_failed_measurement_rerun() -> None:
    findings = Findings("memory", "MEMORY")
    findings.record(Target(0, "gpu"), "membw_copy_gbps", float("nan"), "GB/s")
    (recommendation,) = plan_actions([findings.conclude("ok")]).recommendations
    assert recommendation.action is Action.RERUN
    assert "NaN" in recommendation.cause
