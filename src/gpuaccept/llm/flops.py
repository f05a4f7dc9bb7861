"""Model FLOPs per token, counted as torchtitan and PaLM count them.

    6 * N + 6 * layers * heads * (qk_head_dim + v_head_dim) * seq_len

N is every parameter that takes part in a matmul: all but the token embedding (a lookup), the
output layer included. 6 = forward 2 (a multiply and an add) + backward 4 (the gradients of the
input and of the weight). The attention term is the scores (Q K^T) and the weighted values
(softmax V), 2 matmuls in the forward and 4 in the backward, with the causal mask's sparsity not
taken off and flash attention's recomputation not added. Source: pytorch/torchtitan b5bcd76,
torchtitan/models/utils.py:412-459 (`get_dense_model_nparams_and_flops`), after PaLM (Chowdhery
et al. 2022, appendix B). torchtitan also counts the RMSNorm weights in N (they are no matmul);
they are left out here, which changes an 8B model's figure by less than 0.001%.

FLOPs a step executes beyond the model's (activation recomputation) are not counted: MFU is the
model's work over the peak, as in torchtitan's logs.
"""

from __future__ import annotations

from torch import nn

from gpuaccept.llm.model import ModelShape


def matmul_parameters(model: nn.Module) -> int:
    """Parameters of every nn.Linear: the weights that take part in a matmul."""
    return sum(
        parameter.numel()
        for module in model.modules()
        if isinstance(module, nn.Linear)
        for parameter in module.parameters(recurse=False)
    )


def shape_matmul_parameters(shape: ModelShape) -> int:
    """The same count from the shape alone (before a model is built)."""
    attention = shape.dim * shape.head_dim * (2 * shape.heads + 2 * shape.kv_heads)
    feed_forward = 3 * shape.dim * shape.ffn_dim
    return shape.layers * (attention + feed_forward) + shape.dim * shape.vocab


def flops_per_token(shape: ModelShape, seq_len: int | None = None) -> int:
    """Training FLOPs (forward and backward) per token of a sequence of seq_len tokens."""
    seq = shape.seq_len if seq_len is None else seq_len
    attention = 6 * shape.layers * shape.heads * (2 * shape.head_dim) * seq
    return 6 * shape_matmul_parameters(shape) + attention
