"""One burn-in window of one stressor on one device, run in that device's warm worker (issue #23).

Every device of the node runs the same seeded work: the operands are made on the CPU from the
seed and copied to the device, so every GPU starts from the same bits whatever its own random
generator does. The result of the window's first and last iterations must be bit-identical (a
GPU that drifts within a window fails here, alone), and its digest, with one digest per row to
locate a difference, goes back to the suite, which compares the devices (`burnin.judging`).

The majority can be wrong too (every GPU running the same broken library), so each window also
checks its last result against a reference on the CPU: a copy must equal its source bit for bit,
an all-reduce of integer-valued floats must equal the exact sum, and a GEMM's sampled rows must
lie within the rounding-error bound of the float64 product (`gemm_error_bound`).

The GEMMs run with TF32 and reduced-precision bf16 reductions off, so `gemm-fp32` is fp32 and
every sum is accumulated in fp32: the bound holds and the bits are deterministic for a given GPU
model and library (cuBLAS picks its algorithm per model and shape; the digests of GPUs of
different models are not comparable, and the suite compares like with like).

While the window runs, the GPU's power, temperature, SM clock and clock-event reasons are sampled
(`probe.load_sampler`) and summarised; `checks.load_judging` judges the samples as it does in
`accept`.
"""

from __future__ import annotations

import contextlib
import hashlib
import math
import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

import numpy as np

from gpuaccept.burnin.judging import first_difference, result_digest

if TYPE_CHECKING:
    import torch

    from gpuaccept.probe.load_sampler import LoadTrace

# Operand sizes: large enough to keep a GPU at its power limit, small enough for a CPU twin.
GEMM_SIZE = {"cuda": 8192, "cpu": 256}
BUFFER_BYTES = {"cuda": 1024**3, "cpu": 16 * 1024**2}
ALL_REDUCE_BYTES = {"cuda": 256 * 1024**2, "cpu": 4 * 1024**2}
# Iterations launched between two synchronisations: bounds how far a window overruns.
_BATCH = {"cuda": 20, "cpu": 1}
# Rows of a GEMM's result checked against float64 each window (spread over the matrix).
REFERENCE_ROWS = 4
# The power expectation for the GEMM stressors: at 90% of the limit or above.
POWER_HOLD_FRACTION = 0.9
# Unit roundoff (half the spacing of 1.0) of the formats in play: fp32 accumulation, bf16 output.
_UNIT_ROUNDOFF = {"float32": 2.0**-24, "bfloat16": 2.0**-8}
_SMALLEST_NORMAL_FP32 = 2.0**-126


@dataclass(frozen=True)
class Fault:
    """A fault injected into one device's window, for the CPU twin's tests: wrong bits in every
    result, a device slower by a share, or a worker that dies (a GPU lost)."""

    flip_bit: bool = False
    slow_percent: float = 0.0
    die: bool = False


@dataclass(frozen=True)
class ReferenceCheck:
    """The window's last result against its reference on the CPU."""

    rule: str  # what the result was held to
    checked: int  # elements compared
    worst_ratio: float  # the largest |error| / bound (0 for exact references); <= 1 within
    outside: str | None = None  # the first element outside the bound, in words

    @property
    def ok(self) -> bool:
        return self.outside is None


@dataclass(frozen=True)
class WindowWork:
    """What one device did in one window."""

    stressor: str
    iterations: int
    seconds: float  # wall time the window held the device
    device_seconds: float  # the time its rate is measured on (`device_clock`)
    throughput: float
    unit: str
    digest: str  # of the last iteration's result
    row_digests: list[str]  # one per row of that result: where two devices first differ
    repeats_agree: bool  # the first and last iterations gave the same bits
    reference: ReferenceCheck | None = None
    # the samples' summary (`load_judging.summarise_trace`; GPU only), judged with the window
    load: dict[str, Any] = field(default_factory=dict)
    clock_events: dict[str, int] = field(default_factory=dict)  # reason -> loaded samples


def clock_event_counts(trace: LoadTrace) -> dict[str, int]:
    """How many samples under load carried each clock-event reason (the window's record of
    throttling, judged or not)."""
    from gpuaccept.checks.load_judging import RAMP_SECONDS

    counts: dict[str, int] = {}
    for sample in trace.samples:
        if sample.seconds >= RAMP_SECONDS:
            for reason in sample.reasons:
                counts[reason] = counts.get(reason, 0) + 1
    return counts


def _device(device_index: int | None) -> torch.device:
    """The device of a window; on the CPU twin, one thread per worker: its workers stand in for
    GPUs side by side, and several multi-threaded workers on the same cores would spin against
    each other and measure the contention, not the work."""
    import torch

    if device_index is None:
        torch.set_num_threads(1)
        return torch.device("cpu")
    return torch.device("cuda", device_index)


def _seeded(shape: tuple[int, ...], seed: int, dtype: torch.dtype) -> Any:
    """Operands from the seed, made on the CPU (the same bits for every device)."""
    import torch

    generator = torch.Generator().manual_seed(seed)
    return torch.randn(shape, generator=generator, dtype=torch.float32).to(dtype)


def _bits(tensor: Any) -> np.ndarray:
    """The tensor's bits as a host array (bf16 has no numpy dtype: its bits as uint16)."""
    import torch

    host = tensor.detach().to("cpu")
    if host.dtype == torch.bfloat16:
        return np.asarray(host.view(torch.int16).numpy()).view(np.uint16).copy()
    return np.asarray(host.numpy()).copy()


def _values(bits: np.ndarray) -> np.ndarray:
    """Result bits as float64 values (bf16 bits are the top half of an fp32)."""
    if bits.dtype == np.uint16:
        return (bits.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
    return bits.astype(np.float64)


def _flip_one_bit(bits: np.ndarray, row: int) -> np.ndarray:
    """The injected fault: the top mantissa bit of one element of `row` (element 5 of a 1-D
    result), as a flaky ALU would do."""
    flipped = bits.copy()
    raw = flipped.reshape(-1).view(np.dtype(f"u{bits.dtype.itemsize}"))
    position = row * flipped.shape[-1] + 5 if flipped.ndim > 1 else 5
    raw[position] ^= 1 << (6 if bits.dtype.itemsize == 2 else 22)
    return flipped


def reference_rows(n: int, seed: int) -> list[int]:
    """The rows of an n x n GEMM result checked against float64 in a window (seeded, spread)."""
    return sorted({(seed * 7919 + i * (n // REFERENCE_ROWS)) % n for i in range(REFERENCE_ROWS)})


def _row_digests(bits: np.ndarray) -> list[str]:
    rows = bits.reshape(bits.shape[0], -1) if bits.ndim > 1 else bits.reshape(1, -1)
    return [hashlib.blake2b(row.tobytes(), digest_size=8).hexdigest() for row in rows]


def gemm_error_bound(magnitude: np.ndarray, exact: np.ndarray, k: int, output: str) -> np.ndarray:
    """The elementwise bound on |computed - exact| for C = A @ B with K = `k`, given the float64
    |A||B| (`magnitude`) and A @ B (`exact`).

    Higham, Accuracy and Stability of Numerical Algorithms (2nd ed.), eq. (3.13), as quoted at
    scicomp.stackexchange.com/q/33442 and as Theorem 6.3.5.1 of van de Geijn & Myers, Advanced
    Linear Algebra: Foundations to Frontiers: |C - C_hat| <= gamma_K |A||B| with
    gamma_K = K u / (1 - K u), for any order of the sums, u the accumulator's unit roundoff
    (fp32 here). Rounding the sum to a bf16 output adds u_out (|C| + gamma_K |A||B|).
    K x 2^-126 covers products flushed to zero.
    """
    u = _UNIT_ROUNDOFF["float32"]
    gamma = k * u / (1 - k * u)
    u_out = _UNIT_ROUNDOFF["bfloat16"] if output == "bfloat16" else 0.0
    accumulated = gamma * magnitude
    bound: np.ndarray = accumulated + u_out * (np.abs(exact) + accumulated)
    return bound + k * _SMALLEST_NORMAL_FP32


def check_gemm(a: Any, b: Any, result_bits: np.ndarray, seed: int) -> ReferenceCheck:
    """Rows of the GEMM's result against the float64 product of the same operands (summed over
    blocks of K, so a GPU-sized B is never held in float64 whole)."""
    import torch

    n, k = a.shape
    rows = reference_rows(n, seed)
    a64 = a[rows].to(torch.float64).numpy()
    exact = np.zeros((len(rows), b.shape[1]))
    magnitude = np.zeros_like(exact)
    for start in range(0, k, 1024):
        block = b[start : start + 1024].to(torch.float64).numpy()
        exact += a64[:, start : start + 1024] @ block
        magnitude += np.abs(a64[:, start : start + 1024]) @ np.abs(block)
    output = "bfloat16" if a.dtype == torch.bfloat16 else "float32"
    bound = gemm_error_bound(magnitude, exact, k, output)
    got = _values(result_bits[rows])
    ratio = np.abs(got - exact) / bound
    outside = None
    bad = np.flatnonzero(~(ratio <= 1.0))  # NaN counts as outside
    worst = math.inf if bad.size and not np.isfinite(ratio).all() else float(np.nanmax(ratio))
    if bad.size:
        r, c = divmod(int(bad[0]), ratio.shape[1])
        outside = (
            f"element ({rows[r]}, {c}) is {got[r, c]:.9g}, the float64 product "
            f"{exact[r, c]:.9g}: off by {abs(got[r, c] - exact[r, c]):.3g}, over the "
            f"rounding-error bound {bound[r, c]:.3g}"
        )
    rule = f"within gamma_K|A||B| of float64 (Higham 3.13), {len(rows)} rows"
    return ReferenceCheck(rule, int(ratio.size), worst, outside)


def check_exact(result_bits: np.ndarray, expected_bits: np.ndarray, what: str) -> ReferenceCheck:
    """A result that must equal its reference bit for bit (a copy, an exact sum)."""
    difference = first_difference(result_bits, expected_bits)
    outside = None
    if difference is not None:
        outside = (
            f"element {difference.index if len(difference.index) > 1 else difference.index[0]} "
            f"is {difference.value:.9g}, {what} {difference.expected:.9g}"
        )
    return ReferenceCheck(f"bit for bit equal to {what}", int(result_bits.size), 0.0, outside)


def _held_power(trace: LoadTrace) -> dict[str, Any]:
    """The share of the loaded samples at 90% of the power limit or above (the issue's GEMM
    expectation on a GPU), beside the summary `judge_load` makes."""
    from gpuaccept.checks.load_judging import RAMP_SECONDS

    loaded = [s for s in trace.samples if s.seconds >= RAMP_SECONDS]
    rated = [
        (s.power_w, s.power_limit_w) for s in loaded if s.power_w is not None and s.power_limit_w
    ]
    if not rated:
        return {}
    held = sum(1 for power, limit in rated if power >= POWER_HOLD_FRACTION * limit)
    return {"power_held_share": held / len(rated)}


def run_window(
    stressor: str,
    seconds: float,
    seed: int,
    device_index: int | None,
    gpu_uuid: str | None = None,
    fault: Fault | None = None,
) -> WindowWork:
    """Run `stressor` for about `seconds` on the device (None: the CPU twin), sampled."""
    import torch

    from gpuaccept.probe.load_sampler import sampler_for

    fault = fault or Fault()
    if fault.die:
        os._exit(70)  # the injected lost GPU: the worker is gone without a word
    device = _device(device_index)
    kind = device.type
    if stressor in ("gemm-bf16", "gemm-fp32"):
        dtype = torch.bfloat16 if stressor == "gemm-bf16" else torch.float32
        n = GEMM_SIZE[kind]
        a_host, b_host = _seeded((n, n), seed, dtype), _seeded((n, n), seed + 1, dtype)
        a, b = a_host.to(device), b_host.to(device)

        def step() -> Any:
            return a @ b

        def reference(bits: np.ndarray) -> ReferenceCheck:
            return check_gemm(a_host, b_host, bits, seed)

        work_per_step, unit = 2 * n**3 / 1e12, "TFLOPS"
        flip_row = reference_rows(n, seed)[0]
    elif stressor in ("hbm", "host-transfer"):
        count = BUFFER_BYTES[kind] // 4
        source_host = _seeded((count,), seed, torch.float32)
        source = source_host.to(device)
        if stressor == "host-transfer" and kind == "cuda":
            # One pinned source, one device buffer, one pinned destination for the window:
            # `.to(..., non_blocking=True)` allocated a new buffer each iteration, and a batch
            # of them queued before a synchronisation held about 20 x BUFFER_BYTES of pinned
            # host memory per GPU (issue #30 §8). The bits are copied out after a
            # synchronisation (`_bits`), so reusing the destination loses none.
            pinned = source_host.pin_memory()
            on_device = torch.empty_like(source)
            landed = torch.empty_like(pinned).pin_memory()

            def step() -> Any:  # to the device and back: both directions of the link
                on_device.copy_(pinned, non_blocking=True)
                return landed.copy_(on_device, non_blocking=True)

        else:
            target = torch.empty_like(source)

            def step() -> Any:
                return target.copy_(source)

        expected = _bits(source_host)

        def reference(bits: np.ndarray) -> ReferenceCheck:
            return check_exact(bits, expected, "its source")

        work_per_step, unit = 2 * count * 4 / 1e9, "GB/s"
        flip_row = 0
    else:
        raise ValueError(f"{stressor!r} does not run per device (all-reduce runs as ranks)")
    gemm = stressor.startswith("gemm")
    with _reduced_precision_off(), sampler_for(device_index, gpu_uuid) as sampler:
        looped = _hold(step, seconds, kind, device, fault)
    first, last = (_flip_one_bit(b, flip_row) if fault.flip_bit else b for b in looped.bits)
    return _window_work(
        stressor,
        replace(looped, bits=(first, last)),
        work_per_step,
        unit,
        reference(last),
        sampler.trace,
        gemm=gemm,
    )


def _window_work(
    stressor: str,
    looped: _Looped,
    work_per_step: float,
    unit: str,
    reference: ReferenceCheck,
    trace: LoadTrace,
    *,
    gemm: bool,
) -> WindowWork:
    """What a device did in its window, from its loop and its load samples (summarised as
    `accept` summarises them, with the power hold for a GEMM; judged with the window)."""
    from gpuaccept.checks.load_judging import summarise_trace

    first, last = looped.bits
    load = summarise_trace(trace)
    if gemm:
        load.update(_held_power(trace))
    # an all-reduce's flat buffer is located by 64 slices of it, a matrix by its rows
    rows = last.reshape(64, -1) if stressor == "all-reduce" and last.size % 64 == 0 else last
    return WindowWork(
        stressor=stressor,
        iterations=looped.iterations,
        seconds=looped.seconds,
        device_seconds=looped.device_seconds,
        throughput=work_per_step * looped.iterations / looped.device_seconds,
        unit=unit,
        digest=result_digest(last),
        row_digests=_row_digests(rows),
        repeats_agree=result_digest(first) == result_digest(last),
        reference=reference,
        load=load,
        clock_events=clock_event_counts(trace),
    )


@dataclass(frozen=True)
class _Looped:
    iterations: int
    seconds: float  # wall time
    device_seconds: (
        float  # the device's time: wall time on a GPU, the worker's CPU time on the twin
    )
    bits: tuple[np.ndarray, np.ndarray]  # the first and the last iteration's results


def device_clock(kind: str) -> Callable[[], float]:
    """The clock a device's rate is measured on. A GPU has its silicon to itself: wall time. The
    CPU twin's workers share the machine's cores (three workers on two cores here), and wall
    time would measure the share the scheduler gave each (±20% between windows on the 2-core
    development machine): they are timed on their own CPU time instead, as a GPU is on its own."""
    return time.perf_counter if kind == "cuda" else time.process_time


def _slow_down(clock: Callable[[], float], took: float, percent: float) -> None:
    """The injected slowdown: busy on the device's clock, so its rate drops by `percent`."""
    until = clock() + took * percent / (100 - percent)
    while clock() < until:
        pass


def _hold(step: Callable[[], Any], seconds: float, kind: str, device: Any, fault: Fault) -> _Looped:
    """Run `step` until `seconds` of wall time have passed (in batches between
    synchronisations)."""
    import torch

    first_result = step()
    if kind == "cuda":  # a non-blocking copy back to the host is only read once it landed
        torch.cuda.synchronize(device)
    first = _bits(first_result)
    clock = device_clock(kind)
    iterations = 0
    started, device_started = time.perf_counter(), clock()
    while True:
        batch_started = clock()
        for _ in range(_BATCH[kind]):
            result = step()
            iterations += 1
        if kind == "cuda":
            torch.cuda.synchronize(device)
        if fault.slow_percent:
            _slow_down(clock, clock() - batch_started, fault.slow_percent)
        if time.perf_counter() - started >= seconds:
            break
    wall = time.perf_counter() - started
    return _Looped(iterations, wall, clock() - device_started, (first, _bits(result)))


@contextlib.contextmanager
def _reduced_precision_off() -> Iterator[None]:
    """TF32 and bf16 reduced-precision reductions off for the window (fp32 GEMMs stay fp32 and
    every sum is accumulated in fp32, as the error bound assumes), restored after."""
    import torch

    matmul = torch.backends.cuda.matmul
    kept = (matmul.allow_tf32, matmul.allow_bf16_reduced_precision_reduction)
    matmul.allow_tf32 = False
    matmul.allow_bf16_reduced_precision_reduction = False
    try:
        yield
    finally:
        matmul.allow_tf32, matmul.allow_bf16_reduced_precision_reduction = kept


def _all_reduce_operand(count: int, seed: int, rank: int) -> Any:
    """Integer-valued floats in [-64, 64]: their sum over any number of ranks, in any order, is
    exact in fp32, so every rank's result must equal the exact sum bit for bit."""
    import torch

    generator = torch.Generator().manual_seed(seed * 1009 + rank)
    return torch.randint(-64, 65, (count,), generator=generator).to(torch.float32)


def run_all_reduce_window(
    rank: int,
    world: int,
    seconds: float,
    seed: int,
    device_index: int | None,
    gpu_uuid: str | None = None,
    fault: Fault | None = None,
) -> WindowWork:
    """One rank of the all-reduce stressor (in a process group the worker set up): all-reduce a
    seeded buffer until rank 0 says the window is over; bus bandwidth as nccl-tests counts it,
    2 (n - 1) / n x bytes / time."""
    import torch
    import torch.distributed as dist

    from gpuaccept.probe.load_sampler import sampler_for

    fault = fault or Fault()
    if fault.die:
        os._exit(70)
    device = _device(device_index)
    kind = device.type
    count = ALL_REDUCE_BYTES[kind] // 4
    # A collective runs at its slowest rank's pace: every rank is timed on the wall clock, the
    # CPU twin's too (a rank that waits for its peers spends no CPU time waiting).
    clock = time.perf_counter
    operand = _all_reduce_operand(count, seed, rank).to(device)
    expected = sum(_all_reduce_operand(count, seed, r) for r in range(world))
    buffer = torch.empty_like(operand)
    done = torch.zeros(1, device=device)
    iterations = 0
    with sampler_for(device_index, gpu_uuid) as sampler:
        buffer.copy_(operand)
        dist.all_reduce(buffer)
        first = _bits(buffer)
        started, device_started = time.perf_counter(), clock()
        while True:
            batch_started = clock()
            for _ in range(_BATCH[kind]):
                buffer.copy_(operand)
                dist.all_reduce(buffer)
                iterations += 1
            if kind == "cuda":
                torch.cuda.synchronize(device)
            if fault.slow_percent:
                _slow_down(clock, clock() - batch_started, fault.slow_percent)
            over = rank == 0 and time.perf_counter() - started >= seconds
            done.fill_(1.0 if over else 0.0)
            dist.all_reduce(done)  # every rank stops after the same iteration
            if done.item() > 0:
                break
        elapsed = clock() - device_started
        wall = time.perf_counter() - started
        last = _bits(buffer)
    if fault.flip_bit:
        first, last = _flip_one_bit(first, 0), _flip_one_bit(last, 0)
    return _window_work(
        "all-reduce",
        _Looped(iterations, wall, elapsed, (first, last)),
        2 * (world - 1) / world * count * 4 / 1e9,  # bus bytes per iteration, in GB
        "GB/s",
        check_exact(last, _bits(expected), "the exact sum"),
        sampler.trace,
        gemm=False,
    )
