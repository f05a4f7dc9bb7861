"""`gpuaccept bench nbody`: all-pairs n-body in the cuda-samples convention
(gpuaccept.commands.bench.nbody)."""

from __future__ import annotations

from gpuaccept.cli.bench.common import run_and_exit
from gpuaccept.cli.declared import command_of
from gpuaccept.commands.bench import nbody as command


@command_of(command.NbodyRequest)
def nbody(request: command.NbodyRequest) -> None:
    """All-pairs n-body: interactions/s and GFLOP/s (20 flops fp32, 30 fp64 per interaction)."""
    run_and_exit(command.run, request)
