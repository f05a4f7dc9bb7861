"""`gpuaccept bench matmul`: mamf-finder style shape sweeps."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import typer

from gpuaccept.cli.bench.common import (
    CSV_OUT,
    DEVICE,
    ITERATIONS,
    JSON_OUT,
    WARMUP,
    PlannedRuns,
    iterations_for,
    run_planned,
)
from gpuaccept.cli.recording import HISTORY, NO_HISTORY
from gpuaccept.errors import InputError

if TYPE_CHECKING:
    import torch


MATMUL_SHAPES = {  # (preset, device type) -> m, n, k values whose every combination is timed
    ("quick", "cuda"): [4096, 8192],
    ("full", "cuda"): [2048, 4096, 6144, 8192, 12288, 16384],
    ("quick", "cpu"): [256, 512],
    ("full", "cpu"): [256, 512, 768, 1024],
}


def plan_matmul(
    runs: PlannedRuns,
    dtypes: list[str],
    m: str | None,
    n: str | None,
    k: str | None,
    preset: str,
    warmup: int | None,
    repeats: int | None,
) -> None:
    from gpuaccept.measure.matmul import unsupported_reason
    from gpuaccept.sweeps.matmul import run_matmul
    from gpuaccept.sweeps.sizes import int_range

    device = runs.device
    if (preset, device.type) not in MATMUL_SHAPES:
        raise InputError(f"--preset must be quick or full (got {preset!r})")
    for dtype in dtypes:
        reason = unsupported_reason(device, dtype)
        if reason is not None:
            raise InputError(f"--dtype {dtype} cannot run on {device}: {reason}")
    default = ",".join(map(str, MATMUL_SHAPES[(preset, device.type)]))
    ms, ns, ks = (int_range(v or default, f) for v, f in ((m, "--m"), (n, "--n"), (k, "--k")))
    count = len(ms) * len(ns) * len(ks)
    if count > MAX_SHAPES:
        raise InputError(
            f"--m, --n and --k make {count:,} shapes; at most {MAX_SHAPES:,} in one run "
            "(use a larger STEP or a list)"
        )
    shapes = [(a, b, c) for a in ms for b in ns for c in ks]
    w, r = iterations_for(device, warmup, repeats)
    runs.add(
        len(shapes) * len(dtypes),
        f"matmul {','.join(dtypes)}: {len(shapes)} shape(s), {w} warm-up + {r} timed each"
        + (", L2 flushed between iterations" if device.type == "cuda" else ""),
        lambda advance: run_matmul(device, dtypes, shapes, w, r, advance),
    )


MAX_SHAPES = 10_000  # mamf-finder's widest sweeps are a few thousand shapes


def default_matmul_dtype(device: torch.device) -> str:
    return "bf16" if device.type == "cuda" else "fp32"


def matmul(
    dtype: list[str] = typer.Option(
        [],
        "--dtype",
        metavar="[fp64|fp32|tf32|bf16|fp16|fp8]",
        help="Repeatable; default bf16 on GPU, fp32 on CPU.",
    ),
    m: str | None = typer.Option(
        None, "--m", metavar="DIMS", help="M dimensions: N, N,M,... or START:STOP:STEP."
    ),
    n: str | None = typer.Option(
        None,
        "--n",
        metavar="DIMS",
        help="N dimensions (same forms; not -n, which is the timed iterations).",
    ),
    k: str | None = typer.Option(None, "--k", metavar="DIMS", help="K dimensions (same forms)."),
    preset: str = typer.Option(
        "quick", "--preset", metavar="[quick|full]", help="quick or full shape sweep."
    ),
    warmup: int | None = WARMUP,
    iterations: int | None = ITERATIONS,
    device: str = DEVICE,
    json_path: Path | None = JSON_OUT,
    csv_path: Path | None = CSV_OUT,
    history: str | None = HISTORY,
    no_history: bool = NO_HISTORY,
) -> None:
    """Maximum achievable matmul TFLOPS over a sweep of shapes (mamf-finder style)."""
    run_planned(
        "matmul",
        device,
        json_path,
        csv_path,
        history,
        no_history,
        lambda runs: plan_matmul(
            runs,
            dtype or [default_matmul_dtype(runs.device)],
            m,
            n,
            k,
            preset,
            warmup,
            iterations,
        ),
    )
