"""The training recipes `gpuaccept train mnist --model` names: model, batch, optimizer, schedule.

Plain data without torch, so the command checks its flags before it pays for importing torch.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Recipe:
    model: str
    batch_size: int
    optimizer: str  # "sgd" or "adamw"
    learning_rate: float
    momentum: float = 0.0
    weight_decay: float = 0.0
    warmup_epochs: float = 0.0  # linear warm-up from zero over this many epochs
    decay_per_epoch: float = 1.0  # then the rate is multiplied by this every epoch (smoothly)


RECIPES: dict[str, Recipe] = {
    # Tuned for time to accuracy: a batch-normalised CNN at half LeNet's FLOPs, AdamW with a short
    # warm-up and a fast exponential decay, so it is accurate within a few epochs and settles.
    "fast": Recipe(
        model="fast",
        batch_size=128,
        optimizer="adamw",
        learning_rate=3e-3,
        weight_decay=5e-4,
        warmup_epochs=0.3,
        decay_per_epoch=0.6,
    ),
    # The seed's recipe, unchanged: SGD lr 0.01 momentum 0.5, batch 64.
    "lenet": Recipe(
        model="lenet", batch_size=64, optimizer="sgd", learning_rate=0.01, momentum=0.5
    ),
}
