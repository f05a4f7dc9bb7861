"""Run settings per preset: what `train llm` runs when no flag says otherwise, and what accept's
`workload` check runs at each level."""

from __future__ import annotations

from dataclasses import dataclass, replace

from gpuaccept.errors import InputError
from gpuaccept.llm.checkpointing import policy_name
from gpuaccept.llm.memory import MEMORY_MARGIN, estimate_memory, usable_bytes
from gpuaccept.llm.model import PRESETS, model_shape
from gpuaccept.llm.train import Checkpointing, LlmSpec, Precision

GiB = 1024**3


@dataclass(frozen=True)
class PresetRun:
    steps: int
    local_batch: int
    warmup_steps: int
    learning_rate: float
    checkpointing: Checkpointing
    convergence_margin: float
    global_batch: int | None = None  # shared out over the ranks (LlmSpec.global_batch)


PRESET_RUNS: dict[str, PresetRun] = {
    # 500 steps of 32 x 64 tokens over all ranks (16 each on the CPU twin's 2 gloo ranks):
    # about a minute on 2 cores; the loss falls from log(256) = 5.5 to about 1.6, its 10-step mean
    # crossing the midpoint (2.16) of H1 = 3.2 and the floor H2 = 1.1 at step 263 to 384 over
    # seeds 0-7 on one rank (measured on 2 cores, torch 2.13, docs/llm.md). Per rank, a one-GPU
    # node trained half the tokens and 2 seeds of 5 ended above 2.16: a healthy node failed.
    "tiny": PresetRun(500, 16, 5, 1e-2, "none", 0.5, global_batch=32),
    # a few minutes on one GPU at most; 2 x 2048 tokens per GPU
    "1b": PresetRun(60, 2, 10, 1e-3, "none", 1.1),
    # torchtitan's Llama 3.1 8B benchmark: local batch 2, 8192 tokens, selective checkpointing
    # per op (benchmarks/llama3_h100_202412_torchtitan.md, table 1; train_configs/llama3_8b.toml
    # lines 53-55 at 3f20451: mode 'selective', selective_ac_option 'op')
    "8b": PresetRun(40, 2, 10, 3e-4, "selective-op", 1.1),
}

# every step's tokens are drawn before the first step (llm/tokens.py): int64 tokens and fp32
# draws, 12 bytes a token per rank; past this a run is refused rather than left to exhaust memory
MAX_TOKENS_PER_RANK = 1 << 28


@dataclass(frozen=True)
class Overrides:
    layers: int | None = None
    dim: int | None = None
    seq_len: int | None = None
    batch: int | None = None
    steps: int | None = None
    learning_rate: float | None = None
    checkpointing: Checkpointing | None = None


def llm_spec(
    preset: str,
    precision: Precision,
    overrides: Overrides | None = None,
    compile_blocks: bool = False,
    seed: int = 0,
) -> LlmSpec:
    """The spec a preset and the command line's overrides make, checked."""
    given = overrides or Overrides()
    shape = model_shape(preset, given.layers, given.dim, given.seq_len)
    run = PRESET_RUNS[preset]
    steps = run.steps if given.steps is None else given.steps
    if steps < 2:
        raise InputError(f"--steps must be at least 2 (got {steps})")
    warmup = min(run.warmup_steps, steps // 2)
    batch = run.local_batch if given.batch is None else given.batch
    if batch < 1:
        raise InputError(f"--batch must be at least 1 (got {batch})")
    # --batch is per rank; a preset's global batch falls whole on one rank where there is one
    global_batch = run.global_batch if given.batch is None else None
    tokens = steps * max(batch, global_batch or 0) * (shape.seq_len + 1)
    if tokens > MAX_TOKENS_PER_RANK:
        raise InputError(
            f"--steps {steps} x --batch {batch} x --seq-len {shape.seq_len} is {tokens:,} tokens "
            f"per rank, drawn before the first step: at most {MAX_TOKENS_PER_RANK:,} (fewer "
            "steps, a smaller batch or a shorter sequence)"
        )
    rate = run.learning_rate if given.learning_rate is None else given.learning_rate
    if not 0 < rate < 1:
        raise InputError(f"--lr must be in (0, 1) (got {rate:g})")
    # the limit is calibrated on the preset's run: one that trains at least its tokens, at its
    # learning rate, on its shapes, is held to it; `--steps 30` is not (docs/llm.md)
    calibrated = (
        shape == PRESETS[preset]
        and steps >= run.steps
        and rate == run.learning_rate
        and (given.batch is None or batch >= (run.global_batch or run.local_batch))
    )
    return LlmSpec(
        shape=shape,
        judge_convergence=calibrated,
        steps=steps,
        local_batch=batch,
        warmup_steps=warmup,
        learning_rate=rate,
        precision=precision,
        checkpointing=policy_name(given.checkpointing or run.checkpointing),
        compile=compile_blocks,
        seed=seed,
        convergence_margin=run.convergence_margin,
        global_batch=global_batch,
    )


def is_preset_shape(spec: LlmSpec, preset: str) -> bool:
    """Whether the run is the preset itself (its floors apply) rather than a variant of it."""
    run = PRESET_RUNS[preset]
    if spec.shape != PRESETS[preset]:
        return False
    if run.global_batch is not None:
        return spec.global_batch == run.global_batch
    return spec.global_batch is None and spec.local_batch == run.local_batch


@dataclass(frozen=True)
class MemoryPlan:
    """A configuration of a preset chosen to fit each GPU, and why (None: nothing fits)."""

    checkpointing: Checkpointing | None
    local_batch: int | None
    peak_bytes: int | None
    reason: str

    @property
    def fits(self) -> bool:
        return self.checkpointing is not None


def plan_memory(preset: str, gpu_memory_bytes: int, shards: int) -> MemoryPlan:
    """The largest configuration of the preset's shapes whose predicted per-GPU peak
    (llm.memory) leaves `MEMORY_MARGIN` of the smallest GPU free: the most tokens a step first
    (the preset's batch down to 1), then the least recomputation (checkpointing none, torchtitan's
    per-op selective, full: torchtitan's three). `shards`: the ranks FSDP2 shards over (one
    node's, where a node trains alone)."""
    shape = PRESETS[preset]
    usable = usable_bytes(gpu_memory_bytes)
    modes: tuple[Checkpointing, ...] = ("none", "selective-op", "full")
    tried: list[str] = []
    for batch in range(PRESET_RUNS[preset].local_batch, 0, -1):
        for mode in modes:
            estimate = estimate_memory(shape, batch, mode, shards)
            if estimate.peak_bytes <= usable:
                larger = f"; larger ones do not fit: {', '.join(tried)}" if tried else ""
                if shards > 1:
                    larger += " (the memory model was measured on a world of one GPU only)"
                reason = (
                    f"{preset} at batch {batch} per GPU, checkpointing {mode}: "
                    f"{estimate.peak_gib:.1f} GiB per GPU predicted (at {estimate.peak_at}, "
                    f"FSDP2 over {shards} rank(s)) of {usable / GiB:.1f} usable "
                    f"({1 - MEMORY_MARGIN:.0%} of {gpu_memory_bytes / GiB:.1f}){larger}"
                )
                return MemoryPlan(mode, batch, estimate.peak_bytes, reason)
            tried.append(f"batch {batch} {mode} {estimate.peak_gib:.1f} GiB")
    return MemoryPlan(
        None,
        None,
        None,
        f"{preset} does not fit {shards} GPU(s) of {gpu_memory_bytes / GiB:.1f} GiB "
        f"({usable / GiB:.1f} usable): {', '.join(tried)} predicted per GPU",
    )


def accept_spec(level: str, cpu: bool, gpu_memory_bytes: int = 0, shards: int = 1) -> LlmSpec:
    """What accept's workload check runs: the tiny twin on the CPU (shorter at standard); 1b on
    GPUs at standard; at full, 8b in the largest configuration that fits each GPU (the smallest
    GPU's `gpu_memory_bytes`, FSDP2 over `shards` ranks), else 1b for twice the steps. The
    spec's `plan` says which and why."""
    if cpu:
        # the preset as shipped at every level: 150 steps ended at 3.14-3.23 over seeds 0-7 (one
        # rank, 2 cores), at the first-order entropy 3.20, so no limit there could tell a model
        # that uses its context from one that does not; 500 steps end at 1.5-1.6 (docs/llm.md)
        return llm_spec("tiny", "fp32")
    if level == "full":
        big = plan_memory("8b", gpu_memory_bytes, shards)
        if big.fits:
            spec = llm_spec(
                "8b", "bf16", Overrides(batch=big.local_batch, checkpointing=big.checkpointing)
            )
            return replace(spec, plan=big.reason)
        # longer than standard where 8b does not fit: twice the steps
        spec = llm_spec("1b", "bf16", Overrides(steps=2 * PRESET_RUNS["1b"].steps))
        return replace(spec, plan=f"{big.reason}; 1b for {spec.steps} steps instead")
    spec = llm_spec("1b", "bf16")
    shipped = estimate_memory(spec.shape, spec.local_batch, spec.checkpointing, shards)
    usable = usable_bytes(gpu_memory_bytes)
    verdict = (
        "fits"
        if shipped.peak_bytes <= usable
        else "may not fit (started as shipped: an out-of-memory is named with its figures)"
    )
    return replace(
        spec,
        plan=f"1b as shipped: {shipped.peak_gib:.1f} GiB per GPU predicted (FSDP2 over {shards} "
        f"rank(s)) of {usable / GiB:.1f} usable: {verdict}",
    )
