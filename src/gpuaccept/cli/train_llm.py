"""`gpuaccept train llm`: the LLM workload on its own. Parses and renders; the run lives in
gpuaccept.llm and its judging in gpuaccept.checks.workload."""

from __future__ import annotations

import dataclasses
import math
import os
import signal
import threading
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from gpuaccept.cli.recording import (
    DROP_TOLERANCE,
    FAIL_ON_DROP,
    HISTORY,
    NO_HISTORY,
    DropPolicy,
    StoppedRun,
    drop_policy,
    finish_interrupted,
    finish_run,
    history_target,
)
from gpuaccept.errors import InputError, Interrupted

if TYPE_CHECKING:
    from gpuaccept.checks.context import CheckContext
    from gpuaccept.llm.train import LlmSpec
    from gpuaccept.results import CheckResult
    from gpuaccept.store.history import HistoryLocation


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
        metavar="[none|selective|full]",
        help="Activation checkpointing: none, selective (every second block) or full.",
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
    device: str = typer.Option(
        "auto", "--device", metavar="[auto|cuda|cpu]", help="auto (GPU when usable), cuda or cpu."
    ),
    report_dir: Path | None = typer.Option(
        None, "--report-dir", help="Write the JSON report (with environment capture) here."
    ),
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
    from gpuaccept.llm.plans import Overrides, llm_spec
    from gpuaccept.llm.train import Checkpointing, Precision

    if precision not in ("auto", "bf16", "fp32"):
        raise InputError(f"--precision must be auto, bf16 or fp32 (got {precision!r})")
    if checkpointing not in (None, "none", "selective", "full"):
        raise InputError(f"--checkpointing must be none, selective or full (got {checkpointing!r})")
    if learning_rate is not None and not math.isfinite(learning_rate):
        raise InputError(f"--lr must be a finite number (got {learning_rate})")
    if preset not in ("auto", "tiny", "1b", "8b"):
        raise InputError(f"--preset must be auto, tiny, 1b or 8b (got {preset!r})")
    drop = drop_policy(drop_tolerance, fail_on_drop)
    if report_dir is not None:
        from gpuaccept.output_files import check_output_directory

        check_output_directory(report_dir, "--report-dir")
    history_path = history_target(history, no_history)
    from gpuaccept.distributed.local_ranks import refuse_external_launch
    from gpuaccept.probe.hardware import resolve_device_mode

    try:
        refuse_external_launch()
    except InputError:
        raise InputError(
            "gpuaccept train llm starts one rank per GPU itself and is running under a launcher "
            f"(WORLD_SIZE={os.environ.get('WORLD_SIZE')}): across nodes, run `gpuaccept accept "
            "--level standard --only workload` under the launcher instead; it trains across "
            "every rank of the launch"
        ) from None
    mode = resolve_device_mode(device)
    chosen = preset if preset != "auto" else ("tiny" if mode == "cpu" else "1b")
    precisions: dict[str, Precision] = {"bf16": "bf16", "fp32": "fp32"}
    modes: dict[str | None, Checkpointing | None] = {
        None: None,
        "none": "none",
        "selective": "selective",
        "full": "full",
    }
    spec = llm_spec(
        chosen,
        precisions[("fp32" if mode == "cpu" else "bf16") if precision == "auto" else precision],
        Overrides(layers, dim, seq_len, batch, steps, learning_rate, modes[checkpointing]),
        compile_blocks=compile_blocks,
        seed=seed,
    )
    started = datetime.now(UTC)
    clock = time.monotonic()
    from gpuaccept.cli.signals import interrupts_as_exceptions

    try:
        with interrupts_as_exceptions():
            result = _run(spec, mode, log_every)
    except (Interrupted, KeyboardInterrupt) as error:
        # SIGTERM (preemption, scancel, an eviction) or Ctrl-C: the ranks are ended (run_ranks),
        # and the run is recorded as interrupted, never as a failure of the node
        stopped = error if isinstance(error, Interrupted) else Interrupted(signal.SIGINT)
        from gpuaccept.checks.workload import preset_of
        from gpuaccept.record.environment import capture_environment

        run = StoppedRun("train-llm", preset_of(spec), "workload", "TRAIN", mode, started, clock)
        finish_interrupted(stopped, run, capture_environment(), report_dir, history_path)
    _report(result, mode, started, clock, report_dir, history_path, drop)


def _run(spec: LlmSpec, mode: str, log_every: int) -> CheckResult:
    from gpuaccept.checks import workload
    from gpuaccept.checks.collectives import world
    from gpuaccept.checks.context import CheckContext
    from gpuaccept.llm.train import for_world
    from gpuaccept.references import load_shipped_references
    from gpuaccept.suite import level_settings

    context = CheckContext(
        level="standard",
        device_mode=mode,
        settings=level_settings("standard", mode),
        references=load_shipped_references(),
    )
    ranks, backend, _ = world(context)
    shape = spec.shape
    per_rank = for_world(spec, ranks).local_batch
    typer.echo(
        f"[TRAIN] llm {workload.preset_of(spec)}: {shape.layers} layers, dim {shape.dim}, "
        f"{shape.heads} heads ({shape.kv_heads} kv), seq {shape.seq_len}, batch "
        f"{per_rank} per rank, {spec.steps} steps, {spec.precision}, checkpointing "
        f"{spec.checkpointing}{', compiled' if spec.compile else ''}; {ranks} {backend} rank(s)"
    )
    if not context.cpu_mode and spec.precision == "bf16":
        typer.echo(_memory_line(spec, per_rank, ranks))
    # the model build, every step and the rerun, with room for a slow first compile
    timeout = 600.0 + 30.0 * spec.steps
    if not log_every:
        result = workload.run(context, spec, timeout_seconds=timeout)
    else:
        with _TrainingLog(context, spec, log_every) as logged:
            result = workload.run(context, logged, timeout_seconds=timeout)
    line = _figures_line(result, context.cpu_mode)
    if line:
        typer.echo(line)
    return result


def _memory_line(spec: LlmSpec, per_rank: int, ranks: int) -> str:
    """The memory model's prediction for this run against the smallest GPU (llm.memory): said
    before the run, so an out-of-memory that follows is no surprise."""
    import torch

    from gpuaccept.llm.memory import GiB, estimate_memory, usable_bytes

    smallest = min(
        torch.cuda.get_device_properties(i).total_memory for i in range(torch.cuda.device_count())
    )
    estimate = estimate_memory(spec.shape, per_rank, spec.checkpointing, ranks)
    usable = usable_bytes(smallest)
    said = "fits" if estimate.peak_bytes <= usable else "may NOT fit"
    return (
        f"[TRAIN] memory: {estimate.peak_gib:.1f} GiB per GPU predicted at {estimate.peak_at} "
        f"(llm/memory.py, measured on one GPU only) of {usable / GiB:.1f} usable: {said}"
    )


class _TrainingLog:
    """Shows rank 0's step log (llm.train writes it to a file) while the ranks train: a thread
    reads the lines as they come and echoes them with their units."""

    def __init__(self, context: CheckContext, spec: LlmSpec, every: int) -> None:
        import tempfile

        from gpuaccept.checks.workload import peak_bf16_tflops
        from gpuaccept.llm.flops import flops_per_token

        self._directory = tempfile.TemporaryDirectory(prefix="gpuaccept-llm-log-")
        self.path = Path(self._directory.name) / "steps.jsonl"
        self.path.touch()
        self.spec = dataclasses.replace(spec, log_every=every, log_file=str(self.path))
        self.flops = flops_per_token(spec.shape)
        self.cpu = context.cpu_mode
        self.peak = None
        if not self.cpu:
            from gpuaccept.checks.judging import measurement_targets

            targets = measurement_targets(context)
            self.peak = peak_bf16_tflops(context, targets[0]) if targets else None
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._follow, daemon=True)

    def __enter__(self) -> LlmSpec:
        self._thread.start()
        return self.spec

    def __exit__(self, *exc: object) -> None:
        self._done.set()
        self._thread.join(timeout=5)
        self._directory.cleanup()

    def _follow(self) -> None:
        from gpuaccept.llm.progress import progress_line

        with open(self.path, encoding="utf-8") as log:
            pending = ""
            while True:
                finished = self._done.is_set()
                pending += log.read()
                *lines, pending = pending.split("\n")
                for raw in lines:
                    line = progress_line(raw, self.flops, self.peak, self.cpu)
                    if line:
                        typer.echo(line)
                if finished:
                    return
                self._done.wait(0.5)


def _figures_line(result: CheckResult, cpu: bool = False) -> str | None:
    """The run's figures in one line, read from the check (None when no rank finished)."""
    figures = {m.name.removeprefix("llm_"): m.value for m in result.measurements}
    rate = next((v for k, v in figures.items() if k.endswith("tokens_per_second_per_gpu")), None)
    if rate is None:
        return None
    tflops = next(v for k, v in figures.items() if k.endswith("tflops_per_gpu"))
    mfu = next((v for k, v in figures.items() if k.endswith("_mfu")), None)
    memory = figures.get("peak_memory_gib")
    details = result.details
    if cpu:
        # a CPU rank is a process on shared cores, and a CPU has no bf16 peak to take a share of
        speed = (
            f"{rate:,.0f} tokens/s per rank, {tflops:.2f} TFLOPS per rank (CPU twin: no GPU "
            "peak, so no MFU)"
        )
    else:
        speed = f"{rate:,.0f} tokens/s per GPU, {tflops:.2f} TFLOPS per GPU" + (
            f", MFU {mfu:.1%}" if mfu is not None else ", no MFU (no peak for this GPU)"
        )
    limit = (
        f"limit {details['convergence_limit']:.3f}"
        if details.get("convergence_judged", True)
        else "convergence not judged: a changed run"
    )
    return (
        f"[TRAIN] {speed}; goodput {figures['goodput']:.2f}"
        f"{f', peak memory {memory:.1f} GiB' if memory is not None else ''}; loss "
        f"{details['losses'][0]:.3f} -> {figures['final_loss']:.3f} (floor "
        f"{details['entropy_rate']:.3f}, {limit})"
    )


def _report(
    result: CheckResult,
    mode: str,
    started: datetime,
    clock: float,
    report_dir: Path | None,
    history: HistoryLocation | None,
    drop: DropPolicy,
) -> None:
    from gpuaccept.record.environment import capture_environment
    from gpuaccept.report.console import check_line
    from gpuaccept.results import RunReport

    report = RunReport.completed(
        command="train-llm",
        level=str(result.details.get("preset", "custom")),
        device_mode=mode,
        started=started,
        monotonic_start=clock,
        checks=[result],
        environment=capture_environment(),
    )
    typer.echo(check_line(result))
    finish_run(report, history, drop, report_dir)
