"""STREAM copy, scale, add and triad over a sweep of array sizes."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import torch

from gpuaccept.results import CheckResult, Measurement
from gpuaccept.sweeps.common import (
    Progress,
    bench_result,
    no_progress,
    peak,
    percent_of,
)


def run_membw(
    device: torch.device,
    sizes: Sequence[int],
    warmup: int,
    repeats: int,
    progress: Progress = no_progress,
) -> CheckResult:
    from gpuaccept.measure.membw import STREAM_BYTES_PER_ELEMENT, measure_stream_gbps

    started = time.monotonic()
    ceiling = peak(device, "membw_gbps")
    rows: list[dict[str, Any]] = []
    best: dict[str, float] = {}
    for size in sizes:
        for kernel in STREAM_BYTES_PER_ELEMENT:
            figure = measure_stream_gbps(device, kernel, size, warmup, repeats)
            progress()
            best[kernel] = max(best.get(kernel, 0.0), figure.median_gbps)
            rows.append(
                {
                    "kernel": kernel,
                    "array_bytes": size,
                    "median_gbps": figure.median_gbps,
                    "best_gbps": figure.best_gbps,
                    "percent_of_peak": percent_of(figure.median_gbps, ceiling),
                }
            )
    measurements = [
        Measurement(name=f"membw_{kernel}_gbps", value=value, unit="GB/s")
        for kernel, value in best.items()
    ]
    share = percent_of(best["triad"], ceiling)
    message = f"triad {best['triad']:.1f} GB/s" + (
        f" ({share:.1f}% of {ceiling:g} GB/s peak)" if share is not None else ""
    )
    columns = [
        ("kernel", "kernel"),
        ("array_bytes", "array bytes"),
        ("median_gbps", "median GB/s"),
        ("best_gbps", "best GB/s"),
        ("percent_of_peak", "% of peak"),
    ]
    return bench_result("membw", [], message, started, columns, rows, measurements)
