"""Activation checkpointing policies, named and applied as torchtitan names and applies them.

- `none`: every block keeps what its backward needs.
- `full`: every block keeps its input alone and recomputes the rest in the backward
  (torchtitan's `FullAC`).
- `selective-op`: torchtitan's selective checkpointing, per operator (`SelectiveAC`, the only
  selective mode of torchtitan 0.3.0, and `selective_ac_option = "op"` of the Llama 3.1 8B
  configuration its December 2024 H100 benchmark ran): every block keeps the outputs of the
  operators in the save list (matmuls, attention kernels, reduce-scatter...) except every second
  matmul, and recomputes the rest. Source: torchtitan 0.3.0 (PyPI wheel, identical at
  pytorch/torchtitan b5bcd76), torchtitan/distributed/activation_checkpoint.py:31-94
  (`_get_default_save_ops`) and 243-287 (`SelectiveAC._wrap_block`'s policy); the December 2024
  form with its `_save_list` at 3f20451, torchtitan/parallelisms/parallelize_llama.py:213-276.
- `selective-layer-N`: every Nth block checkpointed whole, the others not: torchtitan's
  "layer" selective checkpointing (`selective_ac_option = "N"`, parallelize_llama.py:277-285 at
  3f20451; removed from torchtitan in March 2026, #2357). What gpuaccept called "selective"
  until 2026-11-29 is `selective-layer-2`; the H200 memory rows of 2026-11-28 were measured
  with it.

`selective`, torchtitan's own word for its per-op policy, is read as `selective-op`.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from gpuaccept.errors import InputError

_LAYER = re.compile(r"selective-layer-([1-9][0-9]{0,3})")


def policy_name(text: str) -> str:
    """The policy `text` names, in its canonical spelling, or an InputError in one line."""
    if text in ("none", "full", "selective-op"):
        return text
    if text == "selective":
        return "selective-op"
    if _LAYER.fullmatch(text):
        return text
    raise InputError(
        f"--checkpointing must be none, full, selective-op (torchtitan's selective, per operator) "
        f"or selective-layer-N (every Nth block whole) (got {text!r})"
    )


def layer_interval(policy: str) -> int | None:
    """N of `selective-layer-N` (None for every other policy)."""
    match = _LAYER.fullmatch(policy)
    return int(match.group(1)) if match else None


def block_is_checkpointed(policy: str, index: int) -> bool:
    """Whether block `index` (from 0) is checkpointed whole: every block under `full`; under
    `selective-layer-N` the Nth, 2Nth... (torchtitan counted its wrappers from 1 and wrapped
    where count % N == 0)."""
    if policy == "full":
        return True
    every = layer_interval(policy)
    return every is not None and (index + 1) % every == 0


def checkpointed_blocks(layers: int, policy: str) -> int:
    """How many of `layers` blocks are checkpointed whole."""
    return sum(block_is_checkpointed(policy, index) for index in range(layers))


def _save_ops() -> set[Any]:
    """torchtitan 0.3.0's `_get_default_save_ops` (activation_checkpoint.py:31-94): the
    partitioner's compute-intensive ops, the attention kernels, `max`, `linear`, `topk`, the
    collectives; an op this torch does not register is left out, as there."""
    import torch
    from torch._functorch.partitioners import get_default_op_list

    intensive: list[Any] = list(get_default_op_list().compute_intensive_ops)
    ops: set[Any] = {op.default for op in intensive}
    named = [
        (torch.ops.aten, "_scaled_dot_product_cudnn_attention.default"),
        (torch.ops.aten, "_scaled_dot_product_attention_math.default"),
        (torch.ops.aten, "_scaled_dot_product_fused_attention_overrideable.default"),
        (torch.ops.aten, "max.default"),
        (torch, "_higher_order_ops.flex_attention"),
        (torch.ops.aten, "linear.default"),
        (torch.ops.aten, "topk.default"),
        (torch, "_higher_order_ops.inductor_compiled_code"),
        (torch.ops, "torch_attn._varlen_attn.default"),
        (torch.ops, "_c10d_functional.reduce_scatter_tensor.default"),
        (torch.ops, "_c10d_functional.all_to_all_single.default"),
    ]
    for root, path in named:
        found: Any = root
        try:
            for part in path.split("."):
                found = getattr(found, part)
        except (AttributeError, RuntimeError):
            continue
        ops.add(found)
    return ops


def selective_op_context() -> Any:
    """A fresh per-op policy's contexts for one checkpointed forward (and its recompute): save
    every op of the save list but every second matmul, recompute the rest. The matmul counts
    start at 0 for each block's forward, as torchtitan's `_get_custom_policy()` does per call."""
    import torch
    from torch.utils.checkpoint import CheckpointPolicy, create_selective_checkpoint_contexts

    save = _save_ops()
    matmuls = (torch.ops.aten.mm.default, torch.ops.aten.linear.default)
    counts = {"forward": 0, "recompute": 0}

    def policy(context: Any, func: Any, *args: Any, **kwargs: Any) -> CheckpointPolicy:
        # torchtitan also saves a CUDA-to-CPU copy (MoE's routing metadata): no such op here
        key = "recompute" if context.is_recompute else "forward"
        if func in matmuls:
            counts[key] += 1
        if func in save:
            if func in matmuls and counts[key] % 2 == 0:
                return CheckpointPolicy.PREFER_RECOMPUTE
            return CheckpointPolicy.MUST_SAVE
        return CheckpointPolicy.PREFER_RECOMPUTE

    return create_selective_checkpoint_contexts(policy)


def checkpointed_call(policy: str, forward: Callable[..., Any], *args: Any) -> Any:
    """`forward(*args)` under `policy` (`full`, or `selective-op`), recomputed in the backward."""
    from torch.utils.checkpoint import checkpoint

    if policy == "selective-op":
        return checkpoint(forward, *args, use_reentrant=False, context_fn=selective_op_context)
    return checkpoint(forward, *args, use_reentrant=False)
