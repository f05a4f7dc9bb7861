"""Judging a burn-in window across the GPUs of a node (issue #23): silent data corruption by
result digests, stragglers against the node's confirmed best, and the drift of a figure over the
run.

Pure logic over figures and digests, so the same rules judge the GPU run and its CPU twin; the
scheduler that produces the windows is not here yet (see docs/accept.md once it is).

Silent data corruption. Every GPU computes the same seeded, deterministic work, and the digest
of its result bits is compared across the GPUs: the bits that most GPUs agree on are the
majority, and a GPU whose bits differ is named with the first differing element. This catches a
GPU that computes wrong bits while its neighbours compute right ones. It cannot catch a fault
every GPU shares (the same wrong library, the same bad kernel), which is what the periodic check
against a float64 CPU reference is for, and it needs bitwise-deterministic work: an algorithm
whose reduction order varies between runs (atomics, split-K chosen at run time) must be pinned
or left out, or healthy GPUs would disagree. With two GPUs that disagree there is no majority:
both are named, and the reference decides.

Stragglers. Each GPU's throughput in a window is compared with the best rate a second GPU of
the node confirms for the same stressor (with two GPUs, the better one): a GPU more than the
tolerance below it is a straggler, named with the percent. The default 10% is gpu-fryer's
(`--tflops-tolerance`, default 10: huggingface/gpu-fryer src/main.rs:73-76), which compares with
the best GPU of the node; the confirmed best keeps one unusually fast GPU from making its healthy
neighbours stragglers, and, unlike the median this used before (issue #30), still holds a slow
majority to its healthy peers. A node whose GPUs are all equally slow is no straggler case: the
references judge it, as in `accept`.

Drift. A figure's least-squares slope over the run, in percent of its mean per hour, is
reported (thermal soak shows as a negative slope); no threshold fails it here yet, since none
has a source we have read.
"""

from __future__ import annotations

import hashlib
import math
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

DEFAULT_STRAGGLER_TOLERANCE_PERCENT = 10.0


def result_digest(result: np.ndarray) -> str:
    """The SHA-256 of a result's bits, its dtype and shape (the same bits in another shape are
    another result)."""
    contiguous = np.ascontiguousarray(result)
    header = f"{contiguous.dtype.str}{contiguous.shape}".encode()
    return hashlib.sha256(header + contiguous.tobytes()).hexdigest()


@dataclass(frozen=True)
class Difference:
    """The first element (in C order) whose bits differ between two results."""

    index: tuple[int, ...]
    value: float
    expected: float


def first_difference(result: np.ndarray, expected: np.ndarray) -> Difference | None:
    """Where `result`'s bits first differ from `expected`'s; None when they are identical.

    Compared as bits, not values: NaN against NaN with the same bits is equal, -0.0 against 0.0
    is a difference (a GPU that flips a sign bit is not healthy)."""
    if result.shape != expected.shape or result.dtype != expected.dtype:
        raise ValueError(
            f"results of different kinds: {result.dtype}{result.shape} against "
            f"{expected.dtype}{expected.shape}"
        )
    bits = np.dtype(f"u{result.dtype.itemsize}")
    differ = np.ascontiguousarray(result).view(bits) != np.ascontiguousarray(expected).view(bits)
    flat = np.flatnonzero(differ)
    if flat.size == 0:
        return None
    index = tuple(int(i) for i in np.unravel_index(int(flat[0]), result.shape))
    return Difference(index, float(result[index]), float(expected[index]))


def first_differing_row(rows: list[str], expected: list[str]) -> int | None:
    """The first row whose digest differs between two results' row digests (None when every
    row agrees): where two devices part, without moving their whole results."""
    for index, (row, other) in enumerate(zip(rows, expected, strict=False)):
        if row != other:
            return index
    return None if len(rows) == len(expected) else min(len(rows), len(expected))


@dataclass(frozen=True)
class DigestVerdict:
    majority: str | None  # the digest most GPUs computed; None when no digest has a majority
    agreeing: list[str]  # the GPUs that computed it
    differing: list[str]  # the GPUs whose bits differ from it (every GPU, with no majority)

    @property
    def ok(self) -> bool:
        return not self.differing


def judge_digests(digests: Mapping[str, str]) -> DigestVerdict:
    """The GPUs whose result bits differ from the majority's.

    A majority is more than half of the GPUs. With none (two GPUs that disagree, or three
    results that all differ) every GPU is named: the float64 reference must decide which is
    wrong."""
    if not digests:
        return DigestVerdict(None, [], [])
    (digest, count), *_ = Counter(digests.values()).most_common(1)
    if count * 2 <= len(digests):
        return DigestVerdict(None, [], sorted(digests))
    return DigestVerdict(
        digest,
        sorted(gpu for gpu, d in digests.items() if d == digest),
        sorted(gpu for gpu, d in digests.items() if d != digest),
    )


@dataclass(frozen=True)
class Straggler:
    gpu: str
    value: float
    reference: float  # the rate it is held to (see `stragglers`)

    @property
    def deviation_percent(self) -> float:
        return (self.value - self.reference) / abs(self.reference) * 100 if self.reference else 0.0


def straggler_reference(throughput: Mapping[str, float]) -> float | None:
    """The rate the node's devices are held to: the best rate another device confirms (the
    second highest), or with two devices the better one; None with fewer than two."""
    values = sorted((v for v in throughput.values() if math.isfinite(v)), reverse=True)
    if len(values) < 2:
        return None
    return values[1] if len(values) >= 3 else values[0]


def stragglers(
    throughput: Mapping[str, float],
    tolerance_percent: float = DEFAULT_STRAGGLER_TOLERANCE_PERCENT,
) -> list[Straggler]:
    """Devices more than `tolerance_percent` below `straggler_reference` (one stressor, one
    window).

    gpu-fryer holds each GPU to the best of the node; held to the best that a second device
    confirms instead, one unusually fast device cannot make its healthy neighbours stragglers,
    while a slow majority (three of five, a socket's worth) is still held to its healthy peers,
    which a median would not do. With two devices nothing confirms the best: the slower is held
    to the better, as gpu-fryer holds it."""
    if not (math.isfinite(tolerance_percent) and 0 <= tolerance_percent < 100):
        raise ValueError(f"tolerance must be a percentage in [0, 100) (got {tolerance_percent})")
    values = {gpu: v for gpu, v in throughput.items() if math.isfinite(v)}
    reference = straggler_reference(values)
    if reference is None:
        return []
    floor = reference * (1 - tolerance_percent / 100)
    return [Straggler(gpu, v, reference) for gpu, v in sorted(values.items()) if v < floor]


def drift_percent_per_hour(points: Sequence[tuple[float, float]]) -> float | None:
    """The least-squares slope of (seconds, value) points, in percent of their mean per hour;
    None with fewer than two distinct times or a mean of zero."""
    finite = [(t, v) for t, v in points if math.isfinite(t) and math.isfinite(v)]
    if len({t for t, _ in finite}) < 2:
        return None
    times = np.array([t for t, _ in finite], dtype=np.float64)
    values = np.array([v for _, v in finite], dtype=np.float64)
    mean = float(values.mean())
    if mean == 0:
        return None
    centred = times - times.mean()
    slope = float((centred * (values - mean)).sum() / (centred**2).sum())  # per second
    return slope * 3600 / abs(mean) * 100
