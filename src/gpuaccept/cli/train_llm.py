"""`gpuaccept train llm`: the LLM workload on its own. Options only: the run is
gpuaccept.commands.train_llm's (its ranks gpuaccept.llm's, its judging checks.workload's)."""

from __future__ import annotations

from pathlib import Path

import typer

from gpuaccept.cli.options import (
    DROP_TOLERANCE,
    FAIL_ON_DROP,
    HISTORY,
    NO_HISTORY,
    TRAIN_REPORT_DIR,
    DeviceChoice,
    device_option,
    request_from,
)


def llm(
    preset: str = typer.Option(
        "auto",
        "--preset",
        metavar="[auto|tiny|1b|8b]",
        help="Model size: tiny (the CPU twin), 1b, 8b (Llama 3.1 8B shapes); auto: tiny on the "
        "CPU, 1b on GPUs.",
    ),
    layers: int | None = typer.Option(
        None, "--layers", min=1, max=1024, help="Override the layers."
    ),
    dim: int | None = typer.Option(
        None,
        "--dim",
        min=8,
        max=65536,
        help="Override the model width (the head dimension is kept).",
    ),
    seq_len: int | None = typer.Option(
        None, "--seq-len", min=2, max=1 << 20, help="Override the sequence length."
    ),
    batch: int | None = typer.Option(
        None, "--batch", min=1, max=1 << 16, help="Sequences per GPU per step."
    ),
    steps: int | None = typer.Option(
        None, "--steps", min=2, max=1_000_000, help="Optimizer steps (default: the preset's)."
    ),
    learning_rate: float | None = typer.Option(
        None, "--lr", metavar="RATE", help="Peak learning rate (default: the preset's)."
    ),
    checkpointing: str | None = typer.Option(
        None,
        "--checkpointing",
        metavar="[none|full|selective-op|selective-layer-N]",
        help="Activation checkpointing as torchtitan names it: none, full, selective-op (per "
        "operator; 'selective' means this) or selective-layer-N (every Nth block whole).",
    ),
    compile_blocks: bool = typer.Option(
        False, "--compile", help="torch.compile each transformer block."
    ),
    precision: str = typer.Option(
        "auto", "--precision", metavar="[auto|bf16|fp32]", help="auto: bf16 on GPUs, fp32 on CPU."
    ),
    seed: int = typer.Option(0, "--seed", min=0, max=2**31 - 1, help="Seed of model and data."),
    log_every: int = typer.Option(
        10,
        "--log-every",
        min=0,
        max=1_000_000,
        metavar="STEPS",
        help="A training-log line every STEPS steps (loss, grad norm, tokens/s, TFLOPS, MFU, "
        "memory, step-time spread); 0: none.",
    ),
    device: DeviceChoice = device_option("auto (GPU when usable), cuda or cpu."),
    report_dir: Path | None = TRAIN_REPORT_DIR,
    history: str | None = HISTORY,
    no_history: bool = NO_HISTORY,
    drop_tolerance: float | None = DROP_TOLERANCE,
    fail_on_drop: bool = FAIL_ON_DROP,
) -> None:
    """Train a Llama-3-style model with FSDP2 on every GPU (2 gloo ranks on the CPU); gate on
    tokens/s and MFU, convergence, determinism and stragglers.

    Exit 0: passed; 1: a figure below its floor, no convergence, a NaN, a rerun that differs,
    a straggler or out of memory; 2: bad input; 130/143: interrupted by SIGINT/SIGTERM (the
    report says so).
    """
    options = dict(locals())  # first: the options as parsed
    from gpuaccept.cli.render import CONSOLE
    from gpuaccept.cli.signals import interrupts_as_exceptions
    from gpuaccept.commands.train_llm import TrainLlmRequest, run

    request = request_from(TrainLlmRequest, options)
    # signals become Interrupted around the ranks' run (the edge's policy)
    result = run(request, CONSOLE, interrupts_as_exceptions)
    if result.exit_code:
        raise typer.Exit(result.exit_code)
