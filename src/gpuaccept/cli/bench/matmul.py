"""`gpuaccept bench matmul`: mamf-finder style shape sweeps (gpuaccept.commands.bench.matmul)."""

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
from gpuaccept.commands.bench import matmul as command


def matmul(
    dtypes: list[str] = typer.Option(
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
    device: DeviceChoice = DEVICE,
    json_path: Path | None = JSON_OUT,
    csv_path: Path | None = CSV_OUT,
    history: str | None = HISTORY,
    no_history: bool = NO_HISTORY,
) -> None:
    """Maximum achievable matmul TFLOPS over a sweep of shapes (mamf-finder style)."""
    options = dict(locals())  # first: the options as parsed
    request = request_from(command.MatmulRequest, options)
    run_and_exit(command.run, request)
