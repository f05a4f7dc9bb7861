"""Device memory: STREAM-style bandwidth (GB/s = 10^9 B/s) and a write/verify pattern test."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from gpuaccept.errors import InputError
from gpuaccept.measure.timing import TimingStats, time_repeats

# STREAM kernels: bytes moved per element (4-byte floats), as STREAM counts them.
STREAM_BYTES_PER_ELEMENT = {"copy": 8, "scale": 8, "add": 12, "triad": 12}


@dataclass(frozen=True)
class BandwidthFigure:
    kernel: str
    bytes_moved: int
    timing: TimingStats

    @property
    def median_gbps(self) -> float:
        return self.bytes_moved / self.timing.median_seconds / 1e9

    @property
    def best_gbps(self) -> float:
        return self.bytes_moved / self.timing.best_seconds / 1e9


def measure_stream_gbps(
    device: torch.device, kernel: str, array_bytes: int, warmup: int, repeats: int
) -> BandwidthFigure:
    """One STREAM kernel over arrays of `array_bytes` each."""
    if kernel not in STREAM_BYTES_PER_ELEMENT:
        raise InputError(f"unknown STREAM kernel {kernel!r}")
    numel = array_bytes // 4
    if numel < 1:
        raise InputError(f"array size must be at least 4 bytes (got {array_bytes})")
    a = torch.ones(numel, device=device)
    b = torch.full((numel,), 2.0, device=device)
    c = torch.empty(numel, device=device)
    works: dict[str, Callable[[], object]] = {
        "copy": lambda: c.copy_(a),
        "scale": lambda: torch.mul(a, 3.0, out=c),
        "add": lambda: torch.add(a, b, out=c),
        "triad": lambda: torch.add(a, b, alpha=3.0, out=c),
    }
    timing = time_repeats(works[kernel], device, warmup, repeats)
    return BandwidthFigure(kernel, STREAM_BYTES_PER_ELEMENT[kernel] * numel, timing)


@dataclass(frozen=True)
class PatternFigure:
    bytes_tested: int
    patterns: tuple[str, ...]
    mismatched_bytes: int


_PATTERNS = {"zeros": 0x00, "ones": 0xFF, "alternating-a": 0xAA, "alternating-5": 0x55}


def memory_pattern_test(device: torch.device, total_bytes: int, chunk_bytes: int) -> PatternFigure:
    """Write fixed and address-derived patterns over `total_bytes`, chunk by chunk, and verify."""
    chunk = max(1, min(chunk_bytes, total_bytes))
    chunks = [
        torch.empty(chunk, dtype=torch.uint8, device=device)
        for _ in range(max(1, total_bytes // chunk))
    ]
    mismatched = 0
    for value in _PATTERNS.values():
        for buffer in chunks:
            buffer.fill_(value)
        for buffer in chunks:
            mismatched += int((buffer != value).sum())
    for number, buffer in enumerate(chunks):
        words = buffer.view(torch.int32)
        expected = torch.arange(words.numel(), device=device, dtype=torch.int32) ^ number
        words.copy_(expected)
        mismatched += int((words != expected).sum()) * 4
    tested = sum(buffer.numel() for buffer in chunks)
    return PatternFigure(tested, (*_PATTERNS, "address-xor"), mismatched)
