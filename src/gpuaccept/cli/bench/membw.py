"""`gpuaccept bench membw`: STREAM kernels on device memory (gpuaccept.commands.bench.membw)."""

from __future__ import annotations

from pathlib import Path

from gpuaccept.cli.bench.common import (
    CSV_OUT,
    DEVICE,
    ITERATIONS,
    JSON_OUT,
    WARMUP,
    run_and_exit,
    sweep_options,
)
from gpuaccept.cli.options import HISTORY, NO_HISTORY, DeviceChoice, request_from
from gpuaccept.commands.bench import membw as command

_BEGIN, _END, _FACTOR = sweep_options("membw")


def membw(
    begin: str | None = _BEGIN,
    end: str | None = _END,
    factor: int | None = _FACTOR,
    warmup: int | None = WARMUP,
    iterations: int | None = ITERATIONS,
    device: DeviceChoice = DEVICE,
    json_path: Path | None = JSON_OUT,
    csv_path: Path | None = CSV_OUT,
    history: str | None = HISTORY,
    no_history: bool = NO_HISTORY,
) -> None:
    """STREAM copy, scale, add and triad on device memory (GB/s = 10^9 B/s)."""
    options = dict(locals())  # first: the options as parsed
    request = request_from(command.MembwRequest, options)
    run_and_exit(command.run, request)
