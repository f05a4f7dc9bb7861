from __future__ import annotations

import pytest

from gpuaccept.checks import inventory
from gpuaccept.probe.hardware import ExpectedGpus
from gpuaccept.results import Status
from tests.checks.conftest import cpu_context

pytestmark = pytest.mark.usefixtures("no_gpu")


def test_no_gpu_and_none_expected_is_cpu_mode_pass() -> None:
    result = inventory.run(cpu_context())
    assert result.status is Status.PASS
    assert "CPU mode" in result.message
    assert result.measurements[0].name == "gpus_usable"
    assert result.measurements[0].value == 0


def test_fewer_gpus_than_expected_fails_with_the_numbers() -> None:
    result = inventory.run(cpu_context(expected=ExpectedGpus(4, "HTCondor _CONDOR_AssignedGPUs")))
    assert result.status is Status.FAIL
    assert "expected 4 GPU(s)" in result.message
    assert "can use 0" in result.message
    assert "HTCondor" in result.message


def test_zero_expected_is_not_a_failure() -> None:
    result = inventory.run(cpu_context(expected=ExpectedGpus(0, "CUDA_VISIBLE_DEVICES")))
    assert result.status is Status.PASS
