"""The run's figures from every rank's record: throughput, model TFLOPs and MFU, goodput, memory,
the loss against the token chain's floor, determinism and each rank's straggler score."""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass

from gpuaccept.llm.flops import flops_per_token
from gpuaccept.llm.spec import LlmSpec, RankRecord
from gpuaccept.llm.tokens import build_chain

# nvidia-resiliency-ext's straggler detector: a rank's relative score is the fastest rank's
# median section time over its own (src/nvidia_resiliency_ext/attribution/straggler/
# reporting.py:204-215), a straggler below 0.75 (identify_stragglers' defaults, lines 84-89;
# NVIDIA/nvidia-resiliency-ext d8686d9)
STRAGGLER_SCORE = 0.75

# tokens/s per GPU across nodes over one node's: torchtitan's Llama 3.1 8B kept 5,605 of 5,762
# tokens/s per GPU from 8 to 128 H100s, 0.973 (pytorch/torchtitan b5bcd76,
# benchmarks/llama3_h100_202412_torchtitan.md tables 1 and 3, 400 Gb/s RDMA per GPU); 0.9 leaves
# a slower but healthy fabric room, and fails one that loses a tenth of the node's speed
SCALING_FLOOR = 0.9


@dataclass(frozen=True)
class LlmFigures:
    world_size: int
    device_name: str
    tokens_per_second_per_gpu: float
    tflops_per_gpu: float
    mfu: float | None  # None where the GPU's dense bf16 peak is not known (and on the CPU)
    goodput: float  # the steps at their median time over the wall time, start-up included
    median_step_seconds: float
    rank_step_seconds: list[float]  # each rank's median step time, rank order
    setup_seconds: float
    losses: list[float]  # mean over ranks, per step
    step_rates: list[float]  # tokens/s per GPU of each step, mean over ranks
    final_loss: float  # mean of the last tenth of the steps
    entropy_rate: float  # the floor no model can beat (nats per token)
    first_order_entropy: float  # the best a model that ignores the token before last can do
    convergence_limit: float
    non_finite: tuple[int, int] | None  # (rank, step) of the first NaN or Inf loss
    rerun_mismatch: tuple[int, int, float, float] | None  # (rank, step, first, rerun)
    determinism_unchecked: str | None
    straggler_scores: list[float]  # per rank
    peak_memory_bytes: int | None
    total_memory_bytes: int | None
    flops_per_token: int
    nodes: int = 1
    scaling_efficiency: float | None = None  # across nodes over one node; None on one node


def convergence_limit(spec: LlmSpec, entropy_rate: float, first_order: float) -> float:
    """The loss the run must end below: the floor plus `convergence_margin` of the way from the
    floor to the first-order entropy (0.5 on the tiny twin: below the midpoint, only a model that
    attends past the last token gets)."""
    return entropy_rate + spec.convergence_margin * (first_order - entropy_rate)


def timed_steps(values: list[float], spec: LlmSpec) -> list[float]:
    """The figures of the steps after the warm-up (the last step's alone if none is left)."""
    return values[spec.warmup_steps :] or values[-1:]


def timed_rate(step_seconds: list[float], spec: LlmSpec) -> float:
    """Tokens/s of one rank over its timed steps (NaN when they took no time)."""
    timed = timed_steps(step_seconds, spec)
    total = sum(timed)
    return spec.local_batch * spec.shape.seq_len * len(timed) / total if total > 0 else math.nan


def compute_figures(
    spec: LlmSpec, records: list[RankRecord], peak_tflops: float | None
) -> LlmFigures:
    chain = build_chain(spec.chain)
    steps = min(len(record.losses) for record in records)
    losses = [statistics.fmean(record.losses[step] for record in records) for step in range(steps)]
    tail = losses[-max(1, steps // 10) :] if losses else [math.nan]
    tokens = spec.local_batch * spec.shape.seq_len
    rate = statistics.fmean(timed_rate(record.step_seconds, spec) for record in records)
    step_rates = [
        statistics.fmean(
            tokens / r.step_seconds[step] if r.step_seconds[step] > 0 else math.nan for r in records
        )
        for step in range(min(len(r.step_seconds) for r in records))
    ]
    per_token = flops_per_token(spec.shape)
    tflops = rate * per_token / 1e12
    medians = [statistics.median(timed_steps(r.step_seconds, spec) or [math.nan]) for r in records]
    # the worst rank's; a rank with no wall time has none (min() would skip a NaN by order alone)
    goodputs = [
        len(r.step_seconds) * median / r.wall_seconds
        for r, median in zip(records, medians, strict=True)
        if r.wall_seconds > 0 and math.isfinite(median)
    ]
    goodput = min(goodputs, default=math.nan)
    compute = [
        statistics.median(timed_steps(r.compute_seconds, spec) or [math.nan]) for r in records
    ]
    # a rank that timed no forward (0 s, NaN) has no score of its own and sets none for others
    measured = [value for value in compute if value > 0 and math.isfinite(value)]
    fastest = min(measured, default=math.nan)
    scores = [fastest / value if value in measured else 1.0 for value in compute]
    non_finite = min(
        ((r.non_finite_step, r.rank) for r in records if r.non_finite_step is not None),
        default=None,
    )
    mismatch = None
    for record in records:
        for step, (first, again) in enumerate(
            zip(record.probe_losses, record.rerun_losses, strict=False)
        ):
            # bit for bit: the same seed, data and stack must give the same floats
            if first != again or math.copysign(1, first) != math.copysign(1, again):
                mismatch = mismatch or (record.rank, step, first, again)
    peaks = [r.peak_memory_bytes for r in records if r.peak_memory_bytes is not None]
    totals = [r.total_memory_bytes for r in records if r.total_memory_bytes is not None]
    return LlmFigures(
        world_size=len(records),
        device_name=records[0].device_name,
        tokens_per_second_per_gpu=rate,
        tflops_per_gpu=tflops,
        mfu=tflops / peak_tflops if peak_tflops else None,
        goodput=goodput,
        median_step_seconds=statistics.median(medians),
        rank_step_seconds=medians,
        setup_seconds=max(r.setup_seconds for r in records),
        losses=losses,
        step_rates=step_rates,
        final_loss=statistics.fmean(tail),
        entropy_rate=chain.entropy_rate,
        first_order_entropy=chain.first_order_entropy,
        convergence_limit=convergence_limit(spec, chain.entropy_rate, chain.first_order_entropy),
        non_finite=(non_finite[1], non_finite[0]) if non_finite else None,
        rerun_mismatch=mismatch,
        determinism_unchecked=next(
            (
                f"rank {r.rank}: {r.determinism_unchecked}"
                for r in records
                if r.determinism_unchecked
            ),
            None,
        ),
        straggler_scores=scores,
        peak_memory_bytes=max(peaks) if peaks else None,
        total_memory_bytes=min(totals) if totals else None,
        flops_per_token=per_token,
        nodes=records[0].nodes,
        scaling_efficiency=_scaling(records, rate),
    )


def _scaling(records: list[RankRecord], rate: float) -> float | None:
    alone = [r.one_node_tokens_per_second for r in records]
    known = [value for value in alone if value is not None and value > 0]
    if records[0].nodes < 2 or len(known) != len(alone):
        return None
    return rate / statistics.fmean(known)
