"""The MNIST models: the seed's LeNet-style CNN and the default, tuned for time to accuracy."""

from __future__ import annotations

from torch import nn


def lenet() -> nn.Module:
    """The PyTorch examples' classic CNN: conv 20 -> conv 50 -> fc 500 -> fc 10."""
    return nn.Sequential(
        nn.Conv2d(1, 20, 5),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Conv2d(20, 50, 5),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Flatten(),
        nn.Linear(4 * 4 * 50, 500),
        nn.ReLU(),
        nn.Linear(500, 10),
    )


def fast_cnn() -> nn.Module:
    """LeNet's shape at half its FLOPs, batch-normalised so it trains at a high learning rate."""
    return nn.Sequential(
        nn.Conv2d(1, 16, 5, bias=False),
        nn.BatchNorm2d(16),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Conv2d(16, 32, 5, bias=False),
        nn.BatchNorm2d(32),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Flatten(),
        nn.Linear(4 * 4 * 32, 128),
        nn.ReLU(),
        nn.Linear(128, 10),
    )


MODELS = {"fast": fast_cnn, "lenet": lenet}
