"""`gpuaccept bench transfer`: host<->device copies and the GPU-to-GPU matrix
(gpuaccept.commands.bench.transfer)."""

from __future__ import annotations

from gpuaccept.cli.bench.common import run_and_exit
from gpuaccept.cli.declared import command_of
from gpuaccept.commands.bench import transfer as command


@command_of(command.TransferRequest)
def transfer(request: command.TransferRequest) -> None:
    """Host<->device copies (pinned and pageable) and a GPU-to-GPU matrix when there are several."""
    run_and_exit(command.run, request)
