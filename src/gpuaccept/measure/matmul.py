"""Matmul throughput (mamf-finder style) and GEMM result consistency (gpu-burn style)."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import torch

from gpuaccept.errors import InputError
from gpuaccept.measure.timing import TimingStats, synchronize, time_repeats

DTYPES: dict[str, torch.dtype] = {
    "fp64": torch.float64,
    "fp32": torch.float32,
    "tf32": torch.float32,  # fp32 storage, tensor-core TF32 math
    "bf16": torch.bfloat16,
    "fp16": torch.float16,
    "fp8": torch.float8_e4m3fn,  # e4m3 inputs, per-tensor scales, bf16 output (torch._scaled_mm)
}
L2_FLUSH_BYTES = 256 * 1024**2

Matmul = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]


def unsupported_reason(device: torch.device, dtype: str) -> str | None:
    """Why `dtype` matmul cannot run on `device` (None when it can)."""
    if dtype not in DTYPES:
        raise InputError(f"unknown dtype {dtype!r} (choose from {', '.join(DTYPES)})")
    if device.type == "cpu":
        return "TF32 is a tensor-core format with no CPU equivalent" if dtype == "tf32" else None
    major, minor = torch.cuda.get_device_capability(device)
    if dtype in ("bf16", "tf32") and major < 8:
        return f"{dtype} needs compute capability 8.0 or newer (this GPU is {major}.{minor})"
    if dtype == "fp8" and (major, minor) < (8, 9):
        return f"fp8 needs compute capability 8.9 or newer (this GPU is {major}.{minor})"
    return None


@contextlib.contextmanager
def matmul_precision(dtype: str) -> Iterator[None]:
    """TF32 math for 'tf32', strict IEEE fp32 otherwise; restored on exit."""
    previous = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision("high" if dtype == "tf32" else "highest")
    try:
        yield
    finally:
        torch.set_float32_matmul_precision(previous)


@dataclass(frozen=True)
class MatmulFigure:
    dtype: str
    m: int
    n: int
    k: int
    timing: TimingStats

    @property
    def flops(self) -> float:
        return 2.0 * self.m * self.n * self.k

    @property
    def median_tflops(self) -> float:
        return self.flops / self.timing.median_seconds / 1e12

    @property
    def best_tflops(self) -> float:
        return self.flops / self.timing.best_seconds / 1e12


def _operands(
    device: torch.device, dtype: str, m: int, n: int, k: int, seed: int = 0
) -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator(device=device).manual_seed(seed)
    if dtype == "fp8":  # _scaled_mm wants A row-major and B column-major
        a = torch.randn(m, k, device=device, generator=generator).to(DTYPES[dtype])
        b = torch.randn(n, k, device=device, generator=generator).to(DTYPES[dtype]).t()
        return a, b
    a = torch.randn(m, k, device=device, dtype=DTYPES[dtype], generator=generator)
    b = torch.randn(k, n, device=device, dtype=DTYPES[dtype], generator=generator)
    return a, b


def _gemm(dtype: str, a: torch.Tensor, b: torch.Tensor) -> Callable[[], object]:
    """One C = A @ B of the dtype's kind, into a preallocated output."""
    if dtype == "fp8":
        scale = torch.ones((), device=a.device)
        return lambda: torch._scaled_mm(
            a, b, scale_a=scale, scale_b=scale, out_dtype=torch.bfloat16
        )
    out = torch.empty(a.shape[0], b.shape[1], device=a.device, dtype=a.dtype)
    return lambda: torch.matmul(a, b, out=out)


def measure_matmul_tflops(
    device: torch.device,
    dtype: str,
    m: int,
    n: int,
    k: int,
    warmup: int,
    repeats: int,
) -> MatmulFigure:
    """Time C = A @ B; on a GPU, L2 is flushed (untimed) before every repeat."""
    if min(m, n, k) < 1:
        raise InputError(f"matmul sizes must be positive (got m={m}, n={n}, k={k})")
    work = _gemm(dtype, *_operands(device, dtype, m, n, k))
    flush: Callable[[], object] | None = None
    if device.type == "cuda":
        scratch = torch.empty(L2_FLUSH_BYTES, dtype=torch.uint8, device=device)
        flush = scratch.zero_
    with matmul_precision(dtype):
        timing = time_repeats(work, device, warmup, repeats, before_each=flush)
    return MatmulFigure(dtype, m, n, k, timing)


def matmul_sweep(
    device: torch.device,
    dtype: str,
    shapes: list[tuple[int, int, int]],
    warmup: int,
    repeats: int,
    on_shape: Callable[[MatmulFigure], None] | None = None,
) -> list[MatmulFigure]:
    """mamf-finder's search: every (m, n, k) timed alone; the caller picks the best."""
    reason = unsupported_reason(device, dtype)
    if reason is not None:
        raise InputError(f"--dtype {dtype} cannot run on {device}: {reason}")
    figures = []
    for m, n, k in shapes:
        figures.append(measure_matmul_tflops(device, dtype, m, n, k, warmup, repeats))
        if on_shape is not None:
            on_shape(figures[-1])
    return figures


@dataclass(frozen=True)
class ConsistencyFigure:
    dtype: str
    size: int
    iterations: int
    mismatched_results: int
    mismatched_elements: int
    max_abs_diff: float
    first_bad_iteration: int | None


def gemm_consistency(
    device: torch.device,
    dtype: str,
    size: int,
    iterations: int,
    matmul: Matmul = torch.matmul,
) -> ConsistencyFigure:
    """Repeat one GEMM on identical inputs; every result must equal the first, bit for bit."""
    a, b = _operands(device, dtype, size, size, size, seed=1)
    with matmul_precision(dtype):
        first = matmul(a, b)
        bad_results = bad_elements = 0
        worst = 0.0
        first_bad: int | None = None
        for iteration in range(1, iterations + 1):
            result = matmul(a, b)
            differs = result != first
            count = int(differs.sum())
            if count:
                bad_results += 1
                bad_elements += count
                diff = (result.double() - first.double()).abs().nan_to_num(float("inf"))
                worst = max(worst, float(diff.max()))
                first_bad = iteration if first_bad is None else first_bad
    return ConsistencyFigure(dtype, size, iterations, bad_results, bad_elements, worst, first_bad)


def sustained_matmul_tflops(
    device: torch.device, dtype: str, size: int, seconds: float, windows: int
) -> list[float]:
    """TFLOPS in `windows` consecutive equal time windows of back-to-back GEMMs (clock droop)."""
    a, b = _operands(device, dtype, size, size, size, seed=2)
    flops = 2.0 * size**3
    per_window = seconds / windows
    figures = []
    with matmul_precision(dtype):
        torch.matmul(a, b)
        synchronize(device)
        for _ in range(windows):
            count = 0
            start = time.perf_counter()
            while time.perf_counter() - start < per_window:
                for _ in range(8):
                    torch.matmul(a, b)
                count += 8
                synchronize(device)
            figures.append(flops * count / (time.perf_counter() - start) / 1e12)
    return figures
