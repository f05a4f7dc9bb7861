"""Time to test accuracy: the seed's MNIST loop against `gpuaccept train mnist`, same data and run.

Reference (the PyTorch examples' classic MNIST as the seeds run it): a per-sample Dataset and a
DataLoader with batch 64 and shuffling, the conv 20 -> conv 50 -> fc 500 -> fc 10 CNN with
log_softmax + nll_loss, SGD lr 0.01 momentum 0.5, a test pass after every epoch. Its per-sample
transform is ToTensor + Normalize done with torch (torchvision's PIL step is not available here).

Ours: gpuaccept.mnist.train with the default recipe and --epochs 20, stopped once it reaches the
target for the time figure, then run to the end for the final accuracy.

Both are timed from the first training step to the end of the first test pass at or above the
target, on the same device. Data: --data (real MNIST: a directory or MNIST_data.tar.gz) or, when
absent, generated handwriting-like digits (gpuaccept.mnist.synthetic) cached under --cache.

Targets (issue #4): ours at least 5x faster to 99.0%, and at least 99.2% after 20 epochs.
Run: python benchmarks/mnist_vs_reference.py [--data PATH] [--device cpu|cuda] [--json FILE]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import time
from pathlib import Path

import numpy as np
import numpy.typing as npt
import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset

from gpuaccept.mnist.data import MnistData, load_mnist
from gpuaccept.mnist.model import lenet
from gpuaccept.mnist.recipes import RECIPES
from gpuaccept.mnist.synthetic import write_mnist_files
from gpuaccept.mnist.train import (
    PIXEL_MEAN,
    PIXEL_STD,
    EpochRecord,
    TrainConfig,
    train_mnist,
)
from gpuaccept.record.environment import capture_environment


class _PerSampleMnist(Dataset[tuple[torch.Tensor, int]]):
    """One image at a time, as torchvision's MNIST with ToTensor + Normalize hands them out."""

    def __init__(self, images: npt.NDArray[np.uint8], labels: npt.NDArray[np.int64]) -> None:
        self.images, self.labels = images, labels

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        image = torch.from_numpy(self.images[index]).float().div(255).unsqueeze(0)
        return (image - PIXEL_MEAN) / PIXEL_STD, int(self.labels[index])


def reference_time_to(
    data: MnistData, target: float, device: torch.device, max_epochs: int, seed: int
) -> tuple[float | None, list[float], int]:
    torch.manual_seed(seed)
    train = DataLoader(
        _PerSampleMnist(data.train_images, data.train_labels), batch_size=64, shuffle=True
    )
    test = DataLoader(_PerSampleMnist(data.test_images, data.test_labels), batch_size=1000)
    model = lenet().to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.5)
    accuracies: list[float] = []
    start = time.perf_counter()
    for _epoch in range(max_epochs):
        model.train()
        for images, labels in train:
            images, labels = images.to(device), labels.to(device)
            optimizer.zero_grad()
            loss = F.nll_loss(F.log_softmax(model(images), dim=1), labels)
            loss.backward()
            optimizer.step()
        model.eval()
        correct = 0
        with torch.no_grad():
            for images, labels in test:
                predicted = model(images.to(device)).argmax(dim=1)
                correct += int((predicted == labels.to(device)).sum())
        accuracies.append(correct / len(data.test_labels))
        print(
            f"  reference epoch {len(accuracies):2d}: test accuracy {accuracies[-1]:.2%}  "
            f"({time.perf_counter() - start:.1f} s)",
            flush=True,
        )
        if accuracies[-1] >= target:
            return time.perf_counter() - start, accuracies, len(accuracies)
    return None, accuracies, len(accuracies)


class _Reached(Exception):
    pass


def ours(
    data: MnistData,
    target: float,
    device: torch.device,
    epochs: int,
    seed: int,
    stop_at_target: bool,
) -> tuple[float | None, list[float], int]:
    gpu = device.type == "cuda"
    config = TrainConfig(recipe=RECIPES["fast"], epochs=epochs, seed=seed, bf16=gpu)
    reached: list[float] = []
    accuracies: list[float] = []

    def watch(record: EpochRecord) -> None:
        accuracies.append(record.test_accuracy)
        print(
            f"  ours      epoch {record.epoch:2d}: test accuracy {record.test_accuracy:.2%}  "
            f"({record.elapsed_seconds:.1f} s, {record.images_per_second:,.0f} images/s)",
            flush=True,
        )
        if record.test_accuracy >= target and not reached:
            reached.append(record.elapsed_seconds)
            if stop_at_target:
                raise _Reached

    with contextlib.suppress(_Reached):
        train_mnist(data, config, device, on_epoch=watch)
    return (reached[0] if reached else None), accuracies, len(accuracies)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, help="real MNIST (directory or tarball)")
    parser.add_argument("--cache", type=Path, default=Path(".cache/mnist-generated"))
    parser.add_argument("--train-count", type=int, default=60_000)
    parser.add_argument("--test-count", type=int, default=10_000)
    parser.add_argument("--target", type=float, default=0.99)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--reference-max-epochs", type=int, default=20)
    parser.add_argument("--epochs", type=int, default=20, help="our default run length")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--skip-full-run",
        action="store_true",
        help="do not run ours to --epochs for the final accuracy",
    )
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args()

    if args.data is None:
        args.data = args.cache / f"{args.train_count}-{args.test_count}"
        if not (args.data / "t10k-labels-idx1-ubyte").exists():
            print(f"generating {args.train_count}+{args.test_count} digits into {args.data}")
            write_mnist_files(args.data, args.train_count, args.test_count, seed=0)
        source = "generated handwriting-like digits (gpuaccept.mnist.synthetic, seed 0)"
    else:
        source = f"MNIST from {args.data}"
    data = load_mnist(args.data)
    device = torch.device(args.device)
    print(
        f"data: {source}: {len(data.train_labels)} train, {len(data.test_labels)} test; "
        f"device {device}; torch {torch.__version__}, {torch.get_num_threads()} threads"
    )

    print(f"ours (default recipe, --epochs {args.epochs}), stopping at {args.target:.1%}:")
    ours_seconds, ours_curve, ours_epochs = ours(
        data, args.target, device, args.epochs, args.seed, stop_at_target=True
    )
    print(f"reference (seed loop), up to {args.reference_max_epochs} epochs:")
    ref_seconds, ref_curve, ref_epochs = reference_time_to(
        data, args.target, device, args.reference_max_epochs, args.seed
    )
    final = None
    if not args.skip_full_run:
        print(f"ours, full default run of {args.epochs} epochs:")
        _, full_curve, _ = ours(data, 2.0, device, args.epochs, args.seed, stop_at_target=False)
        final = full_curve[-1]

    def show(seconds: float | None, epochs: int) -> str:
        return (
            f"{seconds:8.1f} s ({epochs} epochs)" if seconds else f"not reached in {epochs} epochs"
        )

    print(f"\ntime to {args.target:.1%} test accuracy on {device}:")
    print(f"  reference  {show(ref_seconds, ref_epochs)}")
    print(f"  ours       {show(ours_seconds, ours_epochs)}")
    speedup = ref_seconds / ours_seconds if ref_seconds and ours_seconds else None
    if speedup:
        print(f"  speed-up   {speedup:8.1f}x   (target: at least 5x)")
    if final is not None:
        print(
            f"ours after {args.epochs} epochs: {final:.2%} test accuracy (target: at least 99.2%)"
        )
    if args.json:
        args.json.write_text(
            json.dumps(
                {
                    "data": source,
                    "device": str(device),
                    "torch": torch.__version__,
                    "target_accuracy": args.target,
                    "reference_seconds": ref_seconds,
                    "reference_curve": ref_curve,
                    "ours_seconds": ours_seconds,
                    "ours_curve": ours_curve,
                    "speedup": speedup,
                    "final_accuracy": final,
                    "epochs": args.epochs,
                    "environment": capture_environment(),
                },
                indent=2,
            )
            + "\n"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
