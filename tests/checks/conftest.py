"""A CPU-mode CheckContext at the quick level, adjustable per test."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from gpuaccept.checks.context import CheckContext
from gpuaccept.probe.hardware import ExpectedGpus
from gpuaccept.references import load_shipped_references
from gpuaccept.results import Reference
from gpuaccept.suite import level_settings


def cpu_context(
    expected: ExpectedGpus | None = None,
    references: dict[str, Reference] | None = None,
    **settings: Any,
) -> CheckContext:
    table = load_shipped_references()
    if references:
        table = table.with_overrides({"cpu": references})
    return CheckContext(
        level="quick",
        device_mode="cpu",
        settings=replace(level_settings("quick", "cpu"), **settings),
        references=table,
        expected=expected,
    )


def impossible(metric_unit: str) -> Reference:
    """A reference no CPU can meet: an injected 'measurement below its reference'."""
    return Reference(value=1e9, lower_fraction=0.9, unit=metric_unit, source="test")


@pytest.fixture
def context() -> CheckContext:
    return cpu_context()


@pytest.fixture
def no_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    """A machine with no GPU, whatever this one has: torch lists none and NVML is not there.

    Tests of the no-GPU verdicts use it, so they judge the same on a GPU node as on CI.
    """
    import gpuaccept.checks.inventory
    import gpuaccept.probe.hardware

    monkeypatch.setattr(gpuaccept.checks.inventory, "list_cuda_gpus", lambda: [])
    monkeypatch.setattr(gpuaccept.probe.hardware, "list_cuda_gpus", lambda: [])
    monkeypatch.setenv("GPUACCEPT_NVML_MODULE", "tests.no_nvml_here")


def gpu_context(level: str = "quick") -> CheckContext:
    """A CUDA-mode context for checks that only read NVML (with the fake_gpus fixture)."""
    return replace(cpu_context(), level=level, device_mode="cuda")


@pytest.fixture
def fake_gpus(monkeypatch: pytest.MonkeyPatch) -> Any:
    """`fake_gpus(scenario)`: NVML is tests.fake_nvml playing `scenario`, and torch lists its
    GPUs (a MIG instance under the GPU-... UUID torch prints for it)."""
    from gpuaccept.probe.hardware import GpuInfo
    from tests import fake_nvml

    def install(scenario: dict[str, Any], torch_uuids: list[str] | None = None) -> None:
        import gpuaccept.checks.inventory
        import gpuaccept.probe.hardware

        fake_nvml.use(scenario)
        uuids = torch_uuids or [gpu["uuid"] for gpu in scenario["gpus"]]
        gpus = [
            GpuInfo(
                index=i,
                name=scenario["gpus"][min(i, len(scenario["gpus"]) - 1)].get(
                    "name", "NVIDIA H100 80GB HBM3"
                ),
                capability=(9, 0),
                memory_bytes=80 * 2**30,
                multiprocessors=132,
                uuid=uuid,
            )
            for i, uuid in enumerate(uuids)
        ]
        monkeypatch.setenv("GPUACCEPT_NVML_MODULE", "tests.fake_nvml")
        monkeypatch.setattr(gpuaccept.probe.hardware, "list_cuda_gpus", lambda: gpus)
        monkeypatch.setattr(gpuaccept.checks.inventory, "list_cuda_gpus", lambda: gpus)

    yield install
    fake_nvml.use(None)


def h100_sxm(index: int = 0, **facts: Any) -> dict[str, Any]:
    """A healthy H100 SXM as fake NVML plays it; `facts` override any part."""
    gpu: dict[str, Any] = {
        "uuid": f"GPU-00000000-0000-0000-0000-00000000000{index}",
        "name": "NVIDIA H100 80GB HBM3",
        "pci_device_id": 0x233010DE,
        "ecc": {
            scope: {kind: {"dram": 0, "sram": 0} for kind in ("corrected", "uncorrected")}
            for scope in ("volatile", "aggregate")
        },
        "remapped_rows": [0, 0, 0, 0],
        "retired_pages": {"sbe": 0, "dbe": 0, "pending": False},
        "throttle": 0,
        "pcie": {"gen": 5, "gen_max_gpu": 5, "gen_max_system": 5, "width": 16, "width_max": 16},
        "pcie_replay": 0,
        "nvlink": [{"active": True, "version": 4} for _ in range(18)],
        "fabric": {"state": 3, "status": 0},
        "mig": {"current": 0, "pending": 0},
        "persistence": 1,
        "power_mw": 650_000,
        "power_limit_mw": 700_000,
        "temperature_c": 60,
        # the stand-in board's thresholds (NVML's GPU_MAX and SLOWDOWN; no real board's claimed)
        "temperature_thresholds": {"gpu_max": 87, "slowdown": 90},
        "sm_clock_mhz": 1755,
        "sm_clock_max_mhz": 1980,
    }
    gpu.update(facts)
    return gpu
