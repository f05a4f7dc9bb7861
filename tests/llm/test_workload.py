"""The LLM workload's CPU twin (2 gloo ranks, FSDP2) and its judge: a rank slowed on purpose is
named, a NaN fails, a rerun that differs fails, an out-of-memory names its figures, floors apply
to the presets as shipped only."""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import pytest
import torch

from gpuaccept.checks import workload
from gpuaccept.checks.context import CheckContext, RanksOutcome
from gpuaccept.checks.judging import Findings, Target
from gpuaccept.distributed.local_ranks import run_ranks
from gpuaccept.llm.figures import compute_figures
from gpuaccept.llm.plans import Overrides, accept_spec, fits_8b, llm_spec
from gpuaccept.llm.train import LlmSpec, RankRecord, WorkloadOutOfMemory, train_rank
from gpuaccept.references import load_shipped_references
from gpuaccept.results import Status
from gpuaccept.suite import level_settings

H200 = Target(0, "NVIDIA H200")


def context(mode: str = "cpu") -> CheckContext:
    return CheckContext(
        level="standard",
        device_mode=mode,
        settings=level_settings("standard", mode),
        references=load_shipped_references(),
    )


def short(**changes: object) -> LlmSpec:
    spec = llm_spec("tiny", "fp32", Overrides(steps=8))
    return dataclasses.replace(spec, warmup_steps=2, **changes)  # type: ignore[arg-type]


def record(rank: int = 0, **changes: object) -> RankRecord:
    base = RankRecord(
        rank=rank,
        world_size=2,
        device="cuda:0",
        device_name="NVIDIA H200",
        losses=[6.0, 4.0, 3.0, 2.0],
        step_seconds=[5.0, 1.0, 1.0, 1.0],
        compute_seconds=[0.5, 0.5, 0.5, 0.5],
        probe_losses=[6.0, 4.0],
        rerun_losses=[6.0, 4.0],
        determinism_unchecked=None,
        setup_seconds=2.0,
        wall_seconds=10.0,
    )
    return dataclasses.replace(base, **changes)  # type: ignore[arg-type]


def judged(spec: LlmSpec, records: list[RankRecord] | None, mode: str = "cuda", error: str = ""):
    findings = Findings("workload", "TRAIN")
    outcome = RanksOutcome(len(records or [1]), "nccl", records, error or None)
    figures = workload.judge(context(mode), H200, spec, outcome, findings)
    return findings, figures


def ranks(spec: LlmSpec) -> list[RankRecord]:
    return run_ranks(train_rank, 2, spec, 300, "gloo")


@pytest.mark.slow
def test_a_rank_slowed_on_purpose_is_named_and_the_rerun_is_bit_identical() -> None:
    spec = short(slow_rank=1, slow_seconds=0.02)
    records = ranks(spec)
    findings, figures = judged(spec, records, mode="cpu")
    assert figures is not None
    assert figures.straggler_scores[0] == 1.0
    assert figures.straggler_scores[1] < 0.5
    assert any("rank 1 is a straggler" in w for w in findings.warnings), findings.warnings
    assert not any("rank 0 is a straggler" in w for w in findings.warnings)
    # the probe trained its steps twice from the same seed: bit for bit the same losses
    for rank_record in records:
        assert rank_record.probe_losses == rank_record.rerun_losses
        assert len(rank_record.probe_losses) == spec.determinism_steps
    assert figures.rerun_mismatch is None


@pytest.mark.slow
def test_a_nan_in_the_parameters_fails_the_run_at_its_step() -> None:
    spec = short(poison_step=3)
    records = ranks(spec)
    assert all(r.non_finite_step == 3 and len(r.losses) == 4 for r in records)
    findings, _ = judged(spec, records, mode="cpu")
    assert "the loss was NaN or Inf at step 3 on rank 0" in findings.failures
    # no determinism probe after a NaN: nothing to compare
    assert all(r.probe_losses == [] for r in records)


@pytest.mark.slow
def test_a_run_too_short_to_learn_fails_convergence() -> None:
    spec = short()
    findings, figures = judged(spec, ranks(spec), mode="cpu")
    assert figures is not None
    assert figures.final_loss > figures.convergence_limit
    assert any("did not learn what a healthy node learns" in f for f in findings.failures)


def test_a_rerun_that_differs_in_one_bit_fails() -> None:
    spec = short()
    first = 4.0
    again = math.nextafter(first, 5.0)
    findings, figures = judged(spec, [record(), record(1, rerun_losses=[6.0, again])])
    assert figures is not None
    assert figures.rerun_mismatch == (1, 1, first, again)
    assert any("not reproducible here" in f and "rank 1" in f for f in findings.failures)
    findings, _ = judged(spec, [record(rerun_losses=[6.0, -0.0], probe_losses=[6.0, 0.0])])
    assert any("not reproducible" in f for f in findings.failures), "-0.0 is another bit pattern"


def test_a_probe_that_could_not_run_deterministically_warns() -> None:
    spec = short()
    records = [record(probe_losses=[], rerun_losses=[], determinism_unchecked="cuBLAS said no")]
    findings, _ = judged(spec, records)
    assert findings.warnings == ["determinism not checked: rank 0: cuBLAS said no"]


def test_a_gpu_straggler_fails_where_a_cpu_one_warns() -> None:
    spec = short()
    slow = record(1, compute_seconds=[0.5, 1.0, 1.0, 1.0])
    gpu, _ = judged(spec, [record(), slow])
    cpu, _ = judged(spec, [record(), slow], mode="cpu")
    message = "rank 1 is a straggler: its forward compute took 2.00x the fastest rank's"
    assert any(message in f for f in gpu.failures)
    assert any(message in w for w in cpu.warnings)
    assert not cpu.failures
    # nvidia-resiliency-ext's threshold: a score of exactly 0.75 is no straggler
    edge = record(1, compute_seconds=[0.5, 0.5 / 0.75, 0.5 / 0.75, 0.5 / 0.75])
    assert not any("straggler" in f for f in judged(spec, [record(), edge])[0].failures)


def test_out_of_memory_fails_with_its_memory_figures() -> None:
    error = (
        "rank 0 of 1 failed: WorkloadOutOfMemory: out of memory at step 0 on cuda:0: 138.0 GiB "
        "allocated at peak, 138.2 GiB reserved, 139.8 GiB on the GPU at train.py:209"
    )
    findings, figures = judged(short(), None, error=error)
    assert figures is None
    assert findings.failures == [
        "the tiny model did not fit: out of memory at step 0 on cuda:0: 138.0 GiB allocated "
        "at peak, 138.2 GiB reserved, 139.8 GiB on the GPU"
    ]


def test_an_out_of_memory_in_a_step_becomes_the_workloads_own_error(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    import torch.distributed as dist

    from gpuaccept.llm import train

    def no_memory(*args: object) -> None:
        raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")

    monkeypatch.setattr(train, "_step", no_memory)
    dist.init_process_group("gloo", init_method=f"file://{tmp_path / 's'}", rank=0, world_size=1)
    try:
        with pytest.raises(WorkloadOutOfMemory, match="out of memory at step 0 on cpu"):
            train_rank(0, 1, short())
    finally:
        dist.destroy_process_group()


def test_throughput_mfu_and_goodput_are_counted_from_the_timed_steps() -> None:
    spec = dataclasses.replace(short(), steps=4, warmup_steps=1)
    figures = compute_figures(spec, [record(), record(1)], peak_tflops=989.0)
    tokens = spec.local_batch * spec.shape.seq_len
    assert figures.tokens_per_second_per_gpu == pytest.approx(tokens)  # 3 steps in 3 s
    assert figures.tflops_per_gpu == pytest.approx(tokens * figures.flops_per_token / 1e12)
    assert figures.mfu == pytest.approx(figures.tflops_per_gpu / 989.0)
    assert figures.goodput == pytest.approx(4 * 1.0 / 10.0)  # 4 steps at the median 1 s, 10 s
    assert figures.final_loss == 2.0
    assert figures.losses == [6.0, 4.0, 3.0, 2.0]


def test_floors_apply_to_a_preset_as_shipped_and_not_to_a_variant() -> None:
    shipped = llm_spec("1b", "bf16")
    findings, _ = judged(shipped, [record()])
    names = {m.name: m for m in findings.measurements}
    rate = names["llm_1b_tokens_per_second_per_gpu"]
    assert rate.reference is not None
    assert rate.reference.value == 24956
    assert rate.verdict.value == "fail"  # 4,096 tokens/s: below 0.6 x 24,956
    fast = record(step_seconds=[5.0, 0.1, 0.1, 0.1])
    findings, _ = judged(shipped, [fast])
    rate = {m.name: m for m in findings.measurements}["llm_1b_tokens_per_second_per_gpu"]
    assert rate.verdict.value == "pass"
    variant = llm_spec("1b", "bf16", Overrides(layers=2))
    findings, _ = judged(variant, [record()])
    custom = {m.name: m for m in findings.measurements}["llm_custom_tokens_per_second_per_gpu"]
    assert custom.reference is None


def test_a_1b_run_below_its_floor_fails_the_check() -> None:
    shipped = llm_spec("1b", "bf16")
    slow = record(step_seconds=[5.0, 100.0, 100.0, 100.0], wall_seconds=400.0)
    findings, _ = judged(shipped, [slow])
    result = findings.conclude("")
    assert result.status == Status.FAIL
    assert "llm_1b_tokens_per_second_per_gpu" in result.message


def test_accept_runs_the_twin_on_cpu_and_8b_only_where_the_gpus_hold_it() -> None:
    assert accept_spec("standard", cpu=True).steps == 150
    assert accept_spec("full", cpu=True).steps == 500
    assert accept_spec("standard", cpu=False).shape.dim == 2048
    assert not fits_8b(141 * 1024**3)  # one H200: measured out of memory
    assert fits_8b(8 * 80 * 1024**3)
    assert accept_spec("full", cpu=False, total_gpu_memory_bytes=8 * 80 * 1024**3).shape.dim == 4096
    assert accept_spec("full", cpu=False, total_gpu_memory_bytes=141 * 1024**3).shape.dim == 2048
