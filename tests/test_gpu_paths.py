"""The real GPU paths, for `pytest -m gpu` on a GPU node: CUDA-event timing, NVML, the per-GPU
warm workers, NCCL across every local GPU, and `accept` end to end. Each skips without a GPU; the
CPU twins of the same logic run everywhere else in the suite."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from gpuaccept.checks.context import CheckContext
from gpuaccept.references import load_shipped_references
from gpuaccept.results import Status
from gpuaccept.suite import level_settings
from gpuaccept.suite.runner import run_suite
from gpuaccept.suite.selection import CHECKS, LEVELS, CheckSpec

pytestmark = pytest.mark.gpu


def _gpus() -> list[tuple[int, str | None]]:
    from gpuaccept.probe.hardware import list_cuda_gpus

    return [(gpu.index, gpu.uuid) for gpu in list_cuda_gpus()]


def _cuda_context(level: str = "quick") -> CheckContext:
    return CheckContext(
        level=level,
        device_mode="cuda",
        settings=level_settings(level, "cuda"),
        references=load_shipped_references(),
    )


def test_cuda_event_timing_sees_the_work() -> None:
    from gpuaccept.measure.timing import time_repeats

    gpu = torch.device("cuda")
    a = torch.randn(4096, 4096, device=gpu)
    one = time_repeats(lambda: a @ a, gpu, 2, 5).median_seconds
    four = time_repeats(lambda: [a @ a for _ in range(4)], gpu, 2, 5).median_seconds
    assert 0 < one < four  # device-side time grows with the work launched


def test_nvml_reads_every_gpu_torch_sees() -> None:
    from gpuaccept.probe.hardware import load_nvml, nvml_gpu_count
    from gpuaccept.probe.nvml_health import read_gpu_health

    nvml = load_nvml()
    if nvml is None:
        pytest.skip("nvidia-ml-py is not installed on this GPU node")
    count = nvml_gpu_count()
    assert count is not None
    assert count >= torch.cuda.device_count()
    for index, uuid in _gpus():
        health = read_gpu_health(nvml, index, uuid)
        assert health is not None


def test_the_cuda_driver_answers_the_dma_buf_question() -> None:
    """The fabric check's GPUDirect question (probe/dmabuf.py), asked of the real driver through
    libcuda as NCCL asks it: a CUDA node answers yes or no, never "not known"."""
    from gpuaccept.probe.dmabuf import dmabuf_supported

    assert dmabuf_supported() in (True, False)


def test_compute_samples_power_and_clocks_under_load() -> None:
    """The load sampler on real NVML: readings while the matmuls run, judged without a fault on
    a healthy node, and the NVLink/fabric/MIG facts read without error."""
    from gpuaccept.checks import compute, health
    from gpuaccept.probe.hardware import load_nvml

    if load_nvml() is None:
        pytest.skip("nvidia-ml-py is not installed on this GPU node")
    result = compute.run(_cuda_context())
    trace = result.details["load"]["gpu0"]
    assert trace["summary"]["samples"] >= 5, trace["summary"]
    assert trace["summary"]["power_max_w"] > 0
    assert result.status is not Status.ERROR
    snapshot = health.run(_cuda_context())
    assert snapshot.status is not Status.ERROR, snapshot.message


def test_every_gpu_gets_its_own_warm_worker() -> None:
    spec = CheckSpec("pid", "FAKE", "tests.faults:check_reports_pid", frozenset(LEVELS))
    gpus = _gpus()
    (merged,), _, interrupted = run_suite([spec], _cuda_context(), 300, gpus)
    assert interrupted is None
    assert merged.status is Status.PASS
    per_device = merged.details.get("per_device", {"gpu0": merged.details})
    pids = {details["pid"] for details in per_device.values()}
    indices = {details["device_index"] for details in per_device.values()}
    assert len(pids) == len(gpus)
    assert os.getpid() not in pids
    assert indices == {index for index, _ in gpus}


def test_collectives_and_ddp_run_on_nccl_across_the_workers() -> None:
    specs = [spec for spec in CHECKS if spec.name in ("collectives", "ddp")]
    results, _, interrupted = run_suite(specs, _cuda_context("standard"), 600, _gpus())
    assert interrupted is None
    for result in results:
        assert result.status in (Status.PASS, Status.WARN), result.message
        assert result.details["backend"] == "nccl"


def test_accept_quick_passes_on_this_node(tmp_path: Path) -> None:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "gpuaccept",
            "accept",
            "--level",
            "quick",
            "--device",
            "cuda",
            "--report-dir",
            str(tmp_path),
            "--no-history",
        ],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    (report,) = tmp_path.glob("*.json")
    assert json.loads(report.read_text())["device_mode"] == "cuda"


def test_the_llm_workload_trains_on_every_gpu_with_fsdp2_and_is_deterministic() -> None:
    """Issue #32 on GPUs: the tiny preset in bf16 over NCCL on every local GPU trains below its
    convergence limit, its deterministic probe repeats bit for bit, and no rank straggles."""
    import dataclasses

    from gpuaccept.distributed.local_ranks import run_ranks
    from gpuaccept.llm.figures import compute_figures
    from gpuaccept.llm.plans import llm_spec
    from gpuaccept.llm.train import train_rank

    spec = llm_spec("tiny", "bf16")
    spec = dataclasses.replace(spec, compile=False)
    world = torch.cuda.device_count()
    records = run_ranks(train_rank, world, spec, 600, "nccl")
    figures = compute_figures(spec, records, peak_tflops=None)
    assert figures.non_finite is None
    assert figures.rerun_mismatch is None, figures.rerun_mismatch
    assert figures.final_loss < figures.convergence_limit, figures.losses[-10:]
    assert min(figures.straggler_scores) >= 0.75, figures.straggler_scores
    assert all(r.peak_memory_bytes and r.peak_memory_bytes > 0 for r in records)
