from __future__ import annotations

import pytest

from gpuaccept.errors import EnvironmentProblem, InputError
from gpuaccept.probe.hardware import ExpectedGpus, expected_gpu_count, resolve_device_mode


@pytest.mark.parametrize(
    ("environ", "expected"),
    [
        ({}, None),
        ({"CUDA_VISIBLE_DEVICES": "0,1"}, ExpectedGpus(2, "CUDA_VISIBLE_DEVICES")),
        ({"CUDA_VISIBLE_DEVICES": ""}, ExpectedGpus(0, "CUDA_VISIBLE_DEVICES")),
        ({"CUDA_VISIBLE_DEVICES": "-1"}, ExpectedGpus(0, "CUDA_VISIBLE_DEVICES")),
        ({"CUDA_VISIBLE_DEVICES": "GPU-a,GPU-b,GPU-c"}, ExpectedGpus(3, "CUDA_VISIBLE_DEVICES")),
        (
            {"SLURM_GPUS_ON_NODE": "8", "CUDA_VISIBLE_DEVICES": "0"},
            ExpectedGpus(8, "Slurm SLURM_GPUS_ON_NODE"),
        ),
        (
            {"_CONDOR_AssignedGPUs": "CUDA0,CUDA1", "SLURM_GPUS_ON_NODE": "8"},
            ExpectedGpus(2, "HTCondor _CONDOR_AssignedGPUs"),
        ),
    ],
)
def test_expected_gpu_count_follows_the_scheduler(
    environ: dict[str, str], expected: ExpectedGpus | None
) -> None:
    assert expected_gpu_count(environ) == expected


@pytest.mark.parametrize("value", ["\u00b2", "eight", "-1", "1e3"])
def test_a_slurm_gpu_count_that_is_not_a_number_is_an_input_error(value: str) -> None:
    with pytest.raises(InputError, match=r"SLURM_GPUS_ON_NODE=.* is not a GPU count"):
        expected_gpu_count({"SLURM_GPUS_ON_NODE": value})


@pytest.fixture
def gpu_less(monkeypatch: pytest.MonkeyPatch) -> None:
    """This machine as one without a usable GPU, whatever it has (the tests judge the same)."""
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 0)


@pytest.mark.usefixtures("gpu_less")
def test_auto_device_on_a_cpu_machine_is_cpu() -> None:
    assert resolve_device_mode("auto") == "cpu"
    assert resolve_device_mode("cpu") == "cpu"


@pytest.mark.usefixtures("gpu_less")
def test_cuda_without_a_gpu_is_an_environment_error() -> None:
    with pytest.raises(EnvironmentProblem, match="--device cuda"):
        resolve_device_mode("cuda")


def test_unknown_device_is_an_input_error() -> None:
    with pytest.raises(InputError):
        resolve_device_mode("tpu")


def test_gpus_that_refuse_a_second_process_are_named_by_their_compute_mode(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from gpuaccept.probe.hardware import unshared_gpus
    from tests import fake_nvml

    monkeypatch.setenv("GPUACCEPT_NVML_MODULE", "tests.fake_nvml")
    # NVML_COMPUTEMODE_*: 0 default, 1 exclusive-thread (gone), 2 prohibited, 3 exclusive-process
    modes = {"GPU-a": 0, "GPU-b": 3, "GPU-c": 2, "GPU-d": 1, "GPU-e": None}
    fake_nvml.use({"gpus": [{"uuid": u, "compute_mode": m} for u, m in modes.items()]})
    try:
        assert unshared_gpus(list(modes)) == ["GPU-b (exclusive-process)", "GPU-c (prohibited)"]
        assert unshared_gpus(["GPU-a", "GPU-d"]) == []
        # a GPU NVML cannot name or read (GPU-e: not supported) is left to the run itself
        assert unshared_gpus(["GPU-e", "GPU-zz"]) == []
    finally:
        fake_nvml.use(None)
    monkeypatch.setenv("GPUACCEPT_NVML_MODULE", "tests.no_nvml_here")
    assert unshared_gpus(["GPU-b"]) == []  # no NVML: nothing to say


def test_a_named_nvml_module_that_cannot_be_imported_is_said_as_such(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`watch` said 'nvidia-ml-py is not installed' where GPUACCEPT_NVML_MODULE named a shim
    that was not on the path: an operator would install a package that was there all along."""
    from gpuaccept.probe.hardware import nvml_missing_reason

    monkeypatch.setenv("GPUACCEPT_NVML_MODULE", "tests.no_nvml_here")
    said = nvml_missing_reason()
    assert said.startswith("GPUACCEPT_NVML_MODULE=tests.no_nvml_here cannot be imported (")
    assert "nvidia-ml-py" not in said
