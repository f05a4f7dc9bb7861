"""`gpuaccept bench nbody`: all-pairs n-body in the cuda-samples convention
(gpuaccept.commands.bench.nbody)."""

from __future__ import annotations

from pathlib import Path

import typer

from gpuaccept.cli.bench.common import (
    CSV_OUT,
    DEVICE,
    ITERATIONS,
    JSON_OUT,
    WARMUP,
    run_and_exit,
)
from gpuaccept.cli.options import HISTORY, NO_HISTORY, DeviceChoice, request_from
from gpuaccept.commands.bench import nbody as command


def nbody(
    dtypes: list[str] = typer.Option(
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
    device: DeviceChoice = DEVICE,
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
    options = dict(locals())  # first: the options as parsed
    request = request_from(command.NbodyRequest, options)
    run_and_exit(command.run, request)
