"""All-pairs n-body over body counts, checked against float64 (cuda-samples convention)."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import torch

from gpuaccept.naming import format_number, metric_title
from gpuaccept.results import CheckResult, Measurement
from gpuaccept.sweeps.common import (
    Progress,
    bench_result,
    no_progress,
    peak,
    percent_of,
)

# Worst relative error of one step's accelerations against float64 that passes, per dtype.
NBODY_TOLERANCE = {"fp32": 1e-4, "fp64": 1e-10}


def run_nbody(
    device: torch.device,
    dtypes: Sequence[str],
    bodies: Sequence[int],
    tile: int,
    warmup: int,
    repeats: int,
    check_bodies: int = 512,
    progress: Progress = no_progress,
    kernel: str = "torch-tiled",
) -> CheckResult:
    from gpuaccept.measure.nbody import measure_nbody, nbody_max_relative_error

    started = time.monotonic()
    rows: list[dict[str, Any]] = []
    measurements = []
    failures = []
    for dtype in dtypes:
        error = nbody_max_relative_error(device, dtype, check_bodies, tile, kernel)
        if not error <= NBODY_TOLERANCE[dtype]:
            failures.append(
                f"{dtype}: accelerations off by {error:.3g} (relative) from the float64 "
                f"reference, tolerance {NBODY_TOLERANCE[dtype]:g}"
            )
        # The table's fp64 peaks are tensor-core figures, which n-body's CUDA-core math cannot use.
        ceiling = peak(device, "fp32_tflops") if dtype == "fp32" else None
        best = 0.0
        for count in bodies:
            figure = measure_nbody(device, dtype, count, tile, warmup, repeats, kernel)
            progress()
            best = max(best, figure.gflops)
            rows.append(
                {
                    "kernel": kernel,
                    "dtype": dtype,
                    "bodies": count,
                    "interactions_per_second": figure.interactions_per_second,
                    "gflops": figure.gflops,
                    "percent_of_peak": percent_of(
                        figure.gflops, ceiling * 1000 if ceiling else None
                    ),
                    "max_relative_error": error,
                }
            )
        measurements.append(Measurement(name=f"nbody_{dtype}_gflops", value=best, unit="GFLOP/s"))
    message = f"kernel {kernel}: " + ", ".join(
        f"{metric_title(m.name)} {format_number(m.value)} {m.unit}" for m in measurements
    )
    columns = [
        ("kernel", "kernel"),
        ("dtype", "dtype"),
        ("bodies", "bodies"),
        ("interactions_per_second", "interactions/s"),
        ("gflops", "GFLOP/s"),
        ("percent_of_peak", "% of peak"),
        ("max_relative_error", "max rel. error"),
    ]
    return bench_result(
        "nbody",
        failures,
        message,
        started,
        columns,
        rows,
        measurements,
        flops_per_interaction="20 (fp32), 30 (fp64): the cuda-samples convention",
        kernel=kernel,
    )
