"""`gpuaccept bench nbody`: all-pairs n-body in the cuda-samples convention."""

from __future__ import annotations

from pathlib import Path

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

# The fused kernel does 2^36 interactions (262,144 bodies) in well under a second on a current
# GPU; the tiled torch kernel is memory-bound there (0.3 TFLOP/s on an H100), so it gets less.
NBODY_BODIES = {  # (device type, kernel) -> default body counts
    ("cuda", "triton-fused"): "65536,262144",
    ("cuda", "torch-tiled"): "16384,65536",
    ("cpu", "torch-tiled"): "1024,2048",
    ("cpu", "triton-fused"): "256",  # Triton's interpreter: numpy, slow
}
NBODY_TILE_ELEMENTS = 2**24  # tile x bodies pairs held at once: bounded memory for any N


def plan_nbody(
    runs: PlannedRuns,
    dtypes: list[str],
    bodies: str | None,
    tile: int | None,
    w: int | None,
    r: int | None,
    kernel: str = "auto",
) -> None:
    from gpuaccept.measure.nbody import NBODY_DTYPES, choose_kernel, usable_kernel
    from gpuaccept.sweeps.nbody import run_nbody
    from gpuaccept.sweeps.sizes import int_range

    for dtype in dtypes:
        if dtype not in NBODY_DTYPES:
            raise InputError(f"--dtype must be fp32 or fp64 for nbody (got {dtype!r})")
    chosen_kernel, fell_back = usable_kernel(
        choose_kernel(runs.device, kernel), kernel, runs.device
    )
    if fell_back is not None:
        typer.echo(f"[NBODY] {fell_back}", err=True)
    counts = int_range(bodies or NBODY_BODIES[runs.device.type, chosen_kernel], "--bodies")
    if min(counts) < 2:
        raise InputError("--bodies: n-body needs at least 2 bodies")
    if tile is not None and tile < 1:
        raise InputError(f"--tile must be positive (got {tile})")
    chosen_tile = tile or max(1, NBODY_TILE_ELEMENTS // max(counts))
    warmup, repeats = iterations_for(runs.device, w, r)
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


def nbody(
    dtype: list[str] = typer.Option(
        [], "--dtype", metavar="[fp32|fp64]", help="fp32 or fp64 (repeatable; default fp32)."
    ),
    bodies: str | None = typer.Option(
        None, "--bodies", metavar="COUNTS", help="Body counts: N, N,M,... or START:STOP:STEP."
    ),
    tile: int | None = typer.Option(
        None, "--tile", help="Bodies per tile of the torch kernel (default: bounded memory)."
    ),
    kernel: str = typer.Option(
        "auto",
        "--kernel",
        metavar="[auto|triton|torch]",
        help="auto: the fused Triton kernel on a GPU, tiled torch on the CPU.",
    ),
    warmup: int | None = WARMUP,
    iterations: int | None = ITERATIONS,
    device: str = DEVICE,
    json_path: Path | None = JSON_OUT,
    csv_path: Path | None = CSV_OUT,
    history: str | None = HISTORY,
    no_history: bool = NO_HISTORY,
    explain: bool = typer.Option(
        False,
        "--explain",
        help="Compile the fused kernel for sm_80, sm_90 and sm_100 (no GPU needed) and print "
        "registers, spills, the inner loop's instruction mix and the fp32 ceiling it allows; "
        "runs nothing.",
    ),
) -> None:
    """All-pairs n-body: interactions/s and GFLOP/s (20 flops fp32, 30 fp64 per interaction)."""
    if explain:
        _explain()
        return
    run_planned(
        "nbody",
        device,
        json_path,
        csv_path,
        history,
        no_history,
        lambda runs: plan_nbody(runs, dtype or ["fp32"], bodies, tile, warmup, iterations, kernel),
    )


def _explain() -> None:
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
        typer.echo("  ".join(cell.rjust(width) for cell, width in zip(row, widths, strict=True)))
    typer.echo(
        "[NBODY] ceiling: issue-, FP32- and MUFU-bound upper limit of the inner loop against "
        "fp32 peak (20 flops per interaction); see gpuaccept/measure/nbody_compiled.py"
    )
