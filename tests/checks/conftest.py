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
