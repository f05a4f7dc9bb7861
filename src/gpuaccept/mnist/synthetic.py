"""Generated handwriting-like digits in MNIST's format, for tests and benchmarks without MNIST.

Each digit is a few pen strokes (with style variants: a 7 with or without a bar, open or closed
4s...) whose control points are jittered, then slanted, rotated and scaled, drawn with a random
pen width and anti-aliasing, and fitted in a 20x20 box inside 28x28 like MNIST. The classes are
learnable but not trivially separable, so accuracy curves look like MNIST's rather than noise's.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import numpy.typing as npt
import torch
import torch.nn.functional as F

from gpuaccept.mnist.data import IMAGE_SIDE
from gpuaccept.mnist.idx import write_idx

Stroke = list[tuple[float, float]]


def _arc(cx: float, cy: float, rx: float, ry: float, start: float, end: float) -> Stroke:
    """Points on an ellipse from `start` to `end` degrees (0 = right, 90 = down)."""
    steps = max(3, int(abs(end - start) / 30) + 1)
    return [
        (
            cx + rx * math.cos(math.radians(start + (end - start) * i / steps)),
            cy + ry * math.sin(math.radians(start + (end - start) * i / steps)),
        )
        for i in range(steps + 1)
    ]


# Per digit, style variants; per variant, strokes in a unit box (x right, y down).
_GLYPHS: dict[int, list[list[Stroke]]] = {
    0: [[_arc(0.5, 0.5, 0.3, 0.45, -90, 270)], [_arc(0.5, 0.5, 0.25, 0.45, -100, 250)]],
    1: [
        [[(0.5, 0.05), (0.5, 0.95)]],
        [[(0.35, 0.2), (0.55, 0.05), (0.55, 0.95)]],
        [[(0.35, 0.2), (0.55, 0.05), (0.55, 0.95)], [(0.35, 0.95), (0.75, 0.95)]],
    ],
    2: [
        [[*_arc(0.5, 0.3, 0.28, 0.25, 200, 390), (0.2, 0.95), (0.85, 0.95)]],
        [
            [
                *_arc(0.5, 0.3, 0.28, 0.25, 190, 400),
                (0.25, 0.9),
                *_arc(0.35, 0.85, 0.1, 0.1, 180, 0),
                (0.85, 0.95),
            ]
        ],
    ],
    3: [
        [_arc(0.45, 0.28, 0.27, 0.23, 200, 450), _arc(0.45, 0.72, 0.3, 0.23, -90, 160)],
        [[(0.2, 0.05), (0.8, 0.05), (0.45, 0.45)], _arc(0.45, 0.7, 0.3, 0.25, -90, 160)],
    ],
    4: [
        [[(0.6, 0.05), (0.15, 0.65), (0.85, 0.65)], [(0.65, 0.3), (0.65, 0.95)]],
        [[(0.25, 0.05), (0.2, 0.55), (0.8, 0.55)], [(0.7, 0.05), (0.7, 0.95)]],
    ],
    5: [
        [[(0.8, 0.05), (0.3, 0.05), (0.25, 0.45), *_arc(0.47, 0.67, 0.3, 0.27, -120, 150)]],
        [
            [(0.3, 0.05), (0.25, 0.45), *_arc(0.47, 0.67, 0.3, 0.27, -120, 150)],
            [(0.3, 0.05), (0.8, 0.05)],
        ],
    ],
    6: [
        [_arc(0.75, 0.55, 0.5, 0.5, 240, 170) + _arc(0.5, 0.72, 0.27, 0.23, 180, 540)],
        [[(0.7, 0.05), (0.3, 0.5), *_arc(0.5, 0.72, 0.25, 0.23, 200, 560)]],
    ],
    7: [
        [[(0.15, 0.05), (0.85, 0.05), (0.4, 0.95)]],
        [[(0.15, 0.05), (0.85, 0.05), (0.4, 0.95)], [(0.35, 0.5), (0.8, 0.5)]],
        [[(0.15, 0.15), (0.85, 0.05), *_arc(0.0, 0.95, 0.85, 0.9, -45, 0)]],
    ],
    8: [
        [_arc(0.5, 0.27, 0.24, 0.22, 90, 450), _arc(0.5, 0.72, 0.3, 0.23, -90, 270)],
        [_arc(0.5, 0.27, 0.22, 0.22, 60, 420) + _arc(0.5, 0.72, 0.28, 0.23, -100, 250)],
    ],
    9: [
        [[*_arc(0.5, 0.3, 0.27, 0.25, 0, 360), (0.75, 0.3), (0.7, 0.95)]],
        [_arc(0.5, 0.3, 0.27, 0.25, 0, 360) + _arc(0.0, 0.3, 0.75, 0.65, 0, 80)],
    ],
}
_MAX_SEGMENTS = max(
    sum(len(stroke) - 1 for stroke in variant)
    for variants in _GLYPHS.values()
    for variant in variants
)


def _segments(label: int, variant: int, rng: np.random.Generator) -> npt.NDArray[np.float64]:
    """Jittered and transformed stroke segments (S x 4: x0 y0 x1 y1) in pixel coordinates."""
    strokes = _GLYPHS[label][variant]
    # A few writers are sloppy: their digits are the hard and ambiguous cases every MNIST has.
    jitter = rng.uniform(0.10, 0.14) if rng.random() < 0.005 else rng.uniform(0.03, 0.08)
    points = [np.asarray(stroke) + rng.normal(0, jitter, (len(stroke), 2)) for stroke in strokes]
    # Smooth jitter: neighbours move together, like a hand rather than noise.
    points = [
        np.vstack([p[:1], (p[:-2] + 2 * p[1:-1] + p[2:]) / 4, p[-1:]]) if len(p) > 2 else p
        for p in points
    ]
    angle = math.radians(rng.normal(0, 13))
    shear = rng.normal(0.15, 0.2)  # most writers slant right
    aspect = rng.uniform(0.65, 1.15)
    transform = np.array(
        [[math.cos(angle), -math.sin(angle)], [math.sin(angle), math.cos(angle)]]
    ) @ np.array([[aspect, -shear], [0.0, 1.0]])
    points = [p @ transform.T for p in points]
    everything = np.vstack(points)
    low, high = everything.min(axis=0), everything.max(axis=0)
    scale = rng.uniform(17, 20) / max(high - low)
    centre = (low + high) / 2
    offset = IMAGE_SIDE / 2 + rng.normal(0, 0.8, 2)
    segments = [
        np.hstack([(p[:-1] - centre) * scale + offset, (p[1:] - centre) * scale + offset])
        for p in points
    ]
    return np.vstack(segments)


def _render(segments: torch.Tensor, widths: torch.Tensor) -> torch.Tensor:
    """Anti-aliased pen strokes: B x S x 4 segments (NaN rows unused), B widths -> B x 28 x 28."""
    coordinates = torch.arange(IMAGE_SIDE, dtype=torch.float32) + 0.5
    ys, xs = torch.meshgrid(coordinates, coordinates, indexing="ij")
    px, py = xs.reshape(1, -1, 1), ys.reshape(1, -1, 1)  # 1 x P x 1
    # Unused rows become a far-away dot: no pixel is near it, and no NaN reaches the minimum.
    segments = torch.nan_to_num(segments, nan=1e4)
    sx, sy, ex, ey = (segments[:, None, :, i] for i in range(4))  # B x 1 x S each
    dx, dy = ex - sx, ey - sy
    inverse = 1 / (dx * dx + dy * dy).clamp_min(1e-6)
    # x and y apart and in place: B x P x S is the only large shape, and test fixtures draw
    # thousands of digits on 2 cores (3.4x faster than stacked coordinates and a norm).
    rx, ry = px - sx, py - sy
    along = (rx * dx).add_(ry * dy).mul_(inverse).clamp_(0, 1)
    qx = rx.sub_(along * dx)
    qy = ry.sub_(along.mul_(dy))
    distance = qx.mul_(qx).add_(qy.mul_(qy)).amin(dim=2).sqrt_()  # to the nearest segment
    ink = (widths[:, None] / 2 + 0.5 - distance).clamp(0, 1)
    return ink.reshape(-1, IMAGE_SIDE, IMAGE_SIDE)


def _elastic(images: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    """Simard-style elastic distortion: a smooth random displacement field of a pixel or two."""
    count = images.shape[0]
    field = torch.rand(count, 2, 7, 7, generator=generator) * 2 - 1
    field = F.interpolate(field, size=(IMAGE_SIDE, IMAGE_SIDE), mode="bicubic", align_corners=True)
    strength = torch.rand(count, 1, 1, 1, generator=generator) * 2.0 / IMAGE_SIDE
    identity = F.affine_grid(
        torch.eye(2, 3).expand(count, 2, 3), [count, 1, IMAGE_SIDE, IMAGE_SIDE], align_corners=False
    )
    grid = identity + (field * strength).permute(0, 2, 3, 1)
    warped = F.grid_sample(images[:, None], grid, mode="bilinear", align_corners=False)
    return warped[:, 0]


def generate_digits(
    count: int, seed: int, chunk: int = 512
) -> tuple[npt.NDArray[np.uint8], npt.NDArray[np.uint8]]:
    """`count` images (uint8, 28x28) and their labels, balanced over 0-9, reproducible by seed."""
    rng = np.random.default_rng(seed)
    generator = torch.Generator().manual_seed(seed)
    labels = rng.permutation(np.arange(count) % 10).astype(np.uint8)
    images = np.empty((count, IMAGE_SIDE, IMAGE_SIDE), dtype=np.uint8)
    for begin in range(0, count, chunk):
        batch = labels[begin : begin + chunk]
        segments = np.full((len(batch), _MAX_SEGMENTS, 4), np.nan)
        for row, label in enumerate(batch):
            drawn = _segments(int(label), int(rng.integers(len(_GLYPHS[int(label)]))), rng)
            segments[row, : len(drawn)] = drawn
        widths = torch.from_numpy(rng.uniform(1.2, 3.6, len(batch))).float()
        ink = _elastic(_render(torch.from_numpy(segments).float(), widths), generator)
        ink = ink * torch.from_numpy(rng.uniform(0.75, 1.0, (len(batch), 1, 1))).float()
        images[begin : begin + len(batch)] = (ink * 255).round().byte().numpy()
    return images, labels


def write_mnist_files(
    directory: Path,
    train_count: int,
    test_count: int,
    seed: int = 0,
    compress: bool = False,
) -> None:
    """The four MNIST IDX files of generated digits in `directory` (test set from its own seed)."""
    directory.mkdir(parents=True, exist_ok=True)
    suffix = ".gz" if compress else ""
    for prefix, count, split_seed in (("train", train_count, seed), ("t10k", test_count, seed + 1)):
        images, labels = generate_digits(count, split_seed)
        write_idx(directory / f"{prefix}-images-idx3-ubyte{suffix}", images)
        write_idx(directory / f"{prefix}-labels-idx1-ubyte{suffix}", labels)
