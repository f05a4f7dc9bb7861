"""Our benchmark harness against bare loops in the same process: does the harness cost anything?

1. matmul: `measure_matmul_tflops` (the harness `gpuaccept bench matmul` uses) against a bare
   `torch.matmul` loop timed with perf_counter, and against numpy's matmul, same shape and dtype.
2. all-reduce: `collective_sweep_rank` busbw against a bare `dist.all_reduce` loop, 2 gloo ranks
   (or NCCL ranks with --device cuda), same size and iteration count.
Rounds alternate which side goes first and each figure is the median of --rounds rounds, so
drift hits both sides.
Target (issue #5): ours within 5% of the bare figures. Prints figures and ratios; asserts nothing.
Run: python benchmarks/bench_vs_bare.py [--size 1024] [--rounds 7] [--device cpu]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from typing import Any

import numpy as np
import torch
import torch.distributed as dist

from gpuaccept.distributed.local_ranks import run_ranks
from gpuaccept.measure.collectives import BUS_FACTORS, SweepSpec, collective_sweep_rank
from gpuaccept.measure.matmul import measure_matmul_tflops
from gpuaccept.measure.timing import synchronize


def bare_torch_tflops(device: torch.device, size: int, repeats: int) -> float:
    a = torch.randn(size, size, device=device)
    b = torch.randn(size, size, device=device)
    torch.matmul(a, b)
    synchronize(device)
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        torch.matmul(a, b)
        synchronize(device)
        samples.append(time.perf_counter() - start)
    return 2 * size**3 / statistics.median(samples) / 1e12


def numpy_tflops(size: int, repeats: int) -> float:
    rng = np.random.default_rng(0)
    a = rng.standard_normal((size, size), dtype=np.float32)
    b = rng.standard_normal((size, size), dtype=np.float32)
    a @ b
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        a @ b
        samples.append(time.perf_counter() - start)
    return 2 * size**3 / statistics.median(samples) / 1e12


def _both_all_reduce(rank: int, world: int, payload: tuple[int, int, int]) -> dict[str, Any]:
    nbytes, iterations, rounds = payload
    device = (
        torch.device("cuda", torch.cuda.current_device())
        if dist.get_backend() == "nccl"
        else torch.device("cpu")
    )
    buffer = torch.zeros(nbytes // 4, device=device)
    ours, bare = [], []

    def run_ours() -> None:
        (row,) = collective_sweep_rank(
            rank, world, SweepSpec("all_reduce", (nbytes,), 5, iterations, check=False)
        )
        ours.append(row.busbw_gbps(row.in_place_seconds))

    def run_bare() -> None:
        for _ in range(5):
            dist.all_reduce(buffer)
        synchronize(device)
        start = time.perf_counter()
        for _ in range(iterations):
            dist.all_reduce(buffer)
        synchronize(device)
        seconds = torch.tensor(
            [(time.perf_counter() - start) / iterations], dtype=torch.float64, device=device
        )
        dist.all_reduce(seconds)
        bare.append(nbytes / (float(seconds) / world) / 1e9 * BUS_FACTORS["all_reduce"](world))

    for number in range(rounds):  # alternate which goes first, so neither owns the warm slot
        first, second = (run_ours, run_bare) if number % 2 == 0 else (run_bare, run_ours)
        first()
        second()
    return {"ours": statistics.median(ours), "bare": statistics.median(bare)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=1024, help="square matmul size")
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--allreduce-bytes", type=int, default=4 * 2**20)
    parser.add_argument("--iterations", type=int, default=20)
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args()
    device = torch.device(args.device)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, device {device}")

    ours, bare, numpy_figures = [], [], []
    for _ in range(args.rounds):
        ours.append(
            measure_matmul_tflops(
                device, "fp32", args.size, args.size, args.size, 2, args.repeats
            ).median_tflops
        )
        bare.append(bare_torch_tflops(device, args.size, args.repeats))
        if device.type == "cpu":
            numpy_figures.append(numpy_tflops(args.size, args.repeats))
    ours_m, bare_m = statistics.median(ours), statistics.median(bare)
    print(f"matmul fp32 {args.size}^3, median of {args.rounds} rounds x {args.repeats} repeats:")
    print(f"  gpuaccept harness   {ours_m:8.4f} TFLOPS")
    print(f"  bare torch.matmul   {bare_m:8.4f} TFLOPS   ours/bare  {ours_m / bare_m:6.3f}")
    if numpy_figures:
        numpy_m = statistics.median(numpy_figures)
        print(f"  numpy matmul        {numpy_m:8.4f} TFLOPS   ours/numpy {ours_m / numpy_m:6.3f}")

    backend = "nccl" if device.type == "cuda" else "gloo"
    world = torch.cuda.device_count() if device.type == "cuda" else 2
    result = run_ranks(
        _both_all_reduce, world, (args.allreduce_bytes, args.iterations, args.rounds), 600, backend
    )[0]
    print(
        f"all_reduce {args.allreduce_bytes} bytes, {world} {backend} ranks, "
        f"{args.iterations} iterations, median of {args.rounds} rounds:"
    )
    print(f"  gpuaccept sweep     {result['ours']:8.3f} GB/s busbw")
    ratio = result["ours"] / result["bare"]
    print(f"  bare all_reduce     {result['bare']:8.3f} GB/s busbw   ours/bare  {ratio:6.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
