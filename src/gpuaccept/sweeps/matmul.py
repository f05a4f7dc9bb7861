"""mamf-finder style matmul sweep: every shape timed alone; the best per dtype."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import torch

from gpuaccept.naming import format_number
from gpuaccept.results import CheckResult, Measurement
from gpuaccept.sweeps.common import (
    Progress,
    bench_result,
    device_name,
    no_progress,
    peak,
    percent_of,
)


def run_matmul(
    device: torch.device,
    dtypes: Sequence[str],
    shapes: Sequence[tuple[int, int, int]],
    warmup: int,
    repeats: int,
    progress: Progress = no_progress,
) -> CheckResult:
    from gpuaccept.measure.matmul import matmul_sweep

    started = time.monotonic()
    rows: list[dict[str, Any]] = []
    measurements: list[Measurement] = []
    summary = []
    name = device_name(device)
    for dtype in dtypes:
        ceiling = peak(device, f"{dtype}_tflops")
        figures = matmul_sweep(
            device, dtype, list(shapes), warmup, repeats, on_shape=lambda _: progress()
        )
        for figure in figures:
            rows.append(
                {
                    "dtype": dtype,
                    "m": figure.m,
                    "n": figure.n,
                    "k": figure.k,
                    "median_tflops": figure.median_tflops,
                    "best_tflops": figure.best_tflops,
                    "percent_of_peak": percent_of(figure.median_tflops, ceiling),
                }
            )
        top = max(figures, key=lambda f: f.median_tflops)
        measurements.append(
            Measurement(
                name=f"matmul_{dtype}_tflops",
                value=top.median_tflops,
                unit="TFLOPS",
                device_name=name,
                device_index=device.index,
            )
        )
        share = percent_of(top.median_tflops, ceiling)
        summary.append(
            f"{dtype} {format_number(top.median_tflops)} TFLOPS at {top.m}x{top.n}x{top.k}"
            + (f" ({share:.1f}% of {ceiling:g} peak)" if share is not None else "")
        )
    columns = [
        ("dtype", "dtype"),
        ("m", "m"),
        ("n", "n"),
        ("k", "k"),
        ("median_tflops", "median TFLOPS"),
        ("best_tflops", "best TFLOPS"),
        ("percent_of_peak", "% of peak"),
    ]
    return bench_result(
        "matmul",
        [],
        # the shape with the highest median: the same figure as the table's median column
        "highest median: " + "; ".join(summary),
        started,
        columns,
        rows,
        measurements,
    )
