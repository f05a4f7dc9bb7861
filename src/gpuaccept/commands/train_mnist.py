"""`gpuaccept train mnist` as a library call: a real PyTorch training job as acceptance.

The request is checked before anything is loaded (a wrong flag costs nothing), the data before
torch is imported (a wrong tarball is refused in a fraction of a second, not after seconds of
importing torch), then every rank trains its slice of each batch; rank 0 alone says and writes.
The workload itself lives in gpuaccept.mnist; this module orchestrates it.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

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
    DropPolicy,
    StoppedRun,
    drop_policy,
    finish_interrupted,
    finish_run,
    history_path,
    history_target,
)
from gpuaccept.errors import InputError, Interrupted
from gpuaccept.interrupts import raise_if_interrupted

if TYPE_CHECKING:
    import torch

    from gpuaccept.commands.output import Output
    from gpuaccept.mnist.data import MnistData
    from gpuaccept.mnist.recipes import Recipe
    from gpuaccept.mnist.train import EpochRecord, TrainOutcome
    from gpuaccept.results import RunReport
    from gpuaccept.store.history import HistoryLocation

# an epoch can take a minute on a CPU: a line saying how far it has got at most this often
TRAIN_PROGRESS_SECONDS = 10.0

# Where the data is looked for when none is named: what an HTCondor job transfers in, then a folder.
DEFAULT_DATA = (Path("MNIST_data.tar.gz"), Path("data"))

# How signals become exceptions: the caller's policy (the CLI installs handlers; a library
# caller may not want its process's handlers touched), entered around the loading and the run.
Interrupts = Callable[[], AbstractContextManager[None]]


_DATA = (
    "MNIST as a directory (flat or MNIST/raw/, gzipped or not) or MNIST_data.tar.gz. Default: "
    "./MNIST_data.tar.gz, else ./data/."
)
_SEED = "Seed (0 to 2^32-1): the same seed gives the same model."
_PRECISION = "auto (bf16 on a GPU that has it, else fp32), bf16 or fp32."
_TARGET = "Exit 1 when the final test accuracy is below this (0.99 or 99 both mean 99%)."
_CHECKPOINT = "Checkpoint file: resumed from when it exists, rewritten every --checkpoint-every."
_CHECKPOINT_EXIT = (
    "Exit with this code after each checkpoint but the last (HTCondor's checkpoint_exit_code: "
    "the job is restarted and resumes)."
)
_SCRATCH = "Where a tarball is extracted (default: $_CONDOR_SCRATCH_DIR, else the temp dir)."


@dataclass(frozen=True, kw_only=True)
class TrainMnistRequest:
    """Every value `train mnist` takes, as parsed; checked once, by `run`."""

    # None: ./MNIST_data.tar.gz, else ./data/
    data: Annotated[Path | None, opt("--data", text=_DATA)] = None
    model: Annotated[
        str, opt("--model", "[fast|lenet]", "fast (default recipe) or lenet (the seed's).")
    ] = "fast"
    epochs: Annotated[int, opt("--epochs", text="Number of training epochs.", least=1)] = 20
    # None: the recipe's
    batch_size: Annotated[
        int | None, opt("--batch-size", text="Global batch size (default: the recipe's).", least=1)
    ] = None
    # None: the recipe's
    learning_rate: Annotated[
        float | None, opt("--lr", "RATE", "Peak learning rate (default: the recipe's).", least=0)
    ] = None
    seed: Annotated[int, opt("--seed", "N", _SEED, least=0, most=2**32 - 1)] = 0
    device: Annotated[str, device_opt("auto, cuda or cpu.")] = "auto"
    precision: Annotated[str, opt("--precision", "[auto|bf16|fp32]", _PRECISION)] = "auto"
    # 0.99 and 99 both mean 99%
    target_accuracy: Annotated[float | None, opt("--target-accuracy", "FRACTION", _TARGET)] = None
    save_model: Annotated[
        Path | None,
        opt("--save-model", text="Write the trained model and its metadata here (atomically)."),
    ] = None
    checkpoint: Annotated[Path | None, opt("--checkpoint", text=_CHECKPOINT)] = None
    checkpoint_every: Annotated[
        int, opt("--checkpoint-every", text="Epochs between checkpoints.", least=1)
    ] = 1
    checkpoint_exit_code: Annotated[
        int | None, opt("--checkpoint-exit-code", text=_CHECKPOINT_EXIT, least=4, most=255)
    ] = None
    report_dir: Annotated[Path | None, TRAIN_REPORT_DIR] = None
    # None: $_CONDOR_SCRATCH_DIR, else the temp dir
    scratch: Annotated[Path | None, opt("--scratch", text=_SCRATCH)] = None
    history: Annotated[str | None, HISTORY] = None
    no_history: Annotated[bool, NO_HISTORY] = False
    drop_tolerance: Annotated[float | None, DROP_TOLERANCE] = None
    fail_on_drop: Annotated[bool, FAIL_ON_DROP] = False

    def __post_init__(self) -> None:
        check_bounds(self)


@dataclass(frozen=True)
class TrainMnistResult:
    """How the run ended: the process's exit code, and rank 0's report as written (None on the
    other ranks, and when the run stopped at a checkpoint for its scheduler)."""

    exit_code: int
    report: RunReport | None = None


@dataclass(frozen=True)
class _Plan:
    """The request, checked and resolved: what the run needs before the data is loaded."""

    recipe: Recipe
    target: float | None
    drop: DropPolicy
    data: Path
    history: HistoryLocation | None
    scratch: Path | None


class _LeftEarly(Exception):
    """Leaves the process group without its closing barrier: an interrupted rank must not wait
    for peers that may be stuck in a collective the signal cut."""

    def __init__(self, result: TrainMnistResult) -> None:
        super().__init__(result.exit_code)
        self.result = result


class _SchedulerStop(Exception):
    """Raised after a checkpoint when the scheduler is to restart the job (its exit code)."""


def target_fraction(value: float | None) -> float | None:
    """--target-accuracy as a fraction: 0.99 and 99 both mean 99%."""
    if value is None:
        return None
    if not 0 < value <= 100:
        raise InputError(f"--target-accuracy must be in (0, 1] or (1, 100] percent (got {value:g})")
    return value if value <= 1 else value / 100


def default_data() -> Path:
    """The data a job brings when --data is not given (the first of DEFAULT_DATA that exists)."""
    for candidate in DEFAULT_DATA:
        if candidate.exists():
            return candidate
    raise InputError(
        "no MNIST data: pass --data with a directory or MNIST_data.tar.gz "
        f"(looked for ./{DEFAULT_DATA[0]} and ./{DEFAULT_DATA[1]}/)"
    )


def data_files(path: Path) -> list[Path]:
    """The data path and, for a directory, the files in it (MNIST/raw/ included): what an output
    must not replace. Bounded, so a huge directory costs little."""
    found = [path]
    if path.is_dir():
        for depth in ("*", "*/*", "*/*/*"):
            found += [p for p in sorted(path.glob(depth))[:1000] if p.is_file()]
    return found


def check_output(path: Path | None, flag: str) -> None:
    """Refuse before training, not after it, when an output cannot be written."""
    from gpuaccept.output_files import check_output_file

    if path is not None:
        check_output_file(path, flag)


def _plan(request: TrainMnistRequest, out: Output) -> _Plan:
    """Every refusal a request can earn, in the order users have always met them; the history
    is opened last (a corrupt one stops the run before any training)."""
    import dataclasses

    from gpuaccept.mnist.recipes import RECIPES
    from gpuaccept.output_files import check_output_directory, refuse_collisions

    if request.model not in RECIPES:
        raise InputError(f"--model must be one of {', '.join(RECIPES)} (got {request.model!r})")
    if request.precision not in ("auto", "bf16", "fp32"):
        raise InputError(f"--precision must be auto, bf16 or fp32 (got {request.precision!r})")
    if request.learning_rate is not None and not math.isfinite(request.learning_rate):
        raise InputError(f"--lr must be a finite number (got {request.learning_rate})")
    if request.checkpoint_exit_code is not None and request.checkpoint is None:
        raise InputError("--checkpoint-exit-code needs --checkpoint")
    target = target_fraction(request.target_accuracy)
    drop = drop_policy(request.drop_tolerance, request.fail_on_drop, no_history=request.no_history)
    data = request.data if request.data is not None else default_data()
    check_output(request.save_model, "--save-model")
    check_output(request.checkpoint, "--checkpoint")
    # the checkpoint is read and rewritten: an output; the data, every file of it, an input
    refuse_collisions(
        {
            "--history": history_path(request.history, request.no_history),
            "--save-model": request.save_model,
            "--checkpoint": request.checkpoint,
        },
        {f"--data {path}" if path != data else "--data": path for path in data_files(data)},
    )
    if request.report_dir is not None:
        check_output_directory(request.report_dir, "--report-dir")
    history = history_target(request.history, request.no_history, out)
    scratch = request.scratch
    if scratch is None and os.environ.get("_CONDOR_SCRATCH_DIR"):
        scratch = Path(os.environ["_CONDOR_SCRATCH_DIR"])
    recipe = RECIPES[request.model]
    if request.batch_size is not None:
        recipe = dataclasses.replace(recipe, batch_size=request.batch_size)
    if request.learning_rate is not None:
        recipe = dataclasses.replace(recipe, learning_rate=request.learning_rate)
    return _Plan(recipe, target, drop, data, history, scratch)


def run(
    request: TrainMnistRequest, out: Output, interrupts: Interrupts = nullcontext
) -> TrainMnistResult:
    """Check, load, train (every rank of a torchrun launch), judge, write: the run's end as an
    exit code, never a raise for a verdict. A bad request raises InputError (one line)."""
    plan = _plan(request, out)
    from gpuaccept.mnist.data import load_mnist

    load_started = time.monotonic()
    # a signal while a tarball is extracted ends the load through its cleanup: nothing of the
    # extraction stays in --scratch (it is exit 130/143 with one line; no run had started)
    with interrupts():
        dataset = load_mnist(plan.data, plan.scratch)
    load_seconds = time.monotonic() - load_started

    import torch

    from gpuaccept.distributed.torchrun import torchrun_process_group

    try:
        with torchrun_process_group(request.device) as (run_device, rank, world):
            # Every rank returns through the group's closing barrier, whatever its verdict: a
            # rank that exited at once on a miss made torchrun end rank 0 while it still wrote
            # its report (its [RESULT] line lost under load)
            bf16 = request.precision == "bf16" or (
                request.precision == "auto"
                and run_device.type == "cuda"
                and torch.cuda.is_bf16_supported()
            )
            return _train_and_report(
                request, plan, dataset, load_seconds, run_device, rank, world, bf16, out, interrupts
            )
    except _LeftEarly as left:
        return left.result


def _train_and_report(
    request: TrainMnistRequest,
    plan: _Plan,
    dataset: MnistData,
    load_seconds: float,
    run_device: torch.device,
    rank: int,
    world: int,
    bf16: bool,
    out: Output,
    interrupts: Interrupts,
) -> TrainMnistResult:
    from gpuaccept.mnist.result import training_check
    from gpuaccept.mnist.train import CheckpointPlan, TrainConfig, train_mnist
    from gpuaccept.record.environment import capture_environment
    from gpuaccept.report.console import check_line
    from gpuaccept.results import RunReport

    lead = rank == 0
    epochs, recipe, checkpoint = request.epochs, plan.recipe, request.checkpoint
    # the run's duration counts loading the data, as it did when loading came first here
    started = datetime.now(UTC) - timedelta(seconds=load_seconds)
    clock = time.monotonic() - load_seconds
    config = TrainConfig(recipe=recipe, epochs=epochs, seed=request.seed, bf16=bf16)
    environment = capture_environment() if lead else {}
    if lead:
        out.line(
            f"[TRAIN] mnist --model {request.model}: {len(dataset.train_labels)} train / "
            f"{len(dataset.test_labels)} test images from {dataset.source}; {run_device}"
            f"{f' x {world} ranks' if world > 1 else ''}, {'bf16' if bf16 else 'fp32'}, "
            f"batch {recipe.batch_size}, seed {request.seed}, "
            f"{epochs} epoch{'' if epochs == 1 else 's'}"
        )
        if checkpoint is not None and checkpoint.exists():
            out.line(f"[TRAIN] resuming from {checkpoint}")

    said = [time.monotonic()]  # when the log last heard of this run (an epoch or a step)

    def show(record: EpochRecord) -> None:
        said[0] = time.monotonic()
        if lead:
            out.line(
                f"[TRAIN] epoch {record.epoch:>3}/{epochs}  loss {record.loss:.4f}  "
                f"test accuracy {record.test_accuracy:.2%}  "
                f"{record.images_per_second:,.0f} images/s  epoch {record.epoch_seconds:.1f} s  "
                f"elapsed {record.elapsed_seconds:.1f} s"
            )
        raise_if_interrupted()  # a signal whose exception was lost: not one epoch more

    def progress(epoch: int, done: int, steps: int) -> None:
        # an epoch can take a minute on a CPU: say where it is every TRAIN_PROGRESS_SECONDS
        now = time.monotonic()
        if lead and now - said[0] >= TRAIN_PROGRESS_SECONDS and done < steps:
            said[0] = now
            out.line(f"[TRAIN] {done / steps:.0%} of epoch {epoch}/{epochs}")

    mode_said: list[str] = []

    def say_step_mode(mode: str) -> None:  # before the first epoch's line, not after the last
        mode_said.append(mode)
        if lead:
            out.line(f"[TRAIN] training step: {mode}")

    def stop_for_scheduler(epoch: int) -> None:
        if request.checkpoint_exit_code is not None:
            if lead:
                out.line(
                    f"[TRAIN] checkpoint at epoch {epoch} written; exiting "
                    f"{request.checkpoint_exit_code} so the scheduler saves it and restarts the job"
                )
            raise _SchedulerStop

    try:
        with interrupts():
            outcome = train_mnist(
                dataset,
                config,
                run_device,
                checkpoint=CheckpointPlan(checkpoint, request.checkpoint_every)
                if checkpoint
                else None,
                on_epoch=show,
                after_checkpoint=stop_for_scheduler,
                on_step=progress,
                on_step_mode=say_step_mode,
            )
    except _SchedulerStop:
        # every rank stops after the same (complete) checkpoint, and leaves together
        assert request.checkpoint_exit_code is not None, "only --checkpoint-exit-code stops"
        return TrainMnistResult(request.checkpoint_exit_code)
    except (Interrupted, KeyboardInterrupt) as error:
        # SIGTERM (preemption, scancel, an eviction without checkpoint_exit_code) or Ctrl-C: the
        # run is recorded as interrupted, with the epochs a checkpoint kept, never as a verdict
        stopped = error if isinstance(error, Interrupted) else Interrupted(2)
        run = StoppedRun(
            "train-mnist", request.model, "mnist", "TRAIN", run_device.type, started, clock
        )
        code = finish_interrupted(
            stopped, run, environment, request.report_dir, plan.history, out, lead=lead
        )
        raise _LeftEarly(TrainMnistResult(code)) from None
    if lead and not mode_said:  # no epoch ran here (a finished checkpoint): say it now
        out.line(f"[TRAIN] training step: {outcome.step_mode}")
    # Every rank holds the same (all-reduced) accuracy, so every rank reaches the same verdict and
    # exits the same way; only rank 0 writes.
    check = training_check(outcome, config, dataset, plan.target, time.monotonic() - clock)
    if not lead:
        return TrainMnistResult(1 if check.status.is_failure else 0)
    if request.save_model is not None:
        _write_model(request, plan, dataset, outcome, environment)
        out.line(f"[TRAIN] model written to {request.save_model}")
    report = RunReport.completed(
        command="train-mnist",
        level=request.model,
        device_mode=run_device.type,
        started=started,
        monotonic_start=clock,
        checks=[check],
        environment=environment,
    )
    out.line(check_line(check))
    report = finish_run(report, plan.history, plan.drop, request.report_dir, out)
    return TrainMnistResult(report.verdict.exit_code, report)


def _write_model(
    request: TrainMnistRequest,
    plan: _Plan,
    dataset: MnistData,
    outcome: TrainOutcome,
    environment: dict[str, Any],
) -> None:
    """The trained model, with what it was trained from (data, stack, seed), atomically."""
    from gpuaccept import __version__
    from gpuaccept.mnist.checkpoint import save_model
    from gpuaccept.record.environment import stack_sha256

    assert request.save_model is not None, "written only when asked for"
    save_model(
        request.save_model,
        outcome.model.state_dict(),
        {
            "model": plan.recipe.model,
            "epoch": outcome.records[-1].epoch,
            "test_accuracy": outcome.final_accuracy,
            "seed": request.seed,
            "data_sha256": dataset.sha256,
            "environment_sha256": stack_sha256(environment),
            "gpuaccept_version": __version__,
        },
    )
