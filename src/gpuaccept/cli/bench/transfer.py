"""`gpuaccept bench transfer`: host<->device copies and the GPU-to-GPU matrix
(gpuaccept.commands.bench.transfer)."""

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
from gpuaccept.commands.bench import transfer as command

_BEGIN, _END, _FACTOR = sweep_options("transfer")


def transfer(
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
    """Host<->device copies (pinned and pageable) and a GPU-to-GPU matrix when there are several."""
    options = dict(locals())  # first: the options as parsed
    request = request_from(command.TransferRequest, options)
    run_and_exit(command.run, request)
