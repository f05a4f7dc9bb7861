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


def test_the_pattern_test_takes_its_share_of_what_the_driver_says_is_free() -> None:
    """checks/memory.pattern_budget on a real GPU: the bytes written follow cudaMemGetInfo's free
    memory times the level's fraction (whole chunks of it), and only a GPU that says it shares
    the CPU's memory (torch's `is_integrated`, GB10) is held to half of it, said so."""
    import dataclasses

    from gpuaccept.checks import memory

    context = _cuda_context("standard")
    context = dataclasses.replace(
        context,
        settings=dataclasses.replace(
            context.settings, pattern_fraction=0.02, pattern_max_bytes=1 << 40
        ),
    )
    torch.cuda.empty_cache()
    free, _ = torch.cuda.mem_get_info()
    integrated = bool(torch.cuda.get_device_properties(0).is_integrated)
    result = memory.run(context)
    assert result.status is not Status.ERROR, result.message
    (tested,) = [m.value for m in result.measurements if m.name == "pattern_bytes_tested"][:1]
    expected = int(free * 0.02)
    chunk = memory.PATTERN_CHUNK_BYTES
    # the check's own bandwidth buffers, still cached, lower what is free by its time
    assert int(expected * 0.9) - chunk <= tested <= expected, (tested, expected, integrated)
    assert ("pattern_budget" in result.details) == integrated, result.details


def test_nvml_compute_modes_agree_with_nvidia_smi() -> None:
    """probe/hardware.unshared_gpus, the NVLink-off screen's refusal, read from real NVML: the
    GPUs it names are those nvidia-smi shows as Prohibited or Exclusive_Process."""
    import shutil

    from gpuaccept.probe.hardware import load_nvml, unshared_gpus

    if load_nvml() is None or shutil.which("nvidia-smi") is None:
        pytest.skip("nvidia-ml-py or nvidia-smi is not installed on this GPU node")
    shown = subprocess.run(
        ["nvidia-smi", "--query-gpu=uuid,compute_mode", "--format=csv,noheader"],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout.splitlines()
    modes = dict(line.split(", ") for line in shown if line.strip())
    uuids = [uuid for _, uuid in _gpus() if uuid]
    assert set(uuids) <= set(modes), (uuids, modes)
    refusing = {u for u in uuids if modes[u] in ("Prohibited", "Exclusive_Process")}
    assert {entry.split(" ")[0] for entry in unshared_gpus(uuids)} == refusing, modes


def test_the_nvlink_off_screen_starts_nccl_ranks_of_its_own_beside_the_jobs() -> None:
    """suite/multinode's screen with NVLink off on a real GPU: while this process holds the GPU
    in an NCCL process group of its own (as a job's rank does), the node's collectives run in
    fresh ranks under NCCL_P2P_DISABLE=1 and NCCL_NVLS_ENABLE=0, and come back exact."""
    import torch.distributed as dist

    from gpuaccept.measure.collectives import AllReduceFigure
    from gpuaccept.suite.isolation import NVLINK_OFF_ENV
    from gpuaccept.suite.multinode import Launch, MultiNodeRun

    world = torch.cuda.device_count()
    torch.cuda.set_device(0)
    dist.init_process_group("nccl", store=dist.HashStore(), rank=0, world_size=1)
    try:
        held = torch.ones(1 << 20, device="cuda")
        dist.all_reduce(held)
        run = MultiNodeRun(
            _cuda_context("standard"), Launch(0, world, 0, world, 0, 1, "node-a", "torchrun")
        )
        figure = run._node_collectives(NVLINK_OFF_ENV)
    finally:
        dist.destroy_process_group()
    assert isinstance(figure, AllReduceFigure), figure
    assert figure.world_size == world
    assert figure.wrong_elements == 0
    assert all(other.wrong_elements == 0 for other in figure.others)
    assert figure.seconds > 0
