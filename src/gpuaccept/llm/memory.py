"""Per-GPU memory of a training step of the LLM workload, from its shape, batch, checkpointing and
the ranks FSDP2 shards over: what `accept --level full` plans with, so it never starts a run that
does not fit.

The model is built from, and tested against, one GPU's measurements (FSDP2 on a world of ONE; no
other world size has been measured): `torch.cuda.max_memory_allocated` for 8b shapes at 4 and 8
layers, checkpointing none/full/selective, batch 2 and 1, on an H200
(docs/results/2026-11-28-nvidia-h200-session15.md, -llm-memory.json), and the 1b preset's 29.5 GiB
(docs/results/2026-11-26-nvidia-h200-llm.md). On those rows it is within 0.2% (8b) and 1.5% (1b).

Where the peak falls, and so what is in it (bf16 compute, fp32 weights, AdamW, every step but the
first, whose moments do not exist yet):

- **at the start of the backward**: the rank's shard of the fp32 weights and both AdamW moments
  (12 bytes a parameter, over the world), the root's unsharded bf16 weights (the embedding and the
  output layer: FSDP2 keeps the root's gathered for the backward), every block's saved
  activations, and the head's: the bf16 logits (held by the step), the fp32 log-softmax the loss
  saves, and the two fp32 gradients the loss's backward makes. No block's gradient is in it: the
  H200 rows differ by exactly a block's weights and moments per block (2.44 GiB at 8b), none of
  its gradient (set to None after each step).
- **at the optimizer step**: weights, gradients, both moments and the foreach AdamW's sqrt of the
  second moment (a full temporary): 20 bytes a parameter over the world, the root's bf16 weights
  still held. It is the peak of 8 layers at batch 1 (54.0 predicted, 54.1 measured), where the
  backward's (47.8) is not.

Two constants are fitted to the rows, the rest derived: a block without checkpointing keeps 60 x
dim bytes a token (3.75 GiB a block at 2 x 8,192 tokens: (91.4 - 66.7) / 4 less its 2.44 GiB of
states), and the head 12 x dim bytes a token beyond its 14 bytes a logit (the final norm and the
output layer's input, 0.8 GiB at 16,384 tokens). The activation constant is measured at the 8b
shapes' width ratios (FFN 3.5 x dim, 4 query heads a kv head) only; 1b's (FFN 3 x dim) came out
1.4% high with it.

Not in the model, and so left to `MEMORY_MARGIN`: what more than one rank adds (FSDP2's
all-gather and reduce-scatter buffers, NCCL's own memory), the CUDA context and the allocator's
fragmentation (reserved over allocated: 0.2 GiB at the 2026-11-26 out-of-memory on an H200).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from gpuaccept.llm.model import ModelShape
from gpuaccept.llm.train import Checkpointing

GiB = 1024**3

# fp32 weight and AdamW's two fp32 moments: sharded over the world by FSDP2
STATE_BYTES_PER_PARAMETER = 12
# ...plus the fp32 gradient and foreach AdamW's sqrt(exp_avg_sq) temporary at the step
OPTIMIZER_STEP_BYTES_PER_PARAMETER = 20
# the root's (embedding, output) gathered weights in bf16, whole on every rank
UNSHARDED_BYTES_PER_PARAMETER = 2
# fitted to the H200 rows (see the module's docstring): a block's saved activations a token,
# in units of the model's width, without checkpointing and with (its bf16 input alone: derived)
BLOCK_BYTES_PER_TOKEN_PER_DIM = 60
CHECKPOINTED_BLOCK_BYTES_PER_TOKEN_PER_DIM = 2
# bf16 logits (2) + the fp32 log-softmax the loss saves (4) + two fp32 gradients (8): derived
HEAD_BYTES_PER_LOGIT = 14
HEAD_BYTES_PER_TOKEN_PER_DIM = 12  # fitted: the final norm and the output layer's input

# the share of a GPU's memory a plan leaves free: the model's error (0.2% on the measured rows),
# what it leaves out (several ranks' collective buffers, the CUDA context, fragmentation) and what
# was never measured (any world size but one). A policy, not a measurement.
MEMORY_MARGIN = 0.10


def checkpointed_blocks(layers: int, checkpointing: Checkpointing) -> int:
    """How many blocks recompute their activations (selective: every second, from the first, as
    llm.train.build_model marks them)."""
    if checkpointing == "full":
        return layers
    if checkpointing == "selective":
        return (layers + 1) // 2
    return 0


def root_parameters(shape: ModelShape) -> int:
    """The embedding, the (untied) output layer and the final norm."""
    return 2 * shape.vocab * shape.dim + shape.dim


def block_parameters(shape: ModelShape) -> int:
    attention = shape.dim * shape.head_dim * (2 * shape.heads + 2 * shape.kv_heads)
    return attention + 3 * shape.dim * shape.ffn_dim + 2 * shape.dim


def model_parameters(shape: ModelShape) -> int:
    return shape.layers * block_parameters(shape) + root_parameters(shape)


@dataclass(frozen=True)
class MemoryEstimate:
    """Bytes one rank holds at the two candidate peaks of a step."""

    states_bytes: int  # the rank's shard of fp32 weights and AdamW moments
    unsharded_root_bytes: int
    activation_bytes: int  # every block's saved activations
    head_bytes: int  # logits, loss and their gradients
    backward_start_bytes: int
    optimizer_step_bytes: int

    @property
    def peak_bytes(self) -> int:
        return max(self.backward_start_bytes, self.optimizer_step_bytes)

    @property
    def peak_gib(self) -> float:
        return self.peak_bytes / GiB

    @property
    def peak_at(self) -> str:
        if self.backward_start_bytes >= self.optimizer_step_bytes:
            return "the start of the backward"
        return "the optimizer step"


def estimate_memory(
    shape: ModelShape, local_batch: int, checkpointing: Checkpointing, world_size: int
) -> MemoryEstimate:
    """Per-GPU memory of a bf16 step of `shape` at `local_batch` sequences per rank, FSDP2 over
    `world_size` ranks (measured on a world of one only)."""
    if local_batch < 1 or world_size < 1:
        raise ValueError("local_batch and world_size are at least 1")
    tokens = local_batch * shape.seq_len
    parameters = model_parameters(shape)
    states = math.ceil(STATE_BYTES_PER_PARAMETER * parameters / world_size)
    root = UNSHARDED_BYTES_PER_PARAMETER * root_parameters(shape)
    recomputed = checkpointed_blocks(shape.layers, checkpointing)
    per_token = (
        shape.layers - recomputed
    ) * BLOCK_BYTES_PER_TOKEN_PER_DIM + recomputed * CHECKPOINTED_BLOCK_BYTES_PER_TOKEN_PER_DIM
    activations = per_token * shape.dim * tokens
    head = tokens * (HEAD_BYTES_PER_LOGIT * shape.vocab + HEAD_BYTES_PER_TOKEN_PER_DIM * shape.dim)
    step = math.ceil(OPTIMIZER_STEP_BYTES_PER_PARAMETER * parameters / world_size) + root
    return MemoryEstimate(
        states_bytes=states,
        unsharded_root_bytes=root,
        activation_bytes=activations,
        head_bytes=head,
        backward_start_bytes=states + root + activations + head,
        optimizer_step_bytes=step,
    )


def usable_bytes(gpu_memory_bytes: int) -> int:
    """What a plan may use of a GPU's memory: all but `MEMORY_MARGIN` of it."""
    return int(gpu_memory_bytes * (1 - MEMORY_MARGIN))
