"""The synthetic source's floor is real: sequences sampled from the chain cost exactly its
entropy rate under the chain's own probabilities, and the first-order entropy lies well above."""

from __future__ import annotations

import math

import pytest
import torch

from gpuaccept.errors import InputError
from gpuaccept.llm.tokens import ChainSpec, build_chain


def test_sampled_sequences_cost_the_entropy_rate() -> None:
    chain = build_chain(ChainSpec())
    vocab = chain.spec.vocab
    tokens = chain.sample(256, 65, seed=3, device=torch.device("cpu"))
    state = tokens[:, :-2] * vocab + tokens[:, 1:-1]
    following = tokens[:, 2:]
    weights = torch.diff(chain.cumulative, dim=1, prepend=torch.zeros(vocab * vocab, 1))
    hit = chain.next_tokens[state] == following[..., None]
    assert bool(hit.any(-1).all()), "a sampled token is not among its pair's successors"
    cost = -(weights[state] * hit).sum(-1).log().mean().item()
    assert cost == pytest.approx(chain.entropy_rate, abs=0.02)
    assert chain.first_order_entropy > chain.entropy_rate + 1.0
    assert chain.first_order_entropy < math.log(vocab)


def test_the_chain_is_fixed_by_its_seed() -> None:
    one, again, other = (build_chain(ChainSpec(seed=s)) for s in (5, 5, 6))
    assert torch.equal(one.next_tokens, again.next_tokens)
    assert one.entropy_rate == again.entropy_rate
    assert not torch.equal(one.next_tokens, other.next_tokens)


def test_a_chain_that_cannot_be_built_is_refused() -> None:
    with pytest.raises(InputError, match="2 <= successors <= vocab"):
        build_chain(ChainSpec(vocab=4, successors=5))
