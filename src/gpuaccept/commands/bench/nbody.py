"""`gpuaccept bench nbody` as a library call: all-pairs n-body in the cuda-samples convention,
and --explain: what the fused kernel compiles to, with no GPU needed."""

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
    from gpuaccept.commands.output import Output

# The fused kernel does 2^36 interactions (262,144 bodies) in well under a second on a current
# GPU; the tiled torch kernel is memory-bound there (0.3 TFLOP/s on an H100), so it gets less.
NBODY_BODIES = {  # (device type, kernel) -> default body counts
    ("cuda", "triton-fused"): "65536,262144",
    ("cuda", "torch-tiled"): "16384,65536",
    ("cpu", "torch-tiled"): "1024,2048",
    ("cpu", "triton-fused"): "256",  # Triton's interpreter: numpy, slow
}
NBODY_TILE_ELEMENTS = 2**24  # tile x bodies pairs held at once: bounded memory for any N


_EXPLAIN = (
    "Compile the fused kernel for sm_80, sm_90 and sm_100 (no GPU needed) and print registers, "
    "spills, the inner loop's instruction mix and the fp32 ceiling it allows; runs nothing."
)


@dataclass(frozen=True, kw_only=True)
class NbodyRequest(BenchRequest):
    """dtypes (none: fp32), body counts as N, N,M,... or START:STOP:STEP (None: the kernel's
    default on this device), the torch kernel's tile (None: bounded memory), the kernel (auto,
    triton or torch), iterations (None: the device's, at most 2 and 10); `explain`: compile and
    describe the fused kernel instead of running anything."""

    dtypes: Annotated[
        tuple[str, ...], opt("--dtype", "[fp32|fp64]", "fp32 or fp64 (repeatable; default fp32).")
    ] = ()
    bodies: Annotated[
        str | None, opt("--bodies", "COUNTS", "Body counts: N, N,M,... or START:STOP:STEP.")
    ] = None
    tile: Annotated[
        int | None,
        opt("--tile", text="Bodies per tile of the torch kernel (default: bounded memory)."),
    ] = None
    kernel: Annotated[
        str,
        opt(
            "--kernel",
            "[auto|triton|torch]",
            "auto: the fused Triton kernel on a GPU, tiled torch on the CPU.",
        ),
    ] = "auto"
    warmup: Annotated[int | None, WARMUP] = None
    iterations: Annotated[int | None, ITERATIONS] = None
    explain: Annotated[bool, opt("--explain", text=_EXPLAIN)] = False


def plan_nbody(runs: PlannedRuns, request: NbodyRequest, out: Output) -> None:
    """Validate the sweep (dtypes, kernel, bodies, tile) and add it to `runs`; a kernel that
    cannot run here and falls back is said on `out.error`."""
    from gpuaccept.measure.nbody import NBODY_DTYPES, choose_kernel, usable_kernel
    from gpuaccept.sweeps.nbody import run_nbody
    from gpuaccept.sweeps.sizes import int_range

    dtypes = list(request.dtypes) or ["fp32"]
    for dtype in dtypes:
        if dtype not in NBODY_DTYPES:
            raise InputError(f"--dtype must be fp32 or fp64 for nbody (got {dtype!r})")
    kernel = request.kernel
    chosen_kernel, fell_back = usable_kernel(
        choose_kernel(runs.device, kernel), kernel, runs.device
    )
    if fell_back is not None:
        out.error(f"[NBODY] {fell_back}")
    counts = int_range(request.bodies or NBODY_BODIES[runs.device.type, chosen_kernel], "--bodies")
    if min(counts) < 2:
        raise InputError("--bodies: n-body needs at least 2 bodies")
    tile = request.tile
    if tile is not None and tile < 1:
        raise InputError(f"--tile must be positive (got {tile})")
    chosen_tile = tile or max(1, NBODY_TILE_ELEMENTS // max(counts))
    warmup, repeats = iterations_for(runs.device, request.warmup, request.iterations)
    warmup, repeats = min(warmup, 2), min(repeats, 10)  # one step is already N^2 work
    runs.add(
        len(counts) * len(dtypes),
        f"nbody {','.join(dtypes)}: {', '.join(f'{n:,}' for n in counts)} bodies, "
        f"kernel {chosen_kernel}"
        + (f", tile {chosen_tile}" if chosen_kernel == "torch-tiled" else ""),
        lambda advance: run_nbody(
            runs.device,
            dtypes,
            counts,
            chosen_tile,
            warmup,
            repeats,
            progress=advance,
            kernel=chosen_kernel,
        ),
    )


def run(request: NbodyRequest, out: Output, progress: ProgressBar = no_progress) -> BenchResult:
    """interactions/s and GFLOP/s (20 flops fp32, 30 fp64 per interaction); with `explain`,
    the fused kernel's compiled form and nothing run."""
    if request.explain:
        explain(out)
        return BenchResult(0, None)
    return run_planned("nbody", request, out, progress, lambda runs: plan_nbody(runs, request, out))


def explain(out: Output) -> None:
    """The fused kernel compiled for sm_80, sm_90 and sm_100: registers, spills, the inner
    loop's instruction mix and the fp32 ceiling it allows."""
    from gpuaccept.errors import EnvironmentProblem
    from gpuaccept.measure.nbody_compiled import compile_all
    from gpuaccept.measure.nbody_triton import triton_available

    if not triton_available():
        raise EnvironmentProblem("--explain compiles with Triton, which is not installed here")
    header = ["target", "dtype", "tile", "warps", "regs", "spill B", "instr/int", "fp32/int"]
    rows = []
    for c in compile_all():
        ceiling = c.ceiling_fraction
        rows.append(
            [
                f"sm_{c.arch}",
                c.precision,
                f"{c.block_i}x{c.block_j}",
                str(c.warps),
                str(c.registers),
                str(c.spill_bytes),
                f"{c.issue_per_interaction:.1f}",
                f"{c.fp32_per_interaction:.1f}",
                "n/a" if ceiling is None else f"{ceiling:.0%}",
            ]
        )
    header.append("fp32 ceiling")
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]
    for row in [header, *rows]:
        out.line("  ".join(cell.rjust(width) for cell, width in zip(row, widths, strict=True)))
    out.line(
        "[NBODY] ceiling: issue-, FP32- and MUFU-bound upper limit of the inner loop against "
        "fp32 peak (20 flops per interaction); see gpuaccept/measure/nbody_compiled.py"
    )
