"""The workload's judge on forged rank records (fast; the mutation tester's selection): a rerun
that differs in one bit, stragglers at nvidia-resiliency-ext's threshold, out-of-memory, the
throughput, MFU and goodput counts, floors for presets as shipped only."""

from __future__ import annotations

import dataclasses
import math

import pytest

from gpuaccept.checks import workload
from gpuaccept.checks.context import RanksOutcome
from gpuaccept.checks.judging import Findings, Target
from gpuaccept.errors import InputError
from gpuaccept.llm.figures import compute_figures
from gpuaccept.llm.plans import Overrides, accept_spec, llm_spec
from gpuaccept.results import Status
from tests.llm.helpers import H100, H200, context, eight_ranks, judged, record, short


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
    speed, determinism = findings.warnings  # no tiny floor on an H200: speed NOT JUDGED
    assert speed.startswith("speed NOT JUDGED: no tiny floor for NVIDIA H200 (h200)")
    assert determinism == "determinism not checked: rank 0: cuBLAS said no"


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
    """8b at torchtitan's configuration (batch 2, per-op checkpointing, logits freed, 8 ranks) on
    H100s: held to torchtitan's 5,762 tokens/s."""
    shipped = llm_spec("8b", "bf16")
    slow = eight_ranks(step_seconds=[5.0, 10.0, 10.0, 10.0], wall_seconds=40.0)
    findings, _ = judged(shipped, slow, target=H100)
    names = {m.name: m for m in findings.measurements}
    rate = names["llm_8b_tokens_per_second_per_gpu"]
    assert rate.reference is not None
    assert rate.reference.value == 5762
    assert rate.verdict.value == "fail"  # 1,638 tokens/s: below 0.8 x 5,762
    findings, _ = judged(shipped, eight_ranks(), target=H100)
    rate = {m.name: m for m in findings.measurements}["llm_8b_tokens_per_second_per_gpu"]
    assert rate.verdict.value == "pass"  # 16,384 tokens/s
    variant = llm_spec("8b", "bf16", Overrides(layers=2))
    findings, _ = judged(variant, eight_ranks(), target=H100)
    custom = {m.name: m for m in findings.measurements}["llm_custom_tokens_per_second_per_gpu"]
    assert custom.reference is None


def test_an_8b_run_below_its_floor_fails_the_check() -> None:
    shipped = llm_spec("8b", "bf16")
    slow = eight_ranks(step_seconds=[5.0, 100.0, 100.0, 100.0], wall_seconds=400.0)
    findings, _ = judged(shipped, slow, target=H100)
    result = findings.conclude("")
    assert result.status == Status.FAIL
    assert "llm_8b_tokens_per_second_per_gpu" in result.message
    assert "llm_8b_mfu" in result.message
    assert result.not_judged == {}


def test_accept_runs_the_twin_on_cpu_and_8b_only_where_each_gpu_holds_it() -> None:
    h200, h100 = 150_109_880_320, 85_017_493_504  # as torch reported them (tests/llm/test_memory)
    assert accept_spec("standard", cpu=True).steps == 500
    assert accept_spec("full", cpu=True).steps == 500
    assert accept_spec("standard", cpu=False).shape.dim == 2048
    # one H200: measured out of memory; 8 x H100: a plan of the memory model (test_memory.py)
    assert accept_spec("full", cpu=False, gpu_memory_bytes=h100, shards=8).shape.dim == 4096
    longer = accept_spec("full", cpu=False, gpu_memory_bytes=h200, shards=1)
    assert longer.shape.dim == 2048
    assert longer.steps == 2 * accept_spec("standard", cpu=False).steps == 120


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


def test_a_nan_fails_at_the_first_step_of_any_rank_and_names_it() -> None:
    spec = short()
    nan = float("nan")
    records = [
        record(0, losses=[6.0, 4.0, 3.0, nan], non_finite_step=3),
        record(1, losses=[6.0, 5.0, nan], non_finite_step=2),
    ]
    findings, figures = judged(spec, records)
    assert figures is not None
    assert figures.non_finite == (1, 2)
    assert findings.failures[0] == "the loss was NaN or Inf at step 2 on rank 1"
    # a NaN run is not also judged on convergence: one cause, said once
    assert not any("did not learn" in f for f in findings.failures)


def test_convergence_is_judged_against_the_floor_plus_its_margin_exactly() -> None:
    spec = dataclasses.replace(short(), convergence_margin=0.25)
    _, figures = judged(spec, [record()])
    assert figures is not None
    gap = figures.first_order_entropy - figures.entropy_rate
    assert figures.convergence_limit == pytest.approx(figures.entropy_rate + 0.25 * gap)
    at_limit = [figures.convergence_limit] * 4
    findings, _ = judged(spec, [record(losses=at_limit)])
    assert not findings.failures, "a loss exactly at the limit passes"
    above = [math.nextafter(figures.convergence_limit, 99.0)] * 4
    findings, _ = judged(spec, [record(losses=above)])
    (failure,) = findings.failures
    assert failure.startswith(f"the loss ended at {above[0]:.3f} nats, above")
    assert "floor 1.111 plus 0.25 of the way to its first-order entropy 3.202) after 8 steps" in (
        failure
    )


def test_the_final_loss_is_the_mean_of_the_last_tenth_of_the_steps() -> None:
    spec = dataclasses.replace(short(), steps=20, warmup_steps=2)
    losses = [10.0] * 18 + [2.0, 4.0]
    _, figures = judged(spec, [record(losses=losses, step_seconds=[1.0] * 20)])
    assert figures is not None
    assert figures.final_loss == 3.0
    # the ranks' losses are averaged step by step, over the steps every rank finished
    _, figures = judged(spec, [record(losses=[4.0, 2.0]), record(1, losses=[2.0, 0.0, 9.0])])
    assert figures is not None
    assert figures.losses == [3.0, 1.0]


def test_timed_steps_leave_out_the_warm_up_and_fall_back_to_the_last_step() -> None:
    spec = dataclasses.replace(short(), local_batch=1, warmup_steps=3)
    shape_tokens = spec.shape.seq_len
    _, figures = judged(spec, [record(step_seconds=[9.0, 9.0, 9.0, 2.0], wall_seconds=40.0)])
    assert figures is not None
    assert figures.tokens_per_second_per_gpu == pytest.approx(shape_tokens / 2.0)
    assert figures.median_step_seconds == 2.0
    assert figures.goodput == pytest.approx(4 * 2.0 / 40.0)
    warm_only = dataclasses.replace(spec, warmup_steps=10)
    _, figures = judged(warm_only, [record(step_seconds=[9.0, 9.0, 9.0, 4.0])])
    assert figures is not None
    assert figures.tokens_per_second_per_gpu == pytest.approx(shape_tokens / 4.0)


def test_a_rank_with_no_time_or_no_compute_is_no_straggler_and_no_number() -> None:
    spec = short()
    zero = record(1, compute_seconds=[0.0] * 4, step_seconds=[0.0] * 4, wall_seconds=0.0)
    findings, figures = judged(spec, [record(), zero])
    assert figures is not None
    assert figures.straggler_scores == [1.0, 1.0]  # 0 s timed nothing: no score, no yardstick
    assert not any("straggler" in w for w in findings.warnings + findings.failures)
    assert figures.goodput == pytest.approx(4 * 1.0 / 10.0)  # rank 0's: rank 1 has none
    findings, figures = judged(spec, [zero])
    assert figures is not None
    assert math.isnan(figures.goodput)
    assert "goodput could not be computed (no timed step)" in findings.warnings


def test_memory_figures_are_the_largest_peak_and_the_smallest_gpu() -> None:
    spec = short()
    records = [
        record(0, peak_memory_bytes=5 * 2**30, total_memory_bytes=80 * 2**30),
        record(1, peak_memory_bytes=7 * 2**30, total_memory_bytes=40 * 2**30),
    ]
    findings, figures = judged(spec, records)
    assert figures is not None
    assert (figures.peak_memory_bytes, figures.total_memory_bytes) == (7 * 2**30, 40 * 2**30)
    peak = {m.name: m for m in findings.measurements}["llm_peak_memory_gib"]
    assert (peak.value, peak.unit) == (7.0, "GiB")


def test_what_the_check_reports_names_units_and_details() -> None:
    spec = llm_spec("1b", "bf16")
    records = [record(0, peak_memory_bytes=2**30), record(1, device_name="NVIDIA H200")]
    findings, figures = judged(spec, records)
    assert figures is not None
    shown = [(m.name, m.unit, m.device_index) for m in findings.measurements]
    assert shown == [
        ("llm_1b_tokens_per_second_per_gpu", "tokens/s", 0),
        ("llm_1b_tflops_per_gpu", "TFLOPS", 0),
        ("llm_1b_mfu", "ratio", 0),
        ("llm_goodput", "ratio", None),
        ("llm_median_step_seconds", "s", None),
        ("llm_final_loss", "nats", None),
        ("llm_loss_floor", "nats", None),
        ("llm_peak_memory_gib", "GiB", 0),
        ("llm_rank0_straggler_score", "ratio", None),
        ("llm_rank1_straggler_score", "ratio", None),
    ]
    values = {m.name: m.value for m in findings.measurements}
    # the H200's dense bf16 peak from references.toml
    assert values["llm_1b_mfu"] == pytest.approx(values["llm_1b_tflops_per_gpu"] / 989.0)
    assert figures.mfu == values["llm_1b_mfu"]
    assert values["llm_loss_floor"] == figures.entropy_rate
    details = findings.details
    assert {k: details[k] for k in ("preset", "ranks", "backend", "layers", "dim")} == {
        "preset": "1b",
        "ranks": 2,
        "backend": "nccl",
        "layers": 16,
        "dim": 2048,
    }
    assert {k: details[k] for k in ("seq_len", "local_batch", "steps", "warmup_steps")} == {
        "seq_len": 2048,
        "local_batch": 2,
        "steps": 60,
        "warmup_steps": 10,
    }
    assert (details["precision"], details["checkpointing"], details["compile"]) == (
        "bf16",
        "none",
        False,
    )
    assert details["first_order_entropy"] == figures.first_order_entropy
    assert details["straggler_scores"] == [1.0, 1.0]
    assert details["median_step_seconds_per_rank"] == [1.0, 1.0]
    assert details["setup_seconds"] == 2.0
    assert details["flops_per_token"] == figures.flops_per_token


def test_no_mfu_where_the_gpu_has_no_known_peak() -> None:
    spec = llm_spec("1b", "bf16")
    findings = Findings("workload", "TRAIN")
    outcome = RanksOutcome(1, "nccl", [dataclasses.replace(record(), spec=spec)])
    figures = workload.judge(
        context("cuda"), Target(0, "Mystery GPU 9000"), spec, outcome, findings
    )
    assert figures is not None
    assert figures.mfu is None
    assert "llm_1b_mfu" not in {m.name for m in findings.measurements}
    assert workload.peak_bf16_tflops(context("cpu"), Target(None, "cpu")) is None
    assert workload.peak_bf16_tflops(context("cuda"), Target(0, "NVIDIA H100 80GB HBM3")) == 989


def test_the_pass_message_says_what_ran_and_what_held() -> None:
    spec = llm_spec("1b", "bf16")
    outcome = RanksOutcome(1, "nccl", [dataclasses.replace(record(), spec=spec)])
    result = workload.conclude(context("cpu"), outcome)
    assert result.name == "workload"
    assert result.area == "TRAIN"
    assert result.message.startswith("1b on 1 nccl rank(s): 4,096 tokens/s per rank, ")
    # on the CPU: no peak, so no MFU, and the message says why
    assert "TFLOPS per rank (CPU twin: no MFU, no GPU peak; speed not judged); loss" in (
        result.message
    )
    assert result.message.endswith("first 3 losses bit-identical on a rerun"), result.message


def test_an_out_of_memory_said_twice_keeps_the_whole_message() -> None:
    error = "rank 0 failed: WorkloadOutOfMemory: a: WorkloadOutOfMemory: b at train.py:9"
    findings, _ = judged(short(), None, error=error)
    assert findings.failures == ["the tiny model did not fit: a: WorkloadOutOfMemory: b"]
    findings, _ = judged(short(), None, error="rank 0 of 2 failed: boom")
    assert findings.failures == ["training the tiny model on 1 rank(s): rank 0 of 2 failed: boom"]


def test_a_gpu_job_runs_8b_at_full_only_where_all_its_gpus_hold_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import types

    import torch

    gib = 1024**3
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(
        torch.cuda,
        "get_device_properties",
        lambda index: types.SimpleNamespace(total_memory=80 * gib),
    )
    monkeypatch.setattr(torch.distributed, "is_initialized", lambda: False)
    full = dataclasses.replace(context("cuda"), level="full")
    assert workload.spec_for(full, 8).shape.dim == 4096  # 8 x 80 GiB hold 8b
    assert workload.spec_for(full, 1).shape.dim == 2048  # one does not
    assert workload.spec_for(context("cuda"), 8).shape.dim == 2048  # standard: 1b


def test_details_keep_the_loss_curve_and_the_floors_and_a_failure_its_ranks() -> None:
    spec = short()
    findings, figures = judged(spec, [record(losses=[6.1234567, 4.0, 3.0, 2.0])])
    assert figures is not None
    details = findings.details
    assert details["losses"] == [6.123457, 4.0, 3.0, 2.0]
    assert details["entropy_rate"] == figures.entropy_rate
    assert details["convergence_limit"] == figures.convergence_limit
    failed = Findings("workload", "TRAIN")
    outcome = RanksOutcome(4, "nccl", None, None)
    workload.judge(context("cpu"), H200, None, outcome, failed)
    assert failed.details == {"ranks": 4, "backend": "nccl"}
    assert failed.failures == ["training the workload on 4 rank(s): no rank returned"]
    failed = Findings("workload", "TRAIN")
    workload.judge(context("cpu"), H200, short(), outcome, failed)
    assert failed.failures == ["training the tiny model on 4 rank(s): no rank returned"]


def test_a_variant_is_reported_in_the_same_units_with_its_mfu() -> None:
    variant = llm_spec("1b", "bf16", Overrides(layers=2))
    findings, _ = judged(variant, [record()])
    shown = {m.name: m.unit for m in findings.measurements}
    assert shown["llm_custom_tokens_per_second_per_gpu"] == "tokens/s"
    assert shown["llm_custom_tflops_per_gpu"] == "TFLOPS"
    assert shown["llm_custom_mfu"] == "ratio"
    cpu, _ = judged(variant, [record()], mode="cpu")
    assert "llm_custom_mfu" not in {m.name for m in cpu.measurements}


def test_a_rerun_mismatch_says_what_it_may_be() -> None:
    findings, _ = judged(short(), [record(rerun_losses=[6.0, 5.0])])
    assert findings.failures == [
        "a rerun with the same seed, data and stack gave another loss at step 1 on rank 0 (4.0 "
        "then 5.0): training is not reproducible here (silent data corruption, or a kernel that "
        "is not deterministic)"
    ]


def test_goodput_counts_a_run_shorter_than_a_second_and_steps_of_differing_time() -> None:
    spec = dataclasses.replace(short(), warmup_steps=1)
    fast = record(step_seconds=[0.3, 0.1, 0.3, 0.2], wall_seconds=0.5)
    _, figures = judged(spec, [fast])
    assert figures is not None
    assert figures.median_step_seconds == pytest.approx(0.2)
    assert figures.goodput == pytest.approx(4 * 0.2 / 0.5)
    tokens = spec.local_batch * spec.shape.seq_len
    assert figures.tokens_per_second_per_gpu == pytest.approx(3 * tokens / 0.6)


def test_a_failing_check_says_its_failures_and_a_passing_one_its_mfu(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    spec = llm_spec("1b", "bf16")
    failing = RanksOutcome(1, "nccl", [dataclasses.replace(record(rerun_losses=[1.0]), spec=spec)])
    result = workload.conclude(context("cpu"), failing)
    assert result.status == Status.FAIL
    assert result.message.startswith("a rerun with the same seed")
    monkeypatch.setattr(workload, "world", lambda context: (8, "nccl", H100))
    eight = llm_spec("8b", "bf16")
    fast = eight_ranks(step_seconds=[5.0, 2.0, 2.0, 2.0])
    passing = RanksOutcome(8, "nccl", [dataclasses.replace(r, spec=eight) for r in fast])
    result = workload.conclude(context("cuda"), passing)
    assert result.status == Status.PASS, result.message
    # 8,192 tokens/s x 57.9 GFLOP per token = 474 TFLOPS of the H100's 989
    assert "8,192 tokens/s per GPU, 474.4 TFLOPS per GPU, MFU 48.0%; loss" in result.message


def test_across_nodes_each_gpu_is_held_to_its_own_nodes_speed() -> None:
    spec = short()
    tokens = spec.local_batch * spec.shape.seq_len  # 1 s steps: `tokens` tokens/s per GPU

    def across(alone: float | None, nodes: int = 2) -> list:
        return [record(r, nodes=nodes, one_node_tokens_per_second=alone) for r in (0, 1)]

    findings, figures = judged(spec, across(tokens / 0.85))
    assert figures is not None
    assert figures.scaling_efficiency == pytest.approx(0.85)
    assert figures.nodes == 2
    assert findings.failures == [
        "across 2 nodes each GPU trained 0.85 of the tokens/s it trained with its own node "
        "alone (floor 0.9): the fabric between the nodes, or one node, holds the job back"
    ]
    shown = {m.name: (m.value, m.unit) for m in findings.measurements}
    assert shown["llm_scaling_efficiency"] == (pytest.approx(0.85), "ratio")
    assert findings.details["node_count"] == 2
    # just above the floor: no failure; on the CPU twin a warning, never a failure
    assert not judged(spec, across(tokens / 0.9001))[0].failures
    cpu, _ = judged(spec, across(tokens / 0.85), mode="cpu")
    assert not cpu.failures
    assert any("across 2 nodes" in w for w in cpu.warnings)
    # one node, or a rank without its yardstick: no figure, nothing judged
    for records in (across(tokens / 0.5, nodes=1), [*across(tokens)[:1], record(1, nodes=2)]):
        findings, figures = judged(spec, records)
        assert figures is not None
        assert figures.scaling_efficiency is None
        assert "llm_scaling_efficiency" not in {m.name for m in findings.measurements}


def test_the_nodes_of_a_launch_come_from_torchruns_variables(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name in ("WORLD_SIZE", "RANK", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK"):
        monkeypatch.delenv(name, raising=False)
    assert workload.nodes_of_launch(2) == 1  # the suite's own workers: one node
    launch = {"WORLD_SIZE": "8", "RANK": "5", "LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "4"}
    for name, value in launch.items():
        monkeypatch.setenv(name, value)
    assert workload.nodes_of_launch(8) == 2
    assert workload.nodes_of_launch(4) == 1  # a group that is not the launch's


def test_each_steps_throughput_is_kept_for_the_chart() -> None:
    spec = short()
    tokens = spec.local_batch * spec.shape.seq_len
    records = [record(step_seconds=[0.5, 2.0, 0.0, 1.0]), record(1, step_seconds=[0.5] * 4)]
    findings, _ = judged(spec, records)
    rates = findings.details["tokens_per_second_per_step"]
    assert rates[:2] == [round(2.0 * tokens, 1), round((tokens / 2.0 + 2.0 * tokens) / 2, 1)]
    assert math.isnan(rates[2])  # a step of no time has no rate, and the mean says so
    assert rates[3] == round((tokens + 2.0 * tokens) / 2, 1)
    findings, _ = judged(spec, [record(step_seconds=[3.0, 3.0, 3.0, 3.0])])
    assert findings.details["tokens_per_second_per_step"] == [round(tokens / 3.0, 1)] * 4


def test_scaling_at_its_floor_passes_and_a_yardstick_of_zero_counts_for_nothing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    spec = short()
    tokens = spec.local_batch * spec.shape.seq_len
    monkeypatch.setattr(workload, "SCALING_FLOOR", 0.8)
    exact = [record(r, nodes=2, one_node_tokens_per_second=tokens / 0.8) for r in (0, 1)]
    findings, figures = judged(spec, exact)
    assert figures is not None
    assert figures.scaling_efficiency == 0.8
    assert not findings.failures
    zero = [record(r, nodes=2, one_node_tokens_per_second=0.0) for r in (0, 1)]
    assert judged(spec, zero)[1].scaling_efficiency is None  # type: ignore[union-attr]
    slow = [record(r, nodes=2, one_node_tokens_per_second=0.5) for r in (0, 1)]
    assert judged(spec, slow)[1].scaling_efficiency == 2 * tokens  # type: ignore[union-attr]


def test_the_node_count_is_a_whole_number(monkeypatch: pytest.MonkeyPatch) -> None:
    launch = {"WORLD_SIZE": "8", "RANK": "5", "LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "4"}
    for name, value in launch.items():
        monkeypatch.setenv(name, value)
    nodes = workload.nodes_of_launch(8)
    assert type(nodes) is int


def test_run_names_what_it_ran_when_its_ranks_failed(monkeypatch: pytest.MonkeyPatch) -> None:
    from gpuaccept.distributed.local_ranks import RanksFailed

    def out_of_memory(*args: object) -> None:
        raise RanksFailed("rank 1 of 2 failed: WorkloadOutOfMemory: out of memory at step 0 on cpu")

    monkeypatch.setattr(workload, "run_ranks", out_of_memory)
    result = workload.run(context("cpu"), short(), timeout_seconds=5.0)
    assert result.status == Status.FAIL
    assert result.message == "the tiny model did not fit: out of memory at step 0 on cpu"


def test_each_ranks_median_step_is_kept_to_the_microsecond() -> None:
    findings, _ = judged(short(), [record(step_seconds=[9.0, 1.23456789, 1.23456789, 1.23456789])])
    assert findings.details["median_step_seconds_per_rank"] == [1.234568]


def test_run_starts_one_rank_per_device_with_the_spec_and_deadline_it_was_given(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from gpuaccept.llm.train import train_rank

    calls: list[tuple[object, ...]] = []

    def ranks(*args: object) -> list:
        calls.append(args)
        spec = args[2]
        return [dataclasses.replace(record(r), spec=spec) for r in range(2)]

    monkeypatch.setattr(workload, "run_ranks", ranks)
    spec = short()
    result = workload.run(context("cpu"), spec, timeout_seconds=42.0)
    assert calls == [(train_rank, 2, spec, 42.0, "gloo")]
    assert result.message.startswith("tiny on 2 gloo rank(s): ")
    assert result.details["ranks"] == 2
    assert result.details["backend"] == "gloo"
    # by default: accept's spec for the level, and the level's deadline
    workload.run(context("cpu"))
    assert calls[1] == (
        train_rank,
        2,
        accept_spec("standard", cpu=True),
        context("cpu").settings.workload_timeout_seconds,
        "gloo",
    )


def test_a_failed_run_keeps_its_ranks_and_backend(monkeypatch: pytest.MonkeyPatch) -> None:
    from gpuaccept.distributed.local_ranks import RanksTimedOut

    def hung(*args: object) -> None:
        raise RanksTimedOut("rank(s) 1 of 2 did not finish within 5 s")

    monkeypatch.setattr(workload, "run_ranks", hung)
    result = workload.run(context("cpu"), short(), timeout_seconds=5.0)
    assert (result.details["preset"], result.details["ranks"], result.details["backend"]) == (
        "tiny",
        2,
        "gloo",
    )
    assert result.message == (
        "training the tiny model on 2 rank(s): rank(s) 1 of 2 did not finish within 5 s"
    )


def test_outside_a_group_the_gpus_in_sight_decide_8b_by_the_smallest(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import types

    import torch

    gib = 1024**3
    sizes = {0: 80 * gib, 1: 80 * gib, 2: 16 * gib}
    monkeypatch.setattr(
        torch.cuda, "get_device_properties", lambda i: types.SimpleNamespace(total_memory=sizes[i])
    )
    full = dataclasses.replace(context("cuda"), level="full")
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    assert workload._spec_outside_a_group(full).shape.dim == 2048  # 80 GiB: not enough
    sizes.update({i: 80 * gib for i in range(3, 8)})
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 8)
    sizes[2] = 80 * gib
    assert workload._spec_outside_a_group(full).shape.dim == 4096  # 8 x 80 GiB
    sizes[2] = 16 * gib  # one small GPU holds every rank to its size: 8 x 16 GiB
    assert workload._spec_outside_a_group(full).shape.dim == 2048
    assert workload._spec_outside_a_group(context("cpu")) == accept_spec("standard", cpu=True)


@pytest.mark.parametrize(("ranks", "each"), [(1, 32), (2, 16), (3, 11), (8, 4), (64, 1)])
def test_the_tiny_preset_trains_the_same_global_batch_on_any_rank_count(
    ranks: int, each: int
) -> None:
    """A one-GPU node trained half of two ranks' tokens, and on 2 seeds of 5 a healthy node's
    loss ended above the limit (measured, docs/llm.md): the tiny preset's batch is global."""
    from gpuaccept.llm.train import for_world

    spec = llm_spec("tiny", "bf16")
    assert spec.global_batch == 32
    ran = for_world(spec, ranks)
    assert ran.local_batch == each
    assert ran.local_batch * ranks >= 32
    assert workload.preset_of(ran) == "tiny"  # still the preset, its judging unchanged


def test_a_per_rank_batch_stays_per_rank_whatever_the_rank_count() -> None:
    from gpuaccept.llm.train import for_world

    given = llm_spec("tiny", "bf16", Overrides(batch=16))
    assert given.global_batch is None
    assert for_world(given, 1).local_batch == 16
    assert workload.preset_of(given) == "custom"
    large = llm_spec("1b", "bf16")
    assert large.global_batch is None
    assert for_world(large, 8).local_batch == 2
    assert workload.preset_of(for_world(large, 8)) == "1b"


def test_the_token_cap_counts_the_global_batch_that_one_rank_may_train_alone() -> None:
    # 2^28 tokens: 32 sequences x 65 tokens x 130,000 steps pass per rank of 2 but not alone
    with pytest.raises(InputError, match="tokens per rank"):
        llm_spec("tiny", "bf16", Overrides(steps=130_000))


def test_the_tiny_limit_needs_the_context_and_1b_says_it_does_not_judge_it() -> None:
    """A loss at the first-order entropy (what a last-token model reaches) fails the tiny preset
    as accept runs it on the CPU; 1b's limit is above it and the message says so."""
    tiny = accept_spec("standard", cpu=True)
    _, figures = judged(tiny, [record()])
    assert figures is not None
    last_token = [figures.first_order_entropy] * 4
    findings, _ = judged(tiny, [record(losses=last_token)])
    assert any("did not learn" in f for f in findings.failures)
    assert findings.details["context_judged"] is True
    one_b = llm_spec("1b", "bf16")
    findings, figures = judged(one_b, [record(losses=[3.3] * 4)], mode="cpu")
    assert figures is not None
    assert findings.details["context_judged"] is False
    message = workload._summary(context("cpu"), one_b, figures, RanksOutcome(1, "gloo", []))
    assert "whether it used its context is NOT JUDGED" in message


def test_what_the_workload_did_not_judge_reaches_the_verdict_and_a_healthy_node_passes() -> None:
    """No floor for 1b on an H100: the check WARNs, its not_judged names the speed, and the run's
    verdict is PASS with 'workload speed NOT JUDGED', exit 0; a changed run adds its convergence,
    on the CPU twin too (its speed is the CPU-mode verdict's to say); a judged run adds nothing."""
    from gpuaccept.verdict import judge_run

    def verdict_of(spec: object, records: list, mode: str = "cuda", target: Target = H100):
        findings, _ = judged(spec, records, mode=mode, target=target)  # type: ignore[arg-type]
        result = findings.conclude("ok")
        return result, judge_run([result], kind="accept", device_mode=mode, level="standard")

    result, verdict = verdict_of(llm_spec("1b", "bf16"), [record()])
    assert result.status is Status.WARN
    assert list(result.not_judged) == ["speed"]
    assert result.not_judged["speed"].startswith("no 1b floor for NVIDIA H100 80GB HBM3")
    assert (verdict.exit_code, verdict.label) == (0, "PASS, workload speed NOT JUDGED")
    changed = llm_spec("1b", "bf16", Overrides(steps=30))
    result, verdict = verdict_of(changed, [record()])
    assert list(result.not_judged) == ["speed", "convergence"]
    assert verdict.exit_code == 0
    result, verdict = verdict_of(changed, [record()], mode="cpu")
    assert list(result.not_judged) == ["convergence"]
    assert verdict.exit_code == 0
    assert verdict.label == "PASS, workload convergence NOT JUDGED (CPU mode)"
    result, _ = verdict_of(llm_spec("tiny", "fp32"), [record()], mode="cpu")
    assert result.not_judged == {}
    result, verdict = verdict_of(llm_spec("8b", "bf16"), eight_ranks())
    assert result.not_judged == {}
    assert (verdict.exit_code, verdict.label) == (0, "PASS")
