"""One burn-in window of one stressor on one device, run in that device's warm worker (issue #23).

Every device of the node runs the same seeded work: the operands are made on the CPU from the
seed and copied to the device, so every GPU starts from the same bits whatever its own random
generator does. The result of the window's first and last iterations must be bit-identical (a
GPU that drifts within a window fails here, alone), and its digest, with one digest per row to
locate a difference, goes back to the suite, which compares the devices (`burnin.judging`).

The GEMMs run with TF32 off, so `gemm-fp32` is fp32 and deterministic for a given GPU model and
library (cuBLAS picks its algorithm per model and shape; the digests of GPUs of different
models are not comparable, and the suite compares like with like).
"""

from __future__ import annotations

import contextlib
import hashlib
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from gpuaccept.burnin.judging import result_digest

if TYPE_CHECKING:
    import torch

# Operand sizes: large enough to keep a GPU at its power limit, small enough for a CPU twin.
GEMM_SIZE = {"cuda": 8192, "cpu": 256}
BUFFER_BYTES = {"cuda": 1024**3, "cpu": 16 * 1024**2}
# Iterations launched between two synchronisations: bounds how far a window overruns.
_BATCH = {"cuda": 20, "cpu": 1}


@dataclass(frozen=True)
class WindowWork:
    """What one device did in one window."""

    stressor: str
    iterations: int
    seconds: float
    throughput: float
    unit: str
    digest: str  # of the last iteration's result
    row_digests: list[str]  # one per row of that result: where two devices first differ
    repeats_agree: bool  # the first and last iterations gave the same bits


def _device(device_index: int | None) -> torch.device:
    import torch

    return torch.device("cpu") if device_index is None else torch.device("cuda", device_index)


def _seeded(shape: tuple[int, ...], seed: int, dtype: torch.dtype, device: torch.device) -> Any:
    import torch

    generator = torch.Generator().manual_seed(seed)
    return torch.randn(shape, generator=generator, dtype=torch.float32).to(dtype).to(device)


def _bits(tensor: Any) -> np.ndarray:
    """The tensor's bits as a host array (bf16 has no numpy dtype: its bits as uint16)."""
    import torch

    host = tensor.detach().to("cpu")
    if host.dtype == torch.bfloat16:
        return np.asarray(host.view(torch.int16).numpy()).view(np.uint16)
    return np.asarray(host.numpy())


def _row_digests(bits: np.ndarray) -> list[str]:
    rows = bits.reshape(bits.shape[0], -1) if bits.ndim > 1 else bits.reshape(1, -1)
    return [hashlib.blake2b(row.tobytes(), digest_size=8).hexdigest() for row in rows]


def run_window(stressor: str, seconds: float, seed: int, device_index: int | None) -> WindowWork:
    """Run `stressor` for about `seconds` on the device (None: the CPU twin)."""
    import torch

    device = _device(device_index)
    kind = device.type
    if stressor in ("gemm-bf16", "gemm-fp32"):
        dtype = torch.bfloat16 if stressor == "gemm-bf16" else torch.float32
        n = GEMM_SIZE[kind]
        a = _seeded((n, n), seed, dtype, device)
        b = _seeded((n, n), seed + 1, dtype, device)

        def step() -> Any:
            return a @ b

        work_per_step, unit = 2 * n**3 / 1e12, "TFLOPS"
    elif stressor in ("hbm", "host-transfer"):
        count = BUFFER_BYTES[kind] // 4
        source = _seeded((count,), seed, torch.float32, device)
        if stressor == "host-transfer" and kind == "cuda":
            host = source.to("cpu").pin_memory()

            def step() -> Any:  # to the device and back: both directions of the link
                return host.to(device, non_blocking=True).to("cpu", non_blocking=True)

        else:
            target = torch.empty_like(source)

            def step() -> Any:
                return target.copy_(source)

        work_per_step, unit = 2 * count * 4 / 1e9, "GB/s"
    else:
        raise ValueError(f"{stressor!r} does not run per device (all-reduce runs as ranks)")
    with _tf32_off():
        first_result = step()
        if kind == "cuda":  # a non-blocking copy back to the host is only read once it landed
            torch.cuda.synchronize(device)
        first = _bits(first_result)
        iterations = 0
        started = time.perf_counter()
        while True:
            for _ in range(_BATCH[kind]):
                result = step()
                iterations += 1
            if kind == "cuda":
                torch.cuda.synchronize(device)
            elapsed = time.perf_counter() - started
            if elapsed >= seconds:
                break
        last = _bits(result)
    return WindowWork(
        stressor=stressor,
        iterations=iterations,
        seconds=elapsed,
        throughput=work_per_step * iterations / elapsed,
        unit=unit,
        digest=result_digest(last),
        row_digests=_row_digests(last),
        repeats_agree=result_digest(first) == result_digest(last),
    )


@contextlib.contextmanager
def _tf32_off() -> Iterator[None]:
    """TF32 off for the window (fp32 GEMMs stay fp32), restored after."""
    import torch

    kept = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = False
    try:
        yield
    finally:
        torch.backends.cuda.matmul.allow_tf32 = kept
