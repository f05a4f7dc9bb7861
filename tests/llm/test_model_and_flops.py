"""The decoder's shapes and the flop count it is judged by: the count is torchtitan's formula and
matches what torch's own FlopCounterMode counts on the tiny model."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.utils.flop_counter import FlopCounterMode

from gpuaccept.errors import InputError
from gpuaccept.llm.flops import flops_per_token, matmul_parameters, shape_matmul_parameters
from gpuaccept.llm.model import PRESETS, Decoder, init_weights, model_shape


def test_the_presets_have_torchtitans_llama3_shapes() -> None:
    eight, one = PRESETS["8b"], PRESETS["1b"]
    # torchtitan/models/llama3/__init__.py _8b and _1b, compute_ffn_hidden_dim (0.3.0, b5bcd76);
    # 8b is Llama 3.1 8B, 1b is Llama 3.2 1B (FFN 8192, output tied: its config.json, model.py)
    assert (eight.dim, eight.layers, eight.heads, eight.kv_heads, eight.ffn_dim) == (
        4096,
        32,
        32,
        8,
        14336,
    )
    assert eight.vocab == one.vocab == 128256
    assert (one.dim, one.layers, one.heads, one.kv_heads, one.ffn_dim) == (2048, 16, 32, 8, 8192)
    assert one.tied_output
    assert not eight.tied_output
    # Llama 3.2 1B: 1.24 billion parameters, the embedding counted once
    ones = shape_matmul_parameters(one) + one.layers * 2 * one.dim + one.dim
    assert 1.235e9 < ones < 1.24e9
    # Llama 3.1 8B: 8.03 billion parameters, of which the token embedding is 0.525 billion
    total = shape_matmul_parameters(eight) + eight.vocab * eight.dim
    assert 8.0e9 < total + eight.layers * 2 * eight.dim + eight.dim < 8.05e9


@pytest.mark.parametrize(
    "shape",
    [PRESETS["tiny"], model_shape("tiny", layers=3, dim=96, seq_len=48)],
    ids=["tiny", "tiny-variant"],
)
def test_the_flop_count_is_what_torchs_flop_counter_counts(shape: object) -> None:
    torch.manual_seed(0)
    model = Decoder(shape)  # type: ignore[arg-type]
    assert matmul_parameters(model) == shape_matmul_parameters(shape)  # type: ignore[arg-type]
    tokens = torch.randint(0, shape.vocab, (2, shape.seq_len))  # type: ignore[attr-defined]
    # the fused CPU attention kernel is not in FlopCounterMode's registry; the math backend
    # is the same attention as two bmm, which it counts
    with sdpa_kernel(SDPBackend.MATH), FlopCounterMode(display=False) as counter:
        logits = model(tokens)
        F.cross_entropy(logits.flatten(0, 1).float(), tokens.flatten()).backward()
    counts = {str(op): n for op, n in counter.get_flop_counts()["Global"].items()}
    assert counts["aten.bmm"] > 0, "the attention term was not counted at all"
    expected = flops_per_token(shape) * 2 * shape.seq_len  # type: ignore[arg-type, attr-defined]
    assert counter.get_total_flops() == expected


def test_a_tied_output_is_one_parameter_counted_once_in_the_matmuls() -> None:
    """torchtitan counts a tied embedding in the matmul parameters (it is the output layer's
    weight; models/utils.py:446-449 in 0.3.0): so do model and shape here."""
    import dataclasses

    shape = dataclasses.replace(PRESETS["tiny"], tied_output=True)
    model = Decoder(shape)
    assert model.output.weight is model.tok_embeddings.weight
    assert matmul_parameters(model) == shape_matmul_parameters(shape)
    untied = Decoder(PRESETS["tiny"])
    assert (
        sum(p.numel() for p in untied.parameters()) - sum(p.numel() for p in model.parameters())
        == shape.vocab * shape.dim
    )
    # initialised as the output layer (std dim^-0.5), not as an embedding (std 1): torchtitan
    # skips the embedding's own init when tied (models/llama3/__init__.py:51,163 in 0.3.0)
    init_weights(model, seed=0)
    init_weights(untied, seed=0)
    assert model.tok_embeddings.weight.std().item() == pytest.approx(shape.dim**-0.5, rel=0.05)
    assert untied.tok_embeddings.weight.std().item() == pytest.approx(1.0, rel=0.05)


def test_the_attention_term_grows_with_the_sequence() -> None:
    shape = PRESETS["tiny"]
    short, long = flops_per_token(shape, 64), flops_per_token(shape, 128)
    assert long - short == 6 * shape.layers * shape.heads * 2 * shape.head_dim * 64


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"layers": 0}, "--layers must be at least 1"),
        ({"seq_len": 0}, "--seq-len must be at least 1"),
    ],
)
def test_a_shape_that_cannot_be_built_is_refused(overrides: dict[str, int], message: str) -> None:
    with pytest.raises(InputError, match=message):
        model_shape("tiny", **overrides)


def test_an_unknown_preset_is_refused() -> None:
    with pytest.raises(InputError, match="--preset must be one of tiny, 1b, 8b"):
        model_shape("70b")


def test_a_width_override_keeps_the_head_dimension() -> None:
    shape = model_shape("8b", dim=2048)
    assert shape.head_dim == PRESETS["8b"].head_dim
    assert shape.heads == 16
    assert shape.heads % shape.kv_heads == 0
