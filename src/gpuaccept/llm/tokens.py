"""Synthetic tokens with a known floor: a seeded second-order Markov chain.

Each pair of tokens (a, b) is followed by one of `successors` tokens, drawn with fixed random
probabilities. No model can predict the next token better than the chain's entropy rate

    H2 = sum over pairs of pi(a, b) * H(next | a, b)

(pi: the stationary distribution of pairs; the sequences start in it, so every position is
stationary). A model that sees only the last token can do no better than the first-order
entropy H1 = H(next | b) of the same chain, which is well above H2. A loss that falls below the
midpoint of the two was reached by a model that attends to the token before the last: a node that
computes attention, matmuls and reductions wrongly cannot fake it, and one that only memorises
frequencies (log of the vocabulary) is far above both.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from gpuaccept.errors import InputError

_STATIONARY_ITERATIONS = 400


@dataclass(frozen=True)
class ChainSpec:
    vocab: int = 32  # tokens the chain uses (the model's vocabulary may be larger)
    successors: int = 4
    seed: int = 0


@dataclass(frozen=True)
class TokenChain:
    spec: ChainSpec
    next_tokens: torch.Tensor  # [vocab * vocab, successors] token ids
    cumulative: torch.Tensor  # [vocab * vocab, successors] cumulative probabilities
    stationary: torch.Tensor  # [vocab * vocab] pi over pairs
    entropy_rate: float  # H2, nats per token: the floor of the loss
    first_order_entropy: float  # H1, nats per token: the best a model blind to a - 1 can do

    def sample(self, sequences: int, length: int, seed: int, device: torch.device) -> torch.Tensor:
        """[sequences, length] tokens, each row a stationary walk of the chain."""
        vocab = self.spec.vocab
        generator = torch.Generator(device=device)
        generator.manual_seed(seed)
        next_tokens = self.next_tokens.to(device)
        cumulative = self.cumulative.to(device)
        start = torch.multinomial(
            self.stationary.to(device), sequences, replacement=True, generator=generator
        )
        out = torch.empty(sequences, length, dtype=torch.long, device=device)
        out[:, 0], out[:, 1] = start // vocab, start % vocab
        state = start
        draws = torch.rand(sequences, length, device=device, generator=generator)
        for position in range(2, length):
            choice = (
                (draws[:, position, None] > cumulative[state])
                .sum(-1)
                .clamp_max(self.spec.successors - 1)
            )
            token = next_tokens[state].gather(1, choice[:, None])[:, 0]
            out[:, position] = token
            state = out[:, position - 1] * vocab + token
        return out


def build_chain(spec: ChainSpec) -> TokenChain:
    """The chain of a seed, its stationary distribution and both entropies (on the CPU, float64)."""
    if spec.vocab < 2 or spec.successors < 2 or spec.successors > spec.vocab:
        raise InputError(
            f"the token chain needs 2 <= successors <= vocab (got {spec.successors} of "
            f"{spec.vocab})"
        )
    vocab, k = spec.vocab, spec.successors
    generator = torch.Generator().manual_seed(spec.seed)
    pairs = vocab * vocab
    next_tokens = torch.argsort(torch.rand(pairs, vocab, generator=generator), dim=1)[:, :k]
    weights = torch.softmax(torch.randn(pairs, k, generator=generator, dtype=torch.float64), 1)
    cumulative = weights.cumsum(1)
    # pair (a, b) -> pair (b, c): a lazy power iteration converges for any chain, periodic too
    targets = (torch.arange(pairs)[:, None] % vocab) * vocab + next_tokens
    pi = torch.full((pairs,), 1.0 / pairs, dtype=torch.float64)
    for _ in range(_STATIONARY_ITERATIONS):
        moved = torch.zeros_like(pi).index_add_(
            0, targets.flatten(), (pi[:, None] * weights).flatten()
        )
        pi = 0.5 * (pi + moved)
    pi = pi / pi.sum()
    row_entropy = -(weights * weights.log()).sum(1)
    entropy_rate = float((pi * row_entropy).sum())
    # H(next | b): mix the rows of every pair ending in b, weighted by pi
    joint = torch.zeros(vocab, vocab, dtype=torch.float64)  # [b, c]
    last = (torch.arange(pairs) % vocab)[:, None].expand(pairs, k)
    joint.index_put_(
        (last.flatten(), next_tokens.flatten()), (pi[:, None] * weights).flatten(), accumulate=True
    )
    given = joint / joint.sum(1, keepdim=True).clamp_min(1e-300)
    terms = torch.where(joint > 0, joint * given.clamp_min(1e-300).log(), torch.zeros_like(joint))
    first_order = float(-terms.sum())
    return TokenChain(
        spec=spec,
        next_tokens=next_tokens,
        cumulative=cumulative.float(),
        stationary=pi.float(),
        entropy_rate=entropy_rate,
        first_order_entropy=first_order,
    )
