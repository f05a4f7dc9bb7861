"""`gpuaccept bench matmul`: mamf-finder style shape sweeps (gpuaccept.commands.bench.matmul)."""

from __future__ import annotations

from gpuaccept.cli.bench.common import run_and_exit
from gpuaccept.cli.declared import command_of
from gpuaccept.commands.bench import matmul as command


@command_of(command.MatmulRequest)
def matmul(request: command.MatmulRequest) -> None:
    """Maximum achievable matmul TFLOPS over a sweep of shapes (mamf-finder style)."""
    run_and_exit(command.run, request)
