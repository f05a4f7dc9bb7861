"""Per-GPU memory of a training step of the LLM workload, from its shape, batch, checkpointing
policy, loss form and the ranks FSDP2 shards over: what `accept --level full` plans with, so it
never starts a run that does not fit.

The model is built from, and tested against, one GPU's measurements (FSDP2 on a world of ONE; no
other world size has been measured): `torch.cuda.max_memory_allocated` for 8b shapes at 4 and 8
layers, checkpointing none/full/selective, batch 2 and 1, on an H200
(docs/results/2026-11-28-nvidia-h200-session15.md, -llm-memory.json), and the 1b preset's 29.5 GiB
(docs/results/2026-11-26-nvidia-h200-llm.md, the 6,144-wide untied 1b of then). On those rows it
is within 0.2% (8b) and 1.5% (1b). Every one of them kept the logits through the backward, and
their "selective" was `selective-layer-2` (llm/checkpointing.py): the tests hold the model to them
in that configuration.

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

Two constants are fitted to the rows, the rest derived (not measured on a GPU): a block without
checkpointing keeps 60 x dim bytes a token (3.75 GiB a block at 2 x 8,192 tokens: (91.4 - 66.7)
/ 4 less its 2.44 GiB of states), and the head 12 x dim bytes a token beyond its 14 bytes a logit
(the final norm and the output layer's input, 0.8 GiB at 16,384 tokens). The activation constant
is measured at the 8b shapes' width ratios (FFN 3.5 x dim, 4 query heads a kv head) only; the 1b
of before 2026-11-29 (FFN 3 x dim) came out 1.4% high with it, and today's 1b (FFN 4 x dim, the
output tied) has not been measured.

- **per-op selective checkpointing** (`selective-op`, torchtitan's): a block keeps what the policy
  saves, counted op by op from its forward: the outputs of the 1st, 3rd, 5th and 7th of its seven
  matmuls (wq, wv, w1, w2: dim + kv width + FFN + dim), the attention kernel's output and its fp32
  log-sum-exp (dim and 4 bytes a head), and its own output (dim), all bf16. 15.5 x dim bytes a
  token at 8b's shapes, against 60 without checkpointing and 2 with full. Counted on the CPU
  (tests/llm/test_memory.py, the storages a block's forward leaves alive), where the count is
  exact without the attention terms (the CPU's attention kernel is not in torchtitan's save list,
  so it is recomputed there) and reads 62 x dim for no checkpointing against the GPU rows' 60.
- **logits freed before the backward** (torchtitan 0.3.0's trainer.py:814-828: `del pred` before
  `loss.backward()`; the loss saves its fp32 log-softmax, not the bf16 logits): 12 bytes a logit
  instead of 14 at the backward's start.

Not in the model, and so left to `MEMORY_MARGIN`: what more than one rank adds (FSDP2's
all-gather and reduce-scatter buffers, NCCL's own memory), the CUDA context and the allocator's
fragmentation (reserved over allocated: 0.2 GiB at the 2026-11-26 out-of-memory on an H200).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from gpuaccept.llm.checkpointing import checkpointed_blocks as checkpointed_blocks
from gpuaccept.llm.model import ModelShape

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
# the same with the bf16 logits freed before the backward (torchtitan's `del pred`)
HEAD_BYTES_PER_LOGIT_FREED = 12
HEAD_BYTES_PER_TOKEN_PER_DIM = 12  # fitted: the final norm and the output layer's input

# the share of a GPU's memory a plan leaves free: the model's error (0.2% on the measured rows),
# what it leaves out (several ranks' collective buffers, the CUDA context, fragmentation) and what
# was never measured (any world size but one). A policy, not a measurement.
MEMORY_MARGIN = 0.10


def selective_op_block_bytes_per_token(shape: ModelShape, attention_saved: bool = True) -> int:
    """Bytes a block keeps a token under torchtitan's per-op policy (see the module's docstring);
    `attention_saved`: whether the attention kernel is one the save list names (on GPUs; the CPU's
    is not)."""
    kv_width = shape.kv_heads * shape.head_dim
    q_width = shape.heads * shape.head_dim
    # wq, wv, w1, w2 (the odd matmuls of seven) and the block's own output, bf16
    kept = 2 * (q_width + kv_width + shape.ffn_dim + shape.dim + shape.dim)
    if attention_saved:
        kept += 2 * q_width + 4 * shape.heads  # its output (bf16), its log-sum-exp (fp32)
    return kept


def block_bytes_per_token(shape: ModelShape, policy: str) -> int:
    """Every block's saved activations a token, summed over the blocks, under `policy`."""
    if policy == "selective-op":
        return shape.layers * selective_op_block_bytes_per_token(shape)
    whole = checkpointed_blocks(shape.layers, policy)
    return shape.dim * (
        (shape.layers - whole) * BLOCK_BYTES_PER_TOKEN_PER_DIM
        + whole * CHECKPOINTED_BLOCK_BYTES_PER_TOKEN_PER_DIM
    )


def root_parameters(shape: ModelShape) -> int:
    """The embedding, the output layer (the embedding's own weight when tied) and the final
    norm."""
    matrices = 1 if shape.tied_output else 2
    return matrices * shape.vocab * shape.dim + shape.dim


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
    shape: ModelShape,
    local_batch: int,
    checkpointing: str,
    world_size: int,
    logits_freed: bool = True,
) -> MemoryEstimate:
    """Per-GPU memory of a bf16 step of `shape` at `local_batch` sequences per rank under the
    `checkpointing` policy (llm.checkpointing), FSDP2 over `world_size` ranks (measured on a world
    of one only); `logits_freed`: the loss form llm.train runs (False: the measured rows')."""
    if local_batch < 1 or world_size < 1:
        raise ValueError("local_batch and world_size are at least 1")
    tokens = local_batch * shape.seq_len
    parameters = model_parameters(shape)
    states = math.ceil(STATE_BYTES_PER_PARAMETER * parameters / world_size)
    root = UNSHARDED_BYTES_PER_PARAMETER * root_parameters(shape)
    activations = block_bytes_per_token(shape, checkpointing) * tokens
    per_logit = HEAD_BYTES_PER_LOGIT_FREED if logits_freed else HEAD_BYTES_PER_LOGIT
    head = tokens * (per_logit * shape.vocab + HEAD_BYTES_PER_TOKEN_PER_DIM * shape.dim)
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
