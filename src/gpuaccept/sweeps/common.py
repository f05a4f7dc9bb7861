"""`gpuaccept bench`: run the full sweeps and state them as CheckResults (table rows in details).

Figures are reported, not judged: a benchmark FAILs only on a wrong result (#wrong, n-body
error) or on a floor the operator set (--min-busbw). Each figure that has a vendor peak in the
shipped table says how close it came to it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from gpuaccept.references import ReferenceTable, load_shipped_references
from gpuaccept.results import CheckResult, Measurement, Status

Progress = Callable[[], None]
Columns = list[tuple[str, str]]  # (row key, column header)


def _no_progress() -> None:
    pass


def device_name(device: torch.device) -> str:
    return torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"


def peak(device: torch.device, key: str, table: ReferenceTable | None = None) -> float | None:
    """The vendor dense peak `key` (e.g. 'bf16_tflops', 'membw_gbps') of this device's model."""
    table = table or load_shipped_references()
    model = table.model_for(device_name(device))
    return table.models[model].peaks.get(key) if model else None


def _percent(value: float | None, ceiling: float | None) -> float | None:
    return None if value is None or not ceiling else 100.0 * value / ceiling


def _result(
    name: str,
    failures: list[str],
    summary: str,
    started: float,
    columns: Columns,
    rows: list[dict[str, Any]],
    measurements: list[Measurement],
    **details: Any,
) -> CheckResult:
    """FAIL with the failures as the message when there are any, else PASS with the summary."""
    return CheckResult(
        name=name,
        area="BENCH",
        status=Status.FAIL if failures else Status.PASS,
        message="; ".join(failures) if failures else summary,
        duration_seconds=time.monotonic() - started,
        measurements=measurements,
        details={"columns": [list(c) for c in columns], "rows": rows, **details},
    )


def run_matmul(
    device: torch.device,
    dtypes: Sequence[str],
    shapes: Sequence[tuple[int, int, int]],
    warmup: int,
    repeats: int,
    progress: Progress = _no_progress,
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
                    "percent_of_peak": _percent(figure.median_tflops, ceiling),
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
        share = _percent(top.median_tflops, ceiling)
        summary.append(
            f"{dtype} {top.median_tflops:.4g} TFLOPS at {top.m}x{top.n}x{top.k}"
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
    return _result(
        "matmul", [], "best: " + "; ".join(summary), started, columns, rows, measurements
    )


def run_membw(
    device: torch.device,
    sizes: Sequence[int],
    warmup: int,
    repeats: int,
    progress: Progress = _no_progress,
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
                    "percent_of_peak": _percent(figure.median_gbps, ceiling),
                }
            )
    measurements = [
        Measurement(name=f"membw_{kernel}_gbps", value=value, unit="GB/s")
        for kernel, value in best.items()
    ]
    share = _percent(best["triad"], ceiling)
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
    return _result("membw", [], message, started, columns, rows, measurements)


def run_transfer(
    device: torch.device,
    sizes: Sequence[int],
    warmup: int,
    repeats: int,
    progress: Progress = _no_progress,
) -> CheckResult:
    from gpuaccept.measure.transfer import DIRECTIONS, measure_peer_matrix, measure_transfer_gbps

    started = time.monotonic()
    rows: list[dict[str, Any]] = []
    best: dict[str, float] = {}
    for size in sizes:
        for direction in DIRECTIONS:
            for pinned in (True, False) if device.type == "cuda" else (False,):
                figure = measure_transfer_gbps(device, direction, size, pinned, warmup, repeats)
                progress()
                label = f"{direction}_{'pinned' if figure.pinned else 'pageable'}"
                best[label] = max(best.get(label, 0.0), figure.median_gbps)
                rows.append(
                    {
                        "path": label,
                        "bytes": size,
                        "median_gbps": figure.median_gbps,
                        "peer_access": None,
                    }
                )
    peers = measure_peer_matrix(max(sizes), warmup, repeats) if device.type == "cuda" else []
    for peer in peers:
        rows.append(
            {
                "path": f"gpu{peer.source}->gpu{peer.target}",
                "bytes": peer.nbytes,
                "median_gbps": peer.median_gbps,
                "peer_access": "P2P on" if peer.peer_access else "P2P off",
            }
        )
    measurements = [
        Measurement(name=f"{label}_gbps", value=value, unit="GB/s") for label, value in best.items()
    ]
    message = ", ".join(f"{label} {value:.1f} GB/s" for label, value in best.items())
    if device.type == "cpu":
        message += " (CPU twin: both ends are host memory)"
    columns = [
        ("path", "path"),
        ("bytes", "bytes"),
        ("median_gbps", "median GB/s"),
        ("peer_access", "peer access"),
    ]
    # pinned host memory only means something with a GPU at the other end
    return _result(
        "transfer",
        [],
        message,
        started,
        columns,
        rows,
        measurements,
        peer_pairs=len(peers),
    )


@dataclass(frozen=True)
class CollectiveRun:
    """What the collectives sweep returned: rank 0's rows per collective and the world size."""

    rows: dict[str, list[Any]]
    world_size: int
    backend: str


def collectives_result(
    run: CollectiveRun, min_busbw_gbps: float | None, started: float
) -> CheckResult:
    from gpuaccept.measure.collectives import average_busbw_gbps

    rows: list[dict[str, Any]] = []
    measurements = []
    failures = []
    for collective, sweep in run.rows.items():
        for row in sweep:
            rows.append(
                {
                    "collective": collective,
                    "size_bytes": row.nbytes,
                    "count": row.count,
                    "oop_time_us": (
                        None if row.out_of_place_seconds is None else row.out_of_place_seconds * 1e6
                    ),
                    "oop_algbw_gbps": row.algbw_gbps(row.out_of_place_seconds),
                    "oop_busbw_gbps": row.busbw_gbps(row.out_of_place_seconds),
                    "oop_wrong": row.out_of_place_wrong,
                    "ip_time_us": row.in_place_seconds * 1e6,
                    "ip_algbw_gbps": row.algbw_gbps(row.in_place_seconds),
                    "ip_busbw_gbps": row.busbw_gbps(row.in_place_seconds),
                    "ip_wrong": row.in_place_wrong,
                }
            )
        wrong = sum((r.out_of_place_wrong or 0) + r.in_place_wrong for r in sweep)
        average = average_busbw_gbps(sweep)
        measurements.append(
            Measurement(name=f"{collective}_avg_busbw_gbps", value=average, unit="GB/s")
        )
        if wrong:
            failures.append(f"{collective}: {wrong} wrong element(s)")
        if min_busbw_gbps is not None and average < min_busbw_gbps:
            failures.append(
                f"{collective}: average busbw {average:.2f} GB/s below --min-busbw "
                f"{min_busbw_gbps:g}"
            )
    summary = ", ".join(
        f"{m.name.removesuffix('_avg_busbw_gbps')} {m.value:.2f}" for m in measurements
    )
    message = f"avg busbw (GB/s) over {run.world_size} {run.backend} rank(s): {summary}"
    columns = [
        ("collective", "collective"),
        ("size_bytes", "size (B)"),
        ("count", "count"),
        ("oop_time_us", "oop time (us)"),
        ("oop_algbw_gbps", "oop algbw"),
        ("oop_busbw_gbps", "oop busbw"),
        ("oop_wrong", "oop #wrong"),
        ("ip_time_us", "ip time (us)"),
        ("ip_algbw_gbps", "ip algbw"),
        ("ip_busbw_gbps", "ip busbw"),
        ("ip_wrong", "ip #wrong"),
    ]
    return _result(
        "collectives",
        failures,
        message,
        started,
        columns,
        rows,
        measurements,
        world_size=run.world_size,
        backend=run.backend,
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
    progress: Progress = _no_progress,
) -> CheckResult:
    from gpuaccept.measure.nbody import measure_nbody, nbody_max_relative_error

    started = time.monotonic()
    rows: list[dict[str, Any]] = []
    measurements = []
    failures = []
    for dtype in dtypes:
        error = nbody_max_relative_error(device, dtype, check_bodies, tile)
        if not error <= NBODY_TOLERANCE[dtype]:
            failures.append(
                f"{dtype}: accelerations off by {error:.3g} (relative) from the float64 "
                f"reference, tolerance {NBODY_TOLERANCE[dtype]:g}"
            )
        # The table's fp64 peaks are tensor-core figures, which n-body's CUDA-core math cannot use.
        ceiling = peak(device, "fp32_tflops") if dtype == "fp32" else None
        best = 0.0
        for count in bodies:
            figure = measure_nbody(device, dtype, count, tile, warmup, repeats)
            progress()
            best = max(best, figure.gflops)
            rows.append(
                {
                    "dtype": dtype,
                    "bodies": count,
                    "interactions_per_second": figure.interactions_per_second,
                    "gflops": figure.gflops,
                    "percent_of_peak": _percent(figure.gflops, ceiling * 1000 if ceiling else None),
                    "max_relative_error": error,
                }
            )
        measurements.append(Measurement(name=f"nbody_{dtype}_gflops", value=best, unit="GFLOP/s"))
    message = ", ".join(f"{m.name} {m.value:.4g}" for m in measurements)
    columns = [
        ("dtype", "dtype"),
        ("bodies", "bodies"),
        ("interactions_per_second", "interactions/s"),
        ("gflops", "GFLOP/s"),
        ("percent_of_peak", "% of peak"),
        ("max_relative_error", "max rel. error"),
    ]
    return _result(
        "nbody",
        failures,
        message,
        started,
        columns,
        rows,
        measurements,
        flops_per_interaction="20 (fp32), 30 (fp64): the cuda-samples convention",
    )
