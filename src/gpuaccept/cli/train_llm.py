"""`gpuaccept train llm`: the LLM workload on its own. Options only: the run is
gpuaccept.commands.train_llm's (its ranks gpuaccept.llm's, its judging checks.workload's)."""

from __future__ import annotations

import typer

from gpuaccept.cli.declared import command_of
from gpuaccept.commands.train_llm import TrainLlmRequest


@command_of(TrainLlmRequest)
def llm(request: TrainLlmRequest) -> None:
    """Train a Llama-3-style model with FSDP2 on every GPU (2 gloo ranks on the CPU); gate on
    tokens/s and MFU, convergence, determinism and stragglers.

    Exit 0: passed; 1: a figure below its floor, no convergence, a NaN, a rerun that differs,
    a straggler or out of memory; 2: bad input; 130/143: interrupted by SIGINT/SIGTERM (the
    report says so).
    """
    from gpuaccept.cli.render import CONSOLE
    from gpuaccept.cli.signals import interrupts_as_exceptions
    from gpuaccept.commands.train_llm import run

    # signals become Interrupted around the ranks' run (the edge's policy)
    result = run(request, CONSOLE, interrupts_as_exceptions)
    if result.exit_code:
        raise typer.Exit(result.exit_code)
