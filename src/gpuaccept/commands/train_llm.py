"""`gpuaccept train llm` as a library call: the LLM workload on its own.

The ranks and their training live in gpuaccept.llm, their judging in gpuaccept.checks.workload
(the same judge accept's workload check uses); this module checks the request, says what will
run, follows rank 0's step log while it runs, and writes the run's end.
"""

from __future__ import annotations

import dataclasses
import math
import os
import signal
import threading
import time
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

from gpuaccept.commands.options import (
    DROP_TOLERANCE,
    FAIL_ON_DROP,
    HISTORY,
    NO_HISTORY,
    TRAIN_REPORT_DIR,
    check_bounds,
    device_opt,
    opt,
)
from gpuaccept.commands.recording import (
    StoppedRun,
    drop_policy,
    finish_interrupted,
    finish_run,
    history_target,
)
from gpuaccept.errors import InputError, Interrupted

if TYPE_CHECKING:
    from gpuaccept.checks.context import CheckContext
    from gpuaccept.commands.output import Output
    from gpuaccept.llm.train import LlmSpec
    from gpuaccept.results import CheckResult, RunReport

# How signals become exceptions: the caller's policy (the CLI installs handlers; a library
# caller may not want its process's handlers touched), entered around the ranks' run.
Interrupts = Callable[[], AbstractContextManager[None]]


_PRESET = (
    "Model size: tiny (the CPU twin), 1b, 8b (Llama 3.1 8B shapes); auto: tiny on the CPU, 1b "
    "on GPUs."
)
_DIM = "Override the model width (the head dimension is kept)."
_CHECKPOINTING = (
    "Activation checkpointing as torchtitan names it: none, full, selective-op (per operator; "
    "'selective' means this) or selective-layer-N (every Nth block whole)."
)
_LOG_EVERY = (
    "A training-log line every STEPS steps (loss, grad norm, tokens/s, TFLOPS, MFU, memory, "
    "step-time spread); 0: none."
)


@dataclass(frozen=True, kw_only=True)
class TrainLlmRequest:
    """Every value `train llm` takes, as parsed; checked once, by `run`. None: the preset's."""

    # auto: tiny on the CPU, 1b on GPUs
    preset: Annotated[str, opt("--preset", "[auto|tiny|1b|8b]", _PRESET)] = "auto"
    layers: Annotated[
        int | None, opt("--layers", text="Override the layers.", least=1, most=1024)
    ] = None
    dim: Annotated[int | None, opt("--dim", text=_DIM, least=8, most=65536)] = None
    seq_len: Annotated[
        int | None, opt("--seq-len", text="Override the sequence length.", least=2, most=1 << 20)
    ] = None
    batch: Annotated[
        int | None, opt("--batch", text="Sequences per GPU per step.", least=1, most=1 << 16)
    ] = None
    steps: Annotated[
        int | None,
        opt("--steps", text="Optimizer steps (default: the preset's).", least=2, most=1_000_000),
    ] = None
    learning_rate: Annotated[
        float | None, opt("--lr", "RATE", "Peak learning rate (default: the preset's).")
    ] = None
    checkpointing: Annotated[
        str | None,
        opt("--checkpointing", "[none|full|selective-op|selective-layer-N]", _CHECKPOINTING),
    ] = None
    compile_blocks: Annotated[
        bool, opt("--compile", text="torch.compile each transformer block.")
    ] = False
    # auto: bf16 on GPUs, fp32 on the CPU
    precision: Annotated[
        str, opt("--precision", "[auto|bf16|fp32]", "auto: bf16 on GPUs, fp32 on CPU.")
    ] = "auto"
    seed: Annotated[int, opt("--seed", text="Seed of model and data.", least=0, most=2**31 - 1)] = 0
    # 0: no step log
    log_every: Annotated[int, opt("--log-every", "STEPS", _LOG_EVERY, least=0, most=1_000_000)] = 10
    device: Annotated[str, device_opt("auto (GPU when usable), cuda or cpu.")] = "auto"
    report_dir: Annotated[Path | None, TRAIN_REPORT_DIR] = None
    history: Annotated[str | None, HISTORY] = None
    no_history: Annotated[bool, NO_HISTORY] = False
    drop_tolerance: Annotated[float | None, DROP_TOLERANCE] = None
    fail_on_drop: Annotated[bool, FAIL_ON_DROP] = False

    def __post_init__(self) -> None:
        check_bounds(self)


@dataclass(frozen=True)
class TrainLlmResult:
    """How the run ended: the process's exit code and the report as written."""

    exit_code: int
    report: RunReport | None = None  # None only when a signal stopped the run


def _spec(request: TrainLlmRequest, mode: str) -> LlmSpec:
    """The model and run the request names on this device mode (InputError for a shape that
    cannot be built or trained)."""
    from gpuaccept.llm.plans import Overrides, llm_spec
    from gpuaccept.llm.train import Precision

    chosen = request.preset if request.preset != "auto" else ("tiny" if mode == "cpu" else "1b")
    precisions: dict[str, Precision] = {"bf16": "bf16", "fp32": "fp32"}
    precision = request.precision
    return llm_spec(
        chosen,
        precisions[("fp32" if mode == "cpu" else "bf16") if precision == "auto" else precision],
        Overrides(
            request.layers,
            request.dim,
            request.seq_len,
            request.batch,
            request.steps,
            request.learning_rate,
            request.checkpointing,
        ),
        compile_blocks=request.compile_blocks,
        seed=request.seed,
    )


def _check(request: TrainLlmRequest) -> None:
    """The flags no parser checks, each refused in one line before anything runs."""
    if request.precision not in ("auto", "bf16", "fp32"):
        raise InputError(f"--precision must be auto, bf16 or fp32 (got {request.precision!r})")
    if request.checkpointing is not None:
        from gpuaccept.llm.checkpointing import policy_name

        policy_name(request.checkpointing)
    if request.learning_rate is not None and not math.isfinite(request.learning_rate):
        raise InputError(f"--lr must be a finite number (got {request.learning_rate})")
    if request.preset not in ("auto", "tiny", "1b", "8b"):
        raise InputError(f"--preset must be auto, tiny, 1b or 8b (got {request.preset!r})")


def _refuse_a_policy_that_checkpoints_nothing(spec: LlmSpec) -> None:
    """selective-layer-5 on 2 layers checkpoints no block: a run that asked for checkpointing and
    got none would be reported, and compared, as checkpointed (the operator review)."""
    from gpuaccept.llm.checkpointing import layer_interval

    every = layer_interval(spec.checkpointing)
    if every is not None and every > spec.shape.layers:
        raise InputError(
            f"--checkpointing {spec.checkpointing} on {spec.shape.layers} layers checkpoints no "
            f"block: give N of at most {spec.shape.layers}, or none"
        )


def run(
    request: TrainLlmRequest, out: Output, interrupts: Interrupts = nullcontext
) -> TrainLlmResult:
    """Check, train on every GPU (2 gloo ranks on the CPU), judge, write: the run's end as an
    exit code, never a raise for a verdict. A bad request raises InputError (one line)."""
    _check(request)
    drop = drop_policy(request.drop_tolerance, request.fail_on_drop, no_history=request.no_history)
    if request.report_dir is not None:
        from gpuaccept.output_files import check_output_directory

        check_output_directory(request.report_dir, "--report-dir")
    history = history_target(request.history, request.no_history, out)
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
    mode = resolve_device_mode(request.device)
    spec = _spec(request, mode)
    _refuse_a_policy_that_checkpoints_nothing(spec)
    started = datetime.now(UTC)
    clock = time.monotonic()
    try:
        with interrupts():
            result = _run(spec, mode, request.log_every, out)
    except (Interrupted, KeyboardInterrupt) as error:
        # SIGTERM (preemption, scancel, an eviction) or Ctrl-C: the ranks are ended (run_ranks),
        # and the run is recorded as interrupted, never as a failure of the node
        stopped = error if isinstance(error, Interrupted) else Interrupted(signal.SIGINT)
        from gpuaccept.checks.workload import preset_of
        from gpuaccept.record.environment import capture_environment

        stopped_run = StoppedRun(
            "train-llm", preset_of(spec), "workload", "TRAIN", mode, started, clock
        )
        code = finish_interrupted(
            stopped, stopped_run, capture_environment(), request.report_dir, history, out
        )
        return TrainLlmResult(code)
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
    out.line(check_line(result))
    report = finish_run(report, history, drop, request.report_dir, out)
    return TrainLlmResult(report.verdict.exit_code, report)


def _run(spec: LlmSpec, mode: str, log_every: int, out: Output) -> CheckResult:
    """The ranks started, trained and judged, with what is worth saying before, during and
    after."""
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
    out.line(
        f"[TRAIN] llm {workload.preset_of(spec)}: {shape.layers} layers, dim {shape.dim}, "
        f"{shape.heads} heads ({shape.kv_heads} kv), seq {shape.seq_len}, batch "
        f"{per_rank} per rank, {spec.steps} steps, {spec.precision}, checkpointing "
        f"{spec.checkpointing}, {spec.loss_form}{', compiled' if spec.compile else ''}; "
        f"{ranks} {backend} rank(s)"
    )
    if not context.cpu_mode and spec.precision == "bf16":
        out.line(_memory_line(spec, per_rank, ranks))
    # the model build, every step and the rerun, with room for a slow first compile
    timeout = 600.0 + 30.0 * spec.steps
    if not log_every:
        result = workload.run(context, spec, timeout_seconds=timeout)
    else:
        with _TrainingLog(context, spec, log_every, out) as logged:
            result = workload.run(context, logged, timeout_seconds=timeout)
    line = _figures_line(result, context.cpu_mode)
    if line:
        out.line(line)
    return result


def _memory_line(spec: LlmSpec, per_rank: int, ranks: int) -> str:
    """The memory model's prediction for this run against the smallest GPU (llm.memory): said
    before the run, so an out-of-memory that follows is no surprise."""
    import torch

    from gpuaccept.llm.memory import GiB, estimate_memory, usable_bytes

    smallest = min(
        torch.cuda.get_device_properties(i).total_memory for i in range(torch.cuda.device_count())
    )
    estimate = estimate_memory(
        spec.shape, per_rank, spec.checkpointing, ranks, spec.loss_form == "logits-freed"
    )
    usable = usable_bytes(smallest)
    said = "fits" if estimate.peak_bytes <= usable else "may NOT fit"
    return (
        f"[TRAIN] memory: {estimate.peak_gib:.1f} GiB per GPU predicted at {estimate.peak_at} "
        f"(llm/memory.py, measured on one GPU only) of {usable / GiB:.1f} usable: {said}"
    )


class _TrainingLog:
    """Shows rank 0's step log (llm.train writes it to a file) while the ranks train: a thread
    reads the lines as they come and says them with their units."""

    def __init__(self, context: CheckContext, spec: LlmSpec, every: int, out: Output) -> None:
        import tempfile

        from gpuaccept.checks.workload import peak_bf16_tflops
        from gpuaccept.llm.flops import flops_per_token

        self._out = out
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
                        self._out.line(line)
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
