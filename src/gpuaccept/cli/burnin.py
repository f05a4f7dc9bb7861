"""`gpuaccept burnin`: hours of load on every GPU of the node, judged window by window.

The options and their help; the burn-in itself is `gpuaccept.commands.burnin`."""

from __future__ import annotations

from pathlib import Path

import typer

from gpuaccept.cli.options import (
    DEVICE,
    HISTORY,
    JUNIT,
    NO_HISTORY,
    DeviceChoice,
    report_dir_option,
    request_from,
    rules_option,
)

_STRESSORS = "gemm-bf16, gemm-fp32, hbm, host-transfer, all-reduce"


def burnin(
    duration: str = typer.Option(
        ...,
        "--duration",
        metavar="DURATION",
        help="How long to load the GPUs: 10m, 24h, 1h30m, 3d (72 h).",
        rich_help_panel="What to run",
    ),
    window: str | None = typer.Option(
        None,
        "--window",
        metavar="DURATION",
        show_default="5m, or the whole --duration when shorter",
        help="Length of one judged window; each window runs one stressor.",
        rich_help_panel="What to run",
    ),
    schedule: str | None = typer.Option(
        None,
        "--schedule",
        metavar="S1,S2,...",
        help=f"The stressors' rotation, one per window (default: all of {_STRESSORS}; "
        "all-reduce only with several GPUs).",
        rich_help_panel="What to run",
    ),
    device: DeviceChoice = DEVICE,
    cpu_devices: int = typer.Option(
        3,
        "--cpu-devices",
        min=2,
        max=64,
        metavar="N",
        help="CPU twin: how many workers stand in for GPUs (3 have a majority and a median).",
        rich_help_panel="What to run",
    ),
    seed: int = typer.Option(
        0,
        "--seed",
        min=0,
        max=2**31 - 1,
        metavar="N",
        help="Seed of every device's work.",
        rich_help_panel="What to run",
    ),
    checkpoint: Path | None = typer.Option(
        None,
        "--checkpoint",
        metavar="FILE",
        help="Save progress here after each window; a restarted job given the same file "
        "resumes at the next window (HTCondor eviction, Slurm preemption).",
        rich_help_panel="Outputs",
    ),
    checkpoint_every: int | None = typer.Option(
        None,
        "--checkpoint-every",
        min=1,
        metavar="N",
        help="With --checkpoint-exit-code: windows run before each exit.",
        rich_help_panel="Outputs",
    ),
    checkpoint_exit_code: int | None = typer.Option(
        None,
        "--checkpoint-exit-code",
        min=4,
        max=255,
        metavar="CODE",
        help="After every --checkpoint-every windows (but the last), exit CODE with the "
        "checkpoint written (HTCondor's checkpoint_exit_code: the job is restarted and "
        "resumes).",
        rich_help_panel="Outputs",
    ),
    straggler_tolerance: float | None = typer.Option(
        None,
        "--straggler-tolerance",
        metavar="PERCENT",
        show_default="10 on GPUs (gpu-fryer's), 50 on the CPU twin",
        help="A device this much below the node's median in a window is a straggler; also "
        "the most a device's rate may drift down over the run.",
        rich_help_panel="Judging",
    ),
    report_dir: Path | None = report_dir_option("with the time series"),
    junit: Path | None = JUNIT,
    rules: Path | None = rules_option("Judging"),
    history: str | None = HISTORY,
    no_history: bool = NO_HISTORY,
) -> None:
    """Keep every GPU of the node busy for --duration with a rotation of stressors, and judge
    each window: wrong bits, hard events, lost GPUs, stragglers, drift.

    Exit 0: passed (warnings allowed); 1: a window failed; 2: bad input; 3: environment error;
    130/143: interrupted (the report says so; the checkpoint keeps the finished windows).
    """
    options = dict(locals())  # first: the options as parsed
    from gpuaccept.cli.render import BURNIN_CONSOLE
    from gpuaccept.cli.signals import interrupts_as_exceptions
    from gpuaccept.commands.burnin import BurnInRequest, run

    request = request_from(BurnInRequest, options)
    # planned before SIGINT/SIGTERM become Interrupted, as burnin always was
    result = run(request, BURNIN_CONSOLE, signals=interrupts_as_exceptions)
    if result.exit_code:
        raise typer.Exit(result.exit_code)
