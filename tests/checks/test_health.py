from __future__ import annotations

from dataclasses import replace

import pytest

from gpuaccept.checks import health
from gpuaccept.probe.hardware import GpuHealth
from gpuaccept.results import Status
from tests.checks.conftest import cpu_context

HEALTHY = GpuHealth(
    index=0,
    name="NVIDIA H100 80GB HBM3",
    ecc_uncorrectable_volatile=0,
    retired_pages_pending=False,
    remapped_rows_pending=False,
    remapped_rows_failed=False,
    throttle_reasons=[],
    pcie_gen_current=1,  # idle GPUs drop their link speed: not a fault
    pcie_gen_max_gpu=5,
    pcie_gen_max_system=5,
    pcie_width_current=16,
    pcie_width_max=16,
    persistence_mode=True,
)


def test_healthy_gpu_has_no_findings() -> None:
    assert health.judge_health(HEALTHY) == ([], [])


def test_unknown_facts_are_neither_failures_nor_warnings() -> None:
    assert health.judge_health(GpuHealth(index=3, name="x")) == ([], [])


@pytest.mark.parametrize(
    ("fault", "text"),
    [
        ({"ecc_uncorrectable_volatile": 2}, "2 uncorrectable ECC"),
        ({"retired_pages_pending": True}, "page retirement pending"),
        ({"remapped_rows_pending": True}, "row remapping pending"),
        ({"remapped_rows_failed": True}, "row remapping failed"),
    ],
)
def test_memory_faults_fail(fault: dict[str, object], text: str) -> None:
    failures, _ = health.judge_health(replace(HEALTHY, **fault))  # type: ignore[arg-type]
    assert len(failures) == 1
    assert text in failures[0]
    assert failures[0].startswith("gpu0")


@pytest.mark.parametrize(
    ("fault", "text"),
    [
        ({"throttle_reasons": ["hardware thermal slowdown"]}, "thermal"),
        ({"pcie_width_current": 8}, "x8 of x16"),
        ({"pcie_gen_max_system": 4}, "Gen4"),
        ({"persistence_mode": False}, "persistence mode off"),
    ],
)
def test_degradations_warn(fault: dict[str, object], text: str) -> None:
    failures, warnings = health.judge_health(replace(HEALTHY, **fault))  # type: ignore[arg-type]
    assert failures == []
    assert len(warnings) == 1
    assert text in warnings[0]


def test_cpu_mode_is_skip_not_pass() -> None:
    assert health.run(cpu_context()).status is Status.SKIP


@pytest.mark.usefixtures("no_gpu")
def test_missing_nvml_is_skip_with_a_reason() -> None:
    from dataclasses import replace as dc_replace

    result = health.run(dc_replace(cpu_context(), device_mode="cuda"))
    assert result.status is Status.SKIP
    assert "NVML unavailable" in result.message
