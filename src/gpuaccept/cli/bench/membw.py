"""`gpuaccept bench membw`: STREAM kernels on device memory (gpuaccept.commands.bench.membw)."""

from __future__ import annotations

from gpuaccept.cli.bench.common import run_and_exit
from gpuaccept.cli.declared import command_of
from gpuaccept.commands.bench import membw as command


@command_of(command.MembwRequest)
def membw(request: command.MembwRequest) -> None:
    """STREAM copy, scale, add and triad on device memory (GB/s = 10^9 B/s)."""
    run_and_exit(command.run, request)
