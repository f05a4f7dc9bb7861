"""What one LLM workload run is (LlmSpec) and what each rank measured of it (RankRecord): the
data the rank that trains (llm.train) and the judge that reads its records (llm.figures,
checks.workload) share, held apart from both so neither imports the other (issue #51 §2).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Literal

from gpuaccept.llm.model import ModelShape
from gpuaccept.llm.tokens import ChainSpec

# a policy of llm.checkpointing, in its canonical spelling: none, full, selective-op,
# selective-layer-N
Checkpointing = str
Precision = Literal["bf16", "fp32"]
# the loss's form: the logits freed before the backward (torchtitan's `del pred`, what llm.train
# runs), or kept through it (every run before 2026-11-29, the measured memory rows and floors)
LossForm = Literal["logits-freed", "logits-kept"]


@dataclass(frozen=True)
class LlmSpec:
    shape: ModelShape
    steps: int
    local_batch: int  # sequences per rank and step (`for_world` sets it from global_batch)
    warmup_steps: int  # not timed: start-up, compilation, the allocator's first growth
    learning_rate: float
    precision: Precision = "bf16"
    checkpointing: Checkpointing = "none"
    compile: bool = False
    loss_form: LossForm = "logits-freed"
    seed: int = 0
    chain: ChainSpec = field(default_factory=ChainSpec)
    determinism_steps: int = 3  # the first K losses are trained again and must be bit-identical
    # the loss must end below the floor plus this share of the way to the first-order entropy
    convergence_margin: float = 0.5
    # fault injection for the CPU twin's tests: this rank sleeps in every block's forward...
    slow_rank: int | None = None
    slow_seconds: float = 0.0
    # ...and the parameters turn to NaN before this step
    poison_step: int | None = None
    # sequences per step over all ranks, where the judge's loss must not depend on the rank
    # count (the tiny preset: its second-order structure is learnt at a step that depends on
    # the tokens seen, so one GPU with half of two ranks' batch failed healthy nodes on some
    # seeds); None: local_batch is per rank whatever the ranks (the 1b/8b presets, --batch)
    global_batch: int | None = None
    # whether the loss is held to the limit: a run that trains fewer tokens than its preset, or
    # at another learning rate or shape, was never calibrated (`plans.llm_spec` decides)
    judge_convergence: bool = True
    # fault injection: every token attends to itself alone (a model that ignores its context)
    self_attention_only: bool = False
    # every this many steps rank 0 appends a JSON line of the step's figures to log_file (the
    # training log `train llm` shows; llm.progress formats it); 0: none
    log_every: int = 0
    log_file: str | None = None
    # why accept chose this configuration (llm.plans, its memory model); "" when a person did
    plan: str = ""

    @property
    def timed_steps(self) -> int:
        return self.steps - self.warmup_steps


@dataclass(frozen=True)
class RunConfiguration:
    """What a run's speed depends on, and so what a floor must have been measured at to judge it
    (issue #52: like for like): the shapes (layers and sequence included), sequences per rank,
    precision, checkpointing policy, loss form, compilation and the ranks FSDP2 shards over."""

    shape: ModelShape
    local_batch: int
    precision: str
    checkpointing: str
    loss_form: str
    compile: bool
    world_size: int

    @classmethod
    def of(cls, spec: LlmSpec, world_size: int) -> RunConfiguration:
        """The configuration of `spec` run on `world_size` ranks (its batch per rank as shared
        out)."""
        return cls(
            shape=spec.shape,
            local_batch=for_world(spec, world_size).local_batch,
            precision=spec.precision,
            checkpointing=spec.checkpointing,
            loss_form=spec.loss_form,
            compile=spec.compile,
            world_size=world_size,
        )

    def parts(self) -> dict[str, str]:
        """Each element as an operator reads it, by name."""
        shape = self.shape
        return {
            "shapes": (
                f"{shape.layers} layers, dim {shape.dim}, {shape.heads} heads ({shape.kv_heads} "
                f"kv), FFN {shape.ffn_dim}, vocabulary {shape.vocab:,}, output "
                f"{'tied' if shape.tied_output else 'untied'}"
            ),
            "sequence": f"sequence {shape.seq_len}",
            "batch": f"batch {self.local_batch} per rank",
            "precision": self.precision,
            "checkpointing": f"checkpointing {self.checkpointing}",
            "loss": self.loss_form,
            "compile": "compiled" if self.compile else "eager",
            "ranks": f"{self.world_size} rank(s)",
        }

    def text(self) -> str:
        return ", ".join(self.parts().values())

    def differences(self, other: RunConfiguration) -> list[str]:
        """What differs from `other`, each as "here (there)"."""
        mine, theirs = self.parts(), other.parts()
        return [f"{mine[key]} (not {theirs[key]})" for key in mine if mine[key] != theirs[key]]


def for_world(spec: LlmSpec, world_size: int) -> LlmSpec:
    """The spec a rank of `world_size` runs: a global batch shared out, rounded up, so every
    rank trains as many sequences as the others and the job at least the global batch."""
    if spec.global_batch is None:
        return spec
    return replace(spec, local_batch=-(-spec.global_batch // max(world_size, 1)))


@dataclass
class RankRecord:
    spec: LlmSpec  # what this rank ran: the judge reads it from here, never works it out again
    rank: int
    world_size: int
    device: str
    device_name: str
    losses: list[float]  # this rank's loss per step (its own batch)
    step_seconds: list[float]
    compute_seconds: list[float]  # its blocks' forward compute per step, waits excluded
    # the first determinism_steps losses of a fresh model, trained twice from the same seed with
    # deterministic kernels: a difference is the hardware's (or a kernel that is not deterministic)
    probe_losses: list[float]
    rerun_losses: list[float]
    determinism_unchecked: str | None  # why the probe could not run deterministically, if so
    setup_seconds: float  # process start of this rank's work to its first step
    wall_seconds: float  # its work from start to the last step, set-up and rerun excluded
    non_finite_step: int | None = None
    # across nodes: this rank's tokens/s in a run of its own node's ranks alone, just before
    nodes: int = 1
    one_node_tokens_per_second: float | None = None
    peak_memory_bytes: int | None = None
    reserved_memory_bytes: int | None = None
    total_memory_bytes: int | None = None
