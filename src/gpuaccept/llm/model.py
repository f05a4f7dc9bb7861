"""A Llama-3-style decoder, written to be read: RMSNorm, rotary position embeddings, grouped-query
attention through `F.scaled_dot_product_attention`, SwiGLU feed-forward.

Shapes follow torchtitan's Llama 3 configurations (torchtitan 0.3.0, identical at pytorch/torchtitan
b5bcd76, torchtitan/models/llama3/__init__.py: `_1b` lines 148-189, `_8b` lines 236-274; the SwiGLU
width is `compute_ffn_hidden_dim`, torchtitan/models/common/feed_forward.py:18-31).

"1b" is Llama 3.2 1B (since 2026-11-29): 16 layers, dim 2048, 32 heads (8 kv), SwiGLU 8,192 wide
(multiplier 1.5), the output layer tied to the embedding, as torchtitan's `_1b`
(`ffn_dim_multiplier=1.5`, `enable_weight_tying=True`) and Meta's config.json
(`intermediate_size` 8192, `tie_word_embeddings` true; read as duplicated from
unsloth/Llama-3.2-1B at huggingface.co/Emm9625/Llama-3.2-1B-chatml). Until then "1b" had a
6,144-wide SwiGLU and an untied output (1.30 B parameters, 0.853 x the FLOPs a token): the
H200's 1b floor was measured on those shapes, and llm/floors.py keeps them with it, so it never
judges the new ones. "8b" is Llama 3.1 8B's shapes (output untied). Llama 3's rope scaling
(factor 32 past 8,192 positions) is not applied: it changes no shape, FLOP or byte.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import torch
import torch.nn.functional as F
from torch import nn

from gpuaccept.errors import InputError


def ffn_hidden_dim(dim: int, multiple_of: int, multiplier: float) -> int:
    """SwiGLU width as torchtitan computes it: 2/3 of 4*dim, times a multiplier, rounded up."""
    hidden = int(multiplier * int(2 * 4 * dim / 3))
    return multiple_of * ((hidden + multiple_of - 1) // multiple_of)


@dataclass(frozen=True)
class ModelShape:
    vocab: int
    dim: int
    layers: int
    heads: int
    kv_heads: int
    ffn_dim: int
    seq_len: int
    rope_theta: float = 500000.0
    norm_eps: float = 1e-5
    # the output layer is the embedding's weight (Llama 3.2 1B), not a matrix of its own
    tied_output: bool = False

    @property
    def head_dim(self) -> int:
        return self.dim // self.heads

    def validated(self) -> ModelShape:
        """The shape, or an InputError naming what cannot be built."""
        for name in ("vocab", "dim", "layers", "heads", "kv_heads", "ffn_dim", "seq_len"):
            if getattr(self, name) < 1:
                raise InputError(f"--{name.replace('_', '-')} must be at least 1")
        if self.dim % self.heads:
            raise InputError(f"--dim {self.dim} is not a multiple of the {self.heads} heads")
        if self.heads % self.kv_heads:
            raise InputError(
                f"{self.heads} heads cannot be grouped over {self.kv_heads} key/value heads"
            )
        if self.head_dim % 2:
            raise InputError(f"the head dimension {self.head_dim} must be even (rotary pairs)")
        return self


PRESETS: dict[str, ModelShape] = {
    # the CPU twin: the same code, small enough for 2 gloo ranks on 2 cores in about a minute
    "tiny": ModelShape(vocab=256, dim=64, layers=2, heads=4, kv_heads=2, ffn_dim=192, seq_len=64),
    "1b": ModelShape(
        vocab=128256,
        dim=2048,
        layers=16,
        heads=32,
        kv_heads=8,
        ffn_dim=ffn_hidden_dim(2048, 1024, 1.5),
        seq_len=2048,
        tied_output=True,
    ),
    "8b": ModelShape(
        vocab=128256,
        dim=4096,
        layers=32,
        heads=32,
        kv_heads=8,
        ffn_dim=ffn_hidden_dim(4096, 1024, 1.3),
        seq_len=8192,
    ),
}


def model_shape(
    preset: str,
    layers: int | None = None,
    dim: int | None = None,
    seq_len: int | None = None,
) -> ModelShape:
    """A preset with the command line's overrides applied and checked."""
    if preset not in PRESETS:
        raise InputError(f"--preset must be one of {', '.join(PRESETS)} (got {preset!r})")
    shape = PRESETS[preset]
    if layers is not None:
        shape = replace(shape, layers=layers)
    if dim is not None:
        # keep the preset's head dimension and its SwiGLU ratio
        heads = max(1, dim // shape.head_dim)
        kv_heads = max(1, min(shape.kv_heads, heads))
        while heads % kv_heads:
            kv_heads -= 1
        ratio = shape.ffn_dim / shape.dim
        shape = replace(shape, dim=dim, heads=heads, kv_heads=kv_heads, ffn_dim=int(dim * ratio))
    if seq_len is not None:
        shape = replace(shape, seq_len=seq_len)
    return shape.validated()


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # the statistics in fp32 whatever the compute dtype: bf16 sums of squares lose the norm
        normed = x.float() * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + self.eps)
        return normed.type_as(x) * self.weight


def rope_tables(head_dim: int, seq_len: int, theta: float) -> tuple[torch.Tensor, torch.Tensor]:
    """cos and sin of every position and rotary pair: [seq_len, head_dim / 2]."""
    pairs = torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim
    frequencies = 1.0 / (theta**pairs)
    angles = torch.outer(torch.arange(seq_len, dtype=torch.float64), frequencies)
    return angles.cos().float(), angles.sin().float()


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate each adjacent pair of x [batch, seq, heads, head_dim] by its position's angle (the
    pairing of Llama's complex view)."""
    pairs = x.float().unflatten(-1, (-1, 2))
    real, imag = pairs[..., 0], pairs[..., 1]
    cos, sin = cos[None, :, None, :], sin[None, :, None, :]
    rotated = torch.stack((real * cos - imag * sin, real * sin + imag * cos), dim=-1)
    return rotated.flatten(-2).type_as(x)


class Attention(nn.Module):
    def __init__(self, shape: ModelShape) -> None:
        super().__init__()
        self.heads, self.kv_heads, self.head_dim = shape.heads, shape.kv_heads, shape.head_dim
        self.wq = nn.Linear(shape.dim, shape.heads * shape.head_dim, bias=False)
        self.wk = nn.Linear(shape.dim, shape.kv_heads * shape.head_dim, bias=False)
        self.wv = nn.Linear(shape.dim, shape.kv_heads * shape.head_dim, bias=False)
        self.wo = nn.Linear(shape.heads * shape.head_dim, shape.dim, bias=False)
        # fault injection (the tests' model that ignores its context): each token sees itself
        self.self_only = False

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        batch, seq, _ = x.shape
        q = apply_rope(self.wq(x).view(batch, seq, self.heads, self.head_dim), cos, sin)
        k = apply_rope(self.wk(x).view(batch, seq, self.kv_heads, self.head_dim), cos, sin)
        v = self.wv(x).view(batch, seq, self.kv_heads, self.head_dim)
        # grouped-query attention: each key/value head serves heads / kv_heads query heads
        # (repeated as torchtitan's repeat_kv does, so every SDPA backend and the flop counter
        # see plain multi-head shapes)
        repeat = self.heads // self.kv_heads
        k, v = k.repeat_interleave(repeat, dim=2), v.repeat_interleave(repeat, dim=2)
        if self.self_only:
            alone = torch.eye(seq, dtype=torch.bool, device=x.device)
            out = F.scaled_dot_product_attention(
                q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), attn_mask=alone
            )
        else:
            out = F.scaled_dot_product_attention(
                q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal=True
            )
        projected: torch.Tensor = self.wo(out.transpose(1, 2).reshape(batch, seq, -1))
        return projected


class FeedForward(nn.Module):
    def __init__(self, dim: int, hidden: int) -> None:
        super().__init__()
        self.w1 = nn.Linear(dim, hidden, bias=False)
        self.w2 = nn.Linear(hidden, dim, bias=False)
        self.w3 = nn.Linear(dim, hidden, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out: torch.Tensor = self.w2(F.silu(self.w1(x)) * self.w3(x))
        return out


class Block(nn.Module):
    def __init__(self, shape: ModelShape) -> None:
        super().__init__()
        self.attention_norm = RMSNorm(shape.dim, shape.norm_eps)
        self.attention = Attention(shape)
        self.ffn_norm = RMSNorm(shape.dim, shape.norm_eps)
        self.feed_forward = FeedForward(shape.dim, shape.ffn_dim)
        # llm.checkpointing's policy for this block: none, full or selective-op
        self.checkpointing = "none"

    def _forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        x = x + self.attention(self.attention_norm(x), cos, sin)
        out: torch.Tensor = x + self.feed_forward(self.ffn_norm(x))
        return out

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        if self.checkpointing != "none" and torch.is_grad_enabled():
            from gpuaccept.llm.checkpointing import checkpointed_call

            return checkpointed_call(self.checkpointing, self._forward, x, cos, sin)  # type: ignore[no-any-return]
        return self._forward(x, cos, sin)


class Decoder(nn.Module):
    def __init__(self, shape: ModelShape) -> None:
        super().__init__()
        self.shape = shape
        self.tok_embeddings = nn.Embedding(shape.vocab, shape.dim)
        self.layers = nn.ModuleList(Block(shape) for _ in range(shape.layers))
        self.norm = RMSNorm(shape.dim, shape.norm_eps)
        self.output = nn.Linear(shape.dim, shape.vocab, bias=False)
        if shape.tied_output:
            # one parameter for both (torchtitan's enable_weight_tying): FSDP2 shards it once, at
            # the root, where both modules are
            self.output.weight = self.tok_embeddings.weight
        # not buffers: a model built on the meta device and then materialised keeps no values
        self._rope: dict[tuple[str, int], tuple[torch.Tensor, torch.Tensor]] = {}

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        key = (str(tokens.device), tokens.shape[1])
        if key not in self._rope:
            cos, sin = rope_tables(self.shape.head_dim, tokens.shape[1], self.shape.rope_theta)
            self._rope[key] = (cos.to(tokens.device), sin.to(tokens.device))
        cos, sin = self._rope[key]
        x = self.tok_embeddings(tokens)
        for layer in self.layers:
            x = layer(x, cos, sin)
        return self.output(self.norm(x))  # type: ignore[no-any-return]


@torch.no_grad()
def init_weights(model: Decoder, seed: int) -> None:
    """Seeded initialisation of every parameter, sharded or not (each shard from its own stream;
    the same seed and world size give the same model). torchtitan's scales: embedding N(0, 1),
    projections N(0, 0.02) with the residual outputs scaled by depth, the output dim^-0.5."""
    from torch.distributed.tensor import DTensor

    shape = model.shape
    for index, (name, parameter) in enumerate(model.named_parameters()):
        local = parameter.to_local() if isinstance(parameter, DTensor) else parameter
        if name.endswith("norm.weight"):
            local.fill_(1.0)
            continue
        if name.startswith("tok_embeddings") and shape.tied_output:
            std = (
                shape.dim**-0.5
            )  # the output's: torchtitan skips the embedding's own init when tied
        elif name.startswith("tok_embeddings"):
            std = 1.0
        elif name.startswith("output"):
            std = shape.dim**-0.5
        elif name.endswith(("wo.weight", "w2.weight", "w3.weight")):
            layer = int(name.split(".")[1])
            std = 0.02 / math.sqrt(2 * (layer + 1))
        else:
            std = 0.02
        rank = torch.distributed.get_rank() if torch.distributed.is_initialized() else 0
        generator = torch.Generator(device=local.device)
        generator.manual_seed((seed * 1_000_003 + index) * 4099 + rank)
        local.normal_(0.0, std, generator=generator)
