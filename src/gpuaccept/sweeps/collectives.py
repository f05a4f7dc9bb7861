"""nccl-tests style tables from collective sweeps: time, algbw, busbw, #wrong per size."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gpuaccept.naming import format_number
from gpuaccept.results import CheckResult, Measurement
from gpuaccept.sweeps.common import (
    bench_result,
)


@dataclass(frozen=True)
class CollectiveRun:
    """What the collectives sweep returned: rank 0's rows per collective and the world size."""

    rows: dict[str, list[Any]]
    world_size: int
    backend: str


# NCCL_TESTS_MIN_BW fails a run whose average busbw is below 0.9 x the floor it names
# (nccl-tests src/common.cu): the floor is a figure to expect, with 10% for noise.
MIN_BUSBW_TOLERANCE = 0.9


# The operator's floors for the collectives beside all-reduce, by collective: the option that
# names each. No floor is published for them: NVIDIA's Cluster Readiness Engine measures both
# and holds them to none by default (its ADR-021; "threshold table by architecture coming
# soon"); its published runs (2 x 8 H100 over EFA: all-reduce 487.87, all-gather 338.57,
# all-to-all 79.11 GB/s busbw at 16 GB; NVIDIA/cluster-readiness-engine 2a4d4aee
# docs/api-reference/validation-results.md) show how far below all-reduce's they sit.
OTHER_FLOOR_OPTIONS = {"all_gather": "--min-allgather-busbw", "all_to_all": "--min-alltoall-busbw"}
FLOOR_OPTIONS = {"all_reduce": "--min-busbw", **OTHER_FLOOR_OPTIONS}


def below_min_busbw(average_gbps: float, min_busbw_gbps: float | None) -> bool:
    return min_busbw_gbps is not None and average_gbps < MIN_BUSBW_TOLERANCE * min_busbw_gbps


def collectives_result(
    run: CollectiveRun, min_busbw_gbps: float | None, started: float
) -> CheckResult:
    from gpuaccept.measure.collectives import BUS_FACTORS, average_busbw_gbps

    rows: list[dict[str, Any]] = []
    measurements = []
    failures = []
    no_busbw: list[str] = []
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
                    "ip_time_us": (
                        None if row.in_place_seconds is None else row.in_place_seconds * 1e6
                    ),
                    "ip_algbw_gbps": row.algbw_gbps(row.in_place_seconds),
                    "ip_busbw_gbps": row.busbw_gbps(row.in_place_seconds),
                    "ip_wrong": row.in_place_wrong,
                }
            )
        wrong = sum((r.out_of_place_wrong or 0) + (r.in_place_wrong or 0) for r in sweep)
        if wrong:
            failures.append(f"{collective}: {wrong} wrong element(s)")
        if BUS_FACTORS[collective](run.world_size) == 0:
            # one rank moves nothing between ranks: nccl-tests prints busbw 0, which is no
            # figure of the node (a history would hold it as one; a fleet median would judge it)
            no_busbw.append(collective)
            continue
        average = average_busbw_gbps(sweep)
        measurements.append(
            Measurement(name=f"{collective}_avg_busbw_gbps", value=average, unit="GB/s")
        )
        if below_min_busbw(average, min_busbw_gbps):
            failures.append(
                f"{collective}: average busbw {average:.2f} GB/s below "
                f"{MIN_BUSBW_TOLERANCE:g} x --min-busbw {min_busbw_gbps:g}"
            )
    summary = ", ".join(
        f"{m.name.removesuffix('_avg_busbw_gbps')} {format_number(m.value)}" for m in measurements
    )
    message = f"avg busbw (GB/s) over {run.world_size} {run.backend} rank(s): {summary}"
    if no_busbw:
        message += (
            f"{'; ' if summary else ''}{', '.join(no_busbw)}: correctness only, no bus bandwidth "
            f"on {run.world_size} rank"
        )
    columns = [
        ("collective", "collective"),
        ("size_bytes", "size (B)"),
        ("count", "count"),
        # nccl-tests' columns, out-of-place then in-place; times in us, bandwidths in GB/s (the
        # header line of the benchmark says so), so the table fits a log's width
        ("oop_time_us", "oop us"),
        ("oop_algbw_gbps", "oop algbw"),
        ("oop_busbw_gbps", "oop busbw"),
        ("oop_wrong", "oop #wrong"),
        ("ip_time_us", "ip us"),
        ("ip_algbw_gbps", "ip algbw"),
        ("ip_busbw_gbps", "ip busbw"),
        ("ip_wrong", "ip #wrong"),
    ]
    return bench_result(
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
