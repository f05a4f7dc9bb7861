"""A small classifier trained on synthetic, learnable data: alone (train check) and with DDP.

Labels come from a fixed random "teacher" (argmax of a linear map), so a working stack must
drive the loss well below its start within one epoch; noise labels could not prove that.
"""

from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass

import torch
from torch import nn


@dataclass(frozen=True)
class SmokeSpec:
    samples: int
    epochs: int
    batch_size: int
    features: int = 32
    classes: int = 4
    hidden: int = 64
    learning_rate: float = 0.05
    momentum: float = 0.9
    seed: int = 0


@dataclass(frozen=True)
class SmokeOutcome:
    initial_loss: float  # mean of the first few steps
    final_loss: float  # mean of the last few steps
    steps: int
    seconds: float
    param_digest: str  # sha256 of every parameter's bytes, in order

    @property
    def loss_ratio(self) -> float:
        return self.final_loss / self.initial_loss if self.initial_loss > 0 else float("inf")


def synthetic_dataset(
    spec: SmokeSpec, device: torch.device, shard: int = 0
) -> tuple[torch.Tensor, torch.Tensor]:
    """`spec.samples` inputs with teacher labels; the teacher is the same for every shard."""
    teacher = torch.randn(
        spec.features, spec.classes, generator=torch.Generator().manual_seed(spec.seed)
    )
    inputs = torch.randn(
        spec.samples,
        spec.features,
        generator=torch.Generator().manual_seed(spec.seed + 1 + shard),
    )
    return inputs.to(device), (inputs @ teacher).argmax(dim=1).to(device)


def build_model(spec: SmokeSpec, device: torch.device) -> nn.Module:
    torch.manual_seed(spec.seed)  # identical initial weights on every rank
    return nn.Sequential(
        nn.Linear(spec.features, spec.hidden),
        nn.ReLU(),
        nn.Linear(spec.hidden, spec.classes),
    ).to(device)


def parameter_digest(model: nn.Module) -> str:
    digest = hashlib.sha256()
    for parameter in model.parameters():
        digest.update(parameter.detach().cpu().contiguous().numpy().tobytes())
    return digest.hexdigest()


def train_smoke(
    model: nn.Module, spec: SmokeSpec, device: torch.device, shard: int = 0
) -> SmokeOutcome:
    """Train `model` (plain or DDP-wrapped) for spec.epochs over its shard of synthetic data.

    SGD with momentum, written out: every torch.optim optimizer imports torch._dynamo on its
    first use (Optimizer.__init__ is wrapped by torch/_compile.py's _disable_dynamo), 1.7 s of
    this check's 3 s on a 2-core CPU and more where byte-code is not cached (an image without
    .pyc files compiles its 845 modules), in the quick level that a health check runs hourly.
    Momentum SGD at 0.05 takes the loss to 0.06-0.19 of its start (the check asks for 0.5)."""
    inputs, labels = synthetic_dataset(spec, device, shard)
    parameters = list(model.parameters())
    velocities = [torch.zeros_like(parameter) for parameter in parameters]
    order_generator = torch.Generator(device=device).manual_seed(spec.seed + 100 + shard)
    losses: list[torch.Tensor] = []
    start = time.perf_counter()
    for _ in range(spec.epochs):
        order = torch.randperm(spec.samples, device=device, generator=order_generator)
        for first in range(0, spec.samples, spec.batch_size):
            batch = order[first : first + spec.batch_size]
            loss = nn.functional.cross_entropy(model(inputs[batch]), labels[batch])
            for parameter in parameters:
                parameter.grad = None
            loss.backward()
            with torch.no_grad():
                for parameter, velocity in zip(parameters, velocities, strict=True):
                    assert parameter.grad is not None  # every parameter is on the loss's path
                    velocity.mul_(spec.momentum).add_(parameter.grad)
                    parameter.sub_(velocity, alpha=spec.learning_rate)
            losses.append(loss.detach())
    history = torch.stack(losses).float().cpu()
    seconds = time.perf_counter() - start
    window = max(1, min(10, len(history) // 4))
    plain = model.module if isinstance(model, nn.parallel.DistributedDataParallel) else model
    return SmokeOutcome(
        initial_loss=float(history[:window].mean()),
        final_loss=float(history[-window:].mean()),
        steps=len(history),
        seconds=seconds,
        param_digest=parameter_digest(plain),
    )


def ddp_smoke_rank(rank: int, world_size: int, spec: SmokeSpec) -> SmokeOutcome:
    """Rank body for the DDP smoke: each rank trains on its own shard, gradients are averaged."""
    from gpuaccept.measure.collectives import rank_device

    device = rank_device(rank)
    model = build_model(spec, device)
    ids = [device.index] if device.type == "cuda" else None
    ddp = nn.parallel.DistributedDataParallel(model, device_ids=ids)
    return train_smoke(ddp, spec, device, shard=rank)
