"""The workload's judge on forged rank records (fast; the mutation tester's selection): a rerun
that differs in one bit, stragglers at nvidia-resiliency-ext's threshold, out-of-memory, the
throughput, MFU and goodput counts, floors for presets as shipped only."""

from __future__ import annotations

import dataclasses
import math

import pytest

from gpuaccept.checks import workload
from gpuaccept.checks.context import RanksOutcome
from gpuaccept.llm.figures import compute_figures
from gpuaccept.llm.plans import Overrides, accept_spec, fits_8b, llm_spec
from gpuaccept.results import Status
from tests.llm.helpers import context, judged, record, short


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


def test_the_judge_reads_what_ran_from_the_ranks_records_not_from_the_level() -> None:
    """A worker with fewer GPUs in sight than the parent must not be judged as another preset:
    the records carry the spec their ranks ran."""
    ran = llm_spec("1b", "bf16")
    outcome = RanksOutcome(1, "gloo", [dataclasses.replace(record(), spec=ran)])
    result = workload.conclude(context("cpu"), outcome)
    assert result.details["preset"] == "1b"
    assert result.details["seq_len"] == 2048
    assert "llm_1b_tokens_per_second_per_gpu" in {m.name for m in result.measurements}


def test_a_failure_before_any_record_names_the_workload_and_its_memory_figures() -> None:
    error = "rank 3 of 8 failed: WorkloadOutOfMemory: out of memory at step 2 on cuda:3: 70.1 GiB"
    outcome = RanksOutcome(8, "nccl", None, error)
    result = workload.conclude(context("cpu"), outcome)
    assert result.status == Status.FAIL
    assert result.message == "the workload did not fit: out of memory at step 2 on cuda:3: 70.1 GiB"
    hung = workload.conclude(context("cpu"), RanksOutcome(8, "nccl", None, "rank(s) 5 hung"))
    assert hung.message == "training the workload on 8 rank(s): rank(s) 5 hung"


def test_the_accept_spec_on_cpu_is_the_twin_every_rank_agrees_on() -> None:
    assert workload.spec_for(context("cpu"), 2) == accept_spec("standard", cpu=True)
