"""Run settings per preset: what `train llm` runs when no flag says otherwise, and what accept's
`workload` check runs at each level."""

from __future__ import annotations

from dataclasses import dataclass, replace

from gpuaccept.errors import InputError
from gpuaccept.llm.model import PRESETS, ModelShape, model_shape
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
    # a few minutes on one GPU at most; 2 x 2048 tokens per GPU as torchtitan's 1B config
    "1b": PresetRun(60, 2, 10, 1e-3, "none", 1.1),
    # torchtitan's Llama 3.1 8B benchmark: local batch 2, 8192 tokens, selective checkpointing
    # (benchmarks/llama3_h100_202412_torchtitan.md, table 1)
    "8b": PresetRun(40, 2, 10, 3e-4, "selective", 1.1),
}

# every step's tokens are drawn before the first step (llm/tokens.py): int64 tokens and fp32
# draws, 12 bytes a token per rank; past this a run is refused rather than left to exhaust memory
MAX_TOKENS_PER_RANK = 1 << 28

# parameters x (fp32 weight, gradient and two AdamW moments) plus a quarter for activations and
# the allocator: the smallest total GPU memory an 8b run is started on
_BYTES_PER_PARAMETER = 16 * 1.25


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
    return LlmSpec(
        shape=shape,
        steps=steps,
        local_batch=batch,
        warmup_steps=warmup,
        learning_rate=rate,
        precision=precision,
        checkpointing=given.checkpointing or run.checkpointing,
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


def fits_8b(total_gpu_memory_bytes: int) -> bool:
    """Whether the GPUs of a job hold an 8b run (FSDP shards its states over all of them)."""
    from gpuaccept.llm.flops import shape_matmul_parameters

    shape: ModelShape = PRESETS["8b"]
    parameters = shape_matmul_parameters(shape) + shape.vocab * shape.dim
    return total_gpu_memory_bytes >= parameters * _BYTES_PER_PARAMETER


def accept_spec(level: str, cpu: bool, total_gpu_memory_bytes: int = 0) -> LlmSpec:
    """What accept's workload check runs: the tiny twin on the CPU (shorter at standard, judged to
    the first-order entropy); 1b on GPUs at standard; 8b at full where the job's GPUs hold it."""
    if cpu:
        spec = llm_spec("tiny", "fp32")
        if level == "standard":
            return replace(spec, steps=150, warmup_steps=5, convergence_margin=1.05)
        return spec
    if level == "full" and fits_8b(total_gpu_memory_bytes):
        return llm_spec("8b", "bf16")
    if level == "full":  # longer than standard where 8b does not fit: twice the steps
        return llm_spec("1b", "bf16", Overrides(steps=2 * PRESET_RUNS["1b"].steps))
    return llm_spec("1b", "bf16")
