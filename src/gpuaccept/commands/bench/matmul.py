"""`gpuaccept bench matmul` as a library call: mamf-finder style shape sweeps."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated

from gpuaccept.commands.bench.common import (
    ITERATIONS,
    WARMUP,
    BenchRequest,
    BenchResult,
    PlannedRuns,
    ProgressBar,
    iterations_for,
    no_progress,
    run_planned,
)
from gpuaccept.commands.options import opt
from gpuaccept.errors import InputError

if TYPE_CHECKING:
    import torch

    from gpuaccept.commands.output import Output


MATMUL_SHAPES = {  # (preset, device type) -> m, n, k values whose every combination is timed
    ("quick", "cuda"): [4096, 8192],
    ("full", "cuda"): [2048, 4096, 6144, 8192, 12288, 16384],
    ("quick", "cpu"): [256, 512],
    ("full", "cpu"): [256, 512, 768, 1024],
}
MAX_SHAPES = 10_000  # mamf-finder's widest sweeps are a few thousand shapes


@dataclass(frozen=True, kw_only=True)
class MatmulRequest(BenchRequest):
    """The sweep: dtypes (none: bf16 on a GPU, fp32 on the CPU) and M, N, K as N, N,M,... or
    START:STOP:STEP (None: the preset's), iterations (None: the device's defaults)."""

    dtypes: Annotated[
        tuple[str, ...],
        opt(
            "--dtype",
            "[fp64|fp32|tf32|bf16|fp16|fp8]",
            "Repeatable; default bf16 on GPU, fp32 on CPU.",
        ),
    ] = ()
    m: Annotated[str | None, opt("--m", "DIMS", "M dimensions: N, N,M,... or START:STOP:STEP.")] = (
        None
    )
    n: Annotated[
        str | None,
        opt("--n", "DIMS", "N dimensions (same forms; not -n, which is the timed iterations)."),
    ] = None
    k: Annotated[str | None, opt("--k", "DIMS", "K dimensions (same forms).")] = None
    preset: Annotated[str, opt("--preset", "[quick|full]", "quick or full shape sweep.")] = (
        "quick"  # quick or full
    )
    warmup: Annotated[int | None, WARMUP] = None
    iterations: Annotated[int | None, ITERATIONS] = None


def default_matmul_dtype(device: torch.device) -> str:
    return "bf16" if device.type == "cuda" else "fp32"


def plan_matmul(runs: PlannedRuns, request: MatmulRequest) -> None:
    """Validate the sweep (preset, each dtype on this device, the shapes and their count) and
    add it to `runs`."""
    from gpuaccept.measure.matmul import unsupported_reason
    from gpuaccept.sweeps.matmul import run_matmul
    from gpuaccept.sweeps.sizes import int_range

    device, preset = runs.device, request.preset
    dtypes = list(request.dtypes) or [default_matmul_dtype(device)]
    if (preset, device.type) not in MATMUL_SHAPES:
        raise InputError(f"--preset must be quick or full (got {preset!r})")
    for dtype in dtypes:
        reason = unsupported_reason(device, dtype)
        if reason is not None:
            raise InputError(f"--dtype {dtype} cannot run on {device}: {reason}")
    default = ",".join(map(str, MATMUL_SHAPES[(preset, device.type)]))
    ms, ns, ks = (
        int_range(value or default, flag)
        for value, flag in ((request.m, "--m"), (request.n, "--n"), (request.k, "--k"))
    )
    count = len(ms) * len(ns) * len(ks)
    if count > MAX_SHAPES:
        raise InputError(
            f"--m, --n and --k make {count:,} shapes; at most {MAX_SHAPES:,} in one run "
            "(use a larger STEP or a list)"
        )
    shapes = [(a, b, c) for a in ms for b in ns for c in ks]
    w, r = iterations_for(device, request.warmup, request.iterations)
    runs.add(
        len(shapes) * len(dtypes),
        f"matmul {','.join(dtypes)}: {len(shapes)} shape(s), {w} warm-up + {r} timed each"
        + (", L2 flushed between iterations" if device.type == "cuda" else ""),
        lambda advance: run_matmul(device, dtypes, shapes, w, r, advance),
    )


def run(request: MatmulRequest, out: Output, progress: ProgressBar = no_progress) -> BenchResult:
    """Maximum achievable matmul TFLOPS over a sweep of shapes."""
    return run_planned("matmul", request, out, progress, lambda runs: plan_matmul(runs, request))
