"""`gpuaccept bench collectives`: nccl-tests style sweeps on local ranks or under torchrun
(gpuaccept.commands.bench.collectives)."""

from __future__ import annotations

from gpuaccept.cli.bench.common import run_and_exit
from gpuaccept.cli.declared import command_of
from gpuaccept.commands.bench import collectives as command


@command_of(command.CollectivesRequest)
def collectives(request: command.CollectivesRequest) -> None:
    """nccl-tests style sweeps: time, algbw, busbw and #wrong, out-of-place and in-place."""
    run_and_exit(command.run, request)
