"""Our submit files, expanded by HTCondor's own code and matched against machine ads."""

from __future__ import annotations

import os
import re
import stat
from typing import Any

import pytest

from tests.htcondor.submit_files import (
    ALL_JOBS,
    CONTAINER_JOBS,
    REPO,
    SUBMIT_DIR,
    TARGETS,
    HTCondorValueError,
    expand,
    expand_text,
    machine_ad,
    matches,
)

GOOD = {
    "cuda12": {"arch": "X86_64", "driver": 12.9, "capability": 9.0},
    "gb10": {
        "arch": "aarch64",
        "driver": 13.0,
        "capability": 12.1,
        "memory_mib": 122570,
        "device": "NVIDIA GB10",
    },
}
# What each target must refuse: (why, machine ad changes from the target's good node).
REFUSED = {
    "cuda12": [
        ("capability too old", {"capability": 3.5, "device": "Tesla K40m"}),
        ("driver below CUDA 12.9", {"driver": 12.8}),
        ("driver far too old", {"driver": 12.4}),
        ("wrong architecture", {"arch": "aarch64", "device": "NVIDIA GH200 480GB"}),
        ("too little GPU memory", {"memory_mib": 6144, "capability": 8.6}),
    ],
    "gb10": [
        ("capability too old", {"capability": 7.0}),
        ("driver below CUDA 13.0", {"driver": 12.9}),
        ("wrong architecture", {"arch": "X86_64"}),
        ("too little GPU memory", {"memory_mib": 4096}),
    ],
}


def _node(target: str, job: str, **changes: Any) -> Any:
    gpus = 8 if job in ("bench-multigpu.sub", "burnin.sub") else 1
    return machine_ad(**{"gpus": gpus, **GOOD[target], **changes})


def _job(job: str, target: str) -> Any:
    [ad] = expand(job, GPUACCEPT_TARGET=target)[:1]
    return ad


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("job", ALL_JOBS)
def test_job_matches_a_node_its_image_can_drive(job: str, target: str) -> None:
    container = job != "accept-vanilla.sub"
    assert matches(_job(job, target), _node(target, job, container=container))


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("job", ALL_JOBS)
def test_job_refuses_nodes_it_cannot_run_on(job: str, target: str) -> None:
    ad = _job(job, target)
    for why, changes in REFUSED[target]:
        assert not matches(ad, _node(target, job, **changes)), why


@pytest.mark.parametrize("job", CONTAINER_JOBS)
def test_container_jobs_refuse_nodes_without_container_support(job: str) -> None:
    assert not matches(_job(job, "cuda12"), _node("cuda12", job, container=False))


def test_vanilla_job_runs_without_container_support() -> None:
    ad = _job("accept-vanilla.sub", "cuda12")
    assert matches(ad, _node("cuda12", "accept-vanilla.sub", container=False))
    assert "ContainerImage" not in ad


def test_a100_40gb_reporting_40536_mib_is_not_refused() -> None:
    a100 = {"capability": 8.0, "memory_mib": 40536, "device": "NVIDIA A100-SXM4-40GB"}
    assert matches(_job("accept.sub", "cuda12"), _node("cuda12", "accept.sub", **a100))
    # The documented way to ask for a 40 GB class GPU admits it; "40GB" (40960 MiB) would not.
    [forty] = expand("accept.sub", GPU_MEMORY_MIB="40000")
    assert matches(forty, _node("cuda12", "accept.sub", **a100))
    [pitfall] = expand("accept.sub", GPU_MEMORY_MIB="40GB")
    assert not matches(pitfall, _node("cuda12", "accept.sub", **a100))


def test_multigpu_job_needs_every_gpu_it_asks_for() -> None:
    [eight] = expand("bench-multigpu.sub")
    assert eight["RequestGPUs"] == 8
    assert not matches(eight, machine_ad(gpus=4))
    [four] = expand("bench-multigpu.sub", GPUS="4")
    assert matches(four, machine_ad(gpus=4))


def test_sweep_pins_one_job_to_each_listed_machine() -> None:
    jobs = expand("sweep.sub")
    names = (REPO / "tests/htcondor/machines.txt").read_text().split()
    assert len(jobs) == len(names) == 2
    for job, name in zip(jobs, names, strict=True):
        assert [matches(job, machine_ad(name=other)) for other in names] == [
            other == name for other in names
        ]
        assert f"results/sweep/{name}.json" in job["TransferOutputRemaps"]


def test_image_must_be_given() -> None:
    text = (SUBMIT_DIR / "accept.sub").read_text()
    with pytest.raises(HTCondorValueError):
        expand_text(text)
    [ad] = expand("accept.sub", IMAGE="docker://registry.example/gpuaccept:cuda12-abc1234")
    assert ad["ContainerImage"] == "docker://registry.example/gpuaccept:cuda12-abc1234"


@pytest.mark.parametrize("job", ALL_JOBS)
@pytest.mark.parametrize(
    "target", ["gb200", "cuda12_ARCH", "x_ARCH", "cuda12_PLATFORM", "$(IMAGE)", "12"]
)
def test_a_target_that_is_not_one_is_refused_at_submit(job: str, target: str) -> None:
    """GPUACCEPT_TARGET (issue #30 §9): `condor_submit` stops on its `error :` line; here
    HTCondor's Python bindings raise where condor_submit would."""
    with pytest.raises(HTCondorValueError):
        expand(job, GPUACCEPT_TARGET=target, PACK="gpuaccept-cuda12.sh")
    assert "error : GPUACCEPT_TARGET must be cuda12 or gb10" in (SUBMIT_DIR / job).read_text()


@pytest.mark.parametrize("job", ALL_JOBS)
@pytest.mark.parametrize(
    ("given", "target"), [("GB10", "gb10"), ("Cuda12", "cuda12"), ("", "cuda12")]
)
def test_a_target_in_other_letters_is_the_target_in_its_own(
    job: str, given: str, target: str
) -> None:
    """Macro names are blind to case, so GB10 found gb10's facts but the job got "GB10": a pack
    gpuaccept-GB10.sh that exists nowhere, and that name in its environment."""
    [ad] = expand(job, GPUACCEPT_TARGET=given)[:1]
    environment = ad["Env"] if "Env" in ad else ad["Environment"]
    assert f"GPUACCEPT_TARGET={target}" in environment
    if job == "accept-vanilla.sub":
        assert f"gpuaccept-{target}.sh" in ad["TransferInput"]
    assert ad["Requirements"] == _job(job, target)["Requirements"]


@pytest.mark.parametrize("job", ALL_JOBS)
def test_failures_hold_with_a_reason_instead_of_completing(job: str) -> None:
    ad = _job(job, "cuda12")
    for code, reason in [(1, "NOT accepted"), (2, "input error"), (3, "environment error")]:
        ad["ExitBySignal"] = False
        ad["ExitCode"] = code
        assert ad.eval("OnExitHold") is True
        assert reason in ad.eval("OnExitHoldReason")
        assert ad.eval("OnExitHoldSubCode") == code
    ad["ExitCode"] = 0
    assert ad.eval("OnExitHold") is False
    ad["ExitBySignal"] = True
    ad["ExitSignal"] = 9
    assert ad.eval("OnExitHold") is True
    assert ad.eval("OnExitHoldReason") == "gpuaccept killed by signal 9"


def test_training_checkpoints_itself_and_brings_data_and_model() -> None:
    ad = _job("train-mnist.sub", "cuda12")
    assert ad["SuccessCheckpointExitCode"] == 85
    assert ad["TransferCheckpoint"] == "mnist.ckpt"
    assert "MNIST_data.tar.gz" in ad["TransferInput"]
    assert "mnist_cnn.pt = results/train-mnist-" in ad["TransferOutputRemaps"]
    assert ad["Args"].split() == ["MNIST_data.tar.gz", "20", "0.99"]
    [other] = expand("train-mnist.sub", DATA="/data/mnist/MNIST.tgz")
    assert "/data/mnist/MNIST.tgz" in other["TransferInput"]
    assert other["Args"].split()[0] == "MNIST.tgz"  # the name it has in the sandbox


@pytest.mark.parametrize("job", ALL_JOBS)
def test_executables_and_inputs_exist(job: str) -> None:
    ad = _job(job, "cuda12")
    executable = REPO / ad["Cmd"]
    assert executable.is_file()
    assert executable.stat().st_mode & stat.S_IXUSR
    inputs = [p.strip() for p in ad["TransferInput"].split(",")]
    for path in inputs:
        if path.startswith("tasks/"):
            assert (REPO / path).is_file(), path
    for log in ("Out", "Err", "UserLog"):
        assert str(REPO / ad[log]).startswith(str(REPO / "results")), log


def test_every_submit_file_is_tested() -> None:
    assert sorted(p.name for p in SUBMIT_DIR.glob("*.sub")) == sorted(ALL_JOBS)


def test_environment_tells_the_job_its_target() -> None:
    ad = _job("accept.sub", "gb10")
    assert re.search(r"GPUACCEPT_TARGET=gb10", ad["Env"] if "Env" in ad else ad["Environment"])
    assert os.environ["CONDOR_CONFIG"] == "/dev/null"


def test_burn_in_takes_the_whole_node_and_checkpoints_itself() -> None:
    ad = _job("burnin.sub", "cuda12")
    assert ad["RequestGPUs"] == 8
    assert ad["SuccessCheckpointExitCode"] == 85
    assert ad["TransferCheckpoint"] == "burnin.ckpt"
    assert ad["Args"].split() == ["24h", "5m", "12"]
    assert "report.json = results/burnin-" in ad["TransferOutputRemaps"]
    [short] = expand("burnin.sub", DURATION="10m", WINDOW="1m", WINDOWS_PER_RUN="5", GPUS="1")
    assert short["Args"].split() == ["10m", "1m", "5"]
    assert short["RequestGPUs"] == 1
