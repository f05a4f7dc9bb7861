"""Activation checkpointing as torchtitan names and applies it (llm/checkpointing.py): the policies'
names, which blocks each checkpoints, what per-op checkpointing keeps (counted, and held to the
memory model's formula), and gradients the same as without checkpointing."""

from __future__ import annotations

import dataclasses
import gc
import weakref
from typing import Any

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

from gpuaccept.errors import InputError
from gpuaccept.llm.checkpointing import block_is_checkpointed, checkpointed_blocks, policy_name
from gpuaccept.llm.memory import (
    BLOCK_BYTES_PER_TOKEN_PER_DIM,
    CHECKPOINTED_BLOCK_BYTES_PER_TOKEN_PER_DIM,
    selective_op_block_bytes_per_token,
)
from gpuaccept.llm.model import PRESETS, Block, Decoder, ModelShape, rope_tables

# 8b's width ratios (FFN 3.5 x dim, a kv head for 4 query heads, head dimension 128), small
SMALL_8B = ModelShape(vocab=256, dim=512, layers=1, heads=4, kv_heads=1, ffn_dim=1792, seq_len=64)


@pytest.mark.parametrize(
    ("given", "policy"),
    [
        ("none", "none"),
        ("full", "full"),
        ("selective-op", "selective-op"),
        ("selective", "selective-op"),  # torchtitan's word for its per-op policy
        ("selective-layer-2", "selective-layer-2"),
    ],
)
def test_policies_are_named_as_torchtitan_names_them(given: str, policy: str) -> None:
    assert policy_name(given) == policy


@pytest.mark.parametrize("given", ["some", "selective-layer-0", "selective-layer-", "Full"])
def test_an_unknown_policy_is_refused_in_one_line(given: str) -> None:
    with pytest.raises(InputError) as refused:
        policy_name(given)
    assert str(refused.value).startswith("--checkpointing must be none, full, selective-op")
    assert "\n" not in str(refused.value)


def test_layer_checkpointing_wraps_every_nth_block_as_torchtitan_counted() -> None:
    """torchtitan counted its wrappers from 1 and checkpointed where count % N == 0
    (parallelize_llama.py:277-285 at 3f20451): blocks N-1, 2N-1... from 0."""
    assert [i for i in range(8) if block_is_checkpointed("selective-layer-2", i)] == [1, 3, 5, 7]
    assert [i for i in range(8) if block_is_checkpointed("selective-layer-3", i)] == [2, 5]
    assert checkpointed_blocks(7, "selective-layer-2") == 3
    assert checkpointed_blocks(4, "full") == 4
    assert checkpointed_blocks(4, "selective-op") == 0  # no block whole: per operator
    assert checkpointed_blocks(4, "none") == 0


class _NewStorages(TorchDispatchMode):
    """Every storage an op makes, kept weakly: those alive after a forward are what it keeps."""

    def __init__(self) -> None:
        super().__init__()
        self.made: dict[int, tuple[Any, int]] = {}

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        out = func(*args, **(kwargs or {}))
        for value in tree_flatten(out)[0]:
            if isinstance(value, torch.Tensor):
                storage = value.untyped_storage()
                self.made[storage.data_ptr()] = (weakref.ref(storage), storage.nbytes())
        return out


def _kept_bytes_per_token_per_dim(shape: ModelShape, policy: str) -> float:
    """Bytes a bf16 block's forward leaves alive a token, in units of its width: its saved
    activations and its output (the next block's input), views of weights and inputs excluded."""
    torch.manual_seed(0)
    block = Block(shape).to(torch.bfloat16)
    block.checkpointing = policy
    cos, sin = rope_tables(shape.head_dim, shape.seq_len, shape.rope_theta)
    x = torch.randn(1, shape.seq_len, shape.dim, dtype=torch.bfloat16, requires_grad=True)
    tracked = _NewStorages()
    with tracked:
        out = block(x, cos, sin)
    gc.collect()
    before = {t.untyped_storage().data_ptr() for t in [x, cos, sin, *block.parameters()]}
    kept = sum(
        size
        for pointer, (alive, size) in tracked.made.items()
        if alive() is not None and pointer not in before
    )
    del out
    return kept / (shape.seq_len * shape.dim)


def test_per_op_checkpointing_keeps_what_the_memory_model_says() -> None:
    """Counted on the CPU: per-op keeps the odd matmuls' outputs (wq, wv, w1, w2) and the block's
    output, exactly the formula without its attention terms (the CPU's attention kernel is not in
    torchtitan's save list, so it is recomputed here; on a GPU's flash or cuDNN kernel it is
    kept). Full keeps the output alone; none keeps 62 x dim, within 4% of the 60 fitted to the
    H200 rows, which is how far this count and a GPU's allocator agree."""
    selective = _kept_bytes_per_token_per_dim(SMALL_8B, "selective-op")
    expected = selective_op_block_bytes_per_token(SMALL_8B, attention_saved=False) / SMALL_8B.dim
    assert selective == expected == 13.5
    assert _kept_bytes_per_token_per_dim(SMALL_8B, "full") == (
        CHECKPOINTED_BLOCK_BYTES_PER_TOKEN_PER_DIM
    )
    none = _kept_bytes_per_token_per_dim(SMALL_8B, "none")
    assert none == pytest.approx(BLOCK_BYTES_PER_TOKEN_PER_DIM, rel=0.04)


def test_at_8b_shapes_per_op_keeps_a_quarter_of_a_block_without_checkpointing() -> None:
    eight = PRESETS["8b"]
    per_dim = selective_op_block_bytes_per_token(eight) / eight.dim
    assert per_dim == pytest.approx(15.53, abs=0.01)
    assert CHECKPOINTED_BLOCK_BYTES_PER_TOKEN_PER_DIM < per_dim < BLOCK_BYTES_PER_TOKEN_PER_DIM / 3


def test_every_policy_gives_the_gradients_of_no_checkpointing() -> None:
    """Recomputation must change nothing a step computes (fp32, one model's weights for all)."""
    shape = dataclasses.replace(PRESETS["tiny"], layers=4)
    torch.manual_seed(0)
    reference = Decoder(shape)
    tokens = torch.randint(0, shape.vocab, (2, shape.seq_len + 1))

    def gradients(policy: str) -> list[torch.Tensor]:
        model = Decoder(shape)
        model.load_state_dict(reference.state_dict())
        for index, block in enumerate(model.layers):
            if block_is_checkpointed(policy, index):
                block.checkpointing = "full"
            elif policy == "selective-op":
                block.checkpointing = "selective-op"
        logits = model(tokens[:, :-1])
        torch.nn.functional.cross_entropy(logits.flatten(0, 1), tokens[:, 1:].flatten()).backward()
        return [p.grad for p in model.parameters() if p.grad is not None]

    plain = gradients("none")
    for policy in ("full", "selective-op", "selective-layer-2"):
        for mine, theirs in zip(gradients(policy), plain, strict=True):
            torch.testing.assert_close(mine, theirs, rtol=1e-5, atol=1e-6)


def test_the_sharded_model_trains_the_same_under_every_policy(tmp_path: object) -> None:
    """FSDP2 on a one-rank gloo group, as the workload builds it: each block gets the policy the
    spec names, and three steps give the losses of no checkpointing (the logits freed or kept)."""
    import torch.distributed as dist

    from gpuaccept.llm.train import _batches, _train, build_model
    from tests.llm.helpers import short

    dist.init_process_group("gloo", init_method=f"file://{tmp_path}/pg", rank=0, world_size=1)
    try:
        four_blocks = dataclasses.replace(PRESETS["tiny"], layers=4)
        spec = dataclasses.replace(short(), steps=3, shape=four_blocks, local_batch=2)
        spec = dataclasses.replace(spec, global_batch=None)
        cpu = torch.device("cpu")
        expected = {
            "none": ["none"] * 4,
            "full": ["full"] * 4,
            "selective-op": ["selective-op"] * 4,
            "selective-layer-2": ["none", "full", "none", "full"],
        }
        batches = _batches(spec, 0, 1, cpu)
        losses = {}
        for policy, blocks in expected.items():
            ran = dataclasses.replace(spec, checkpointing=policy)
            model = build_model(ran, cpu)
            assert [block.checkpointing for block in model.layers] == blocks
            losses[policy] = _train(ran, cpu, batches, 3, False)[0]
        kept = dataclasses.replace(spec, loss_form="logits-kept")
        losses["kept"] = _train(kept, cpu, batches, 3, False)[0]
        for policy, values in losses.items():
            assert values == pytest.approx(losses["none"], rel=1e-6), policy
    finally:
        dist.destroy_process_group()
