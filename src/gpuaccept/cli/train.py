"""`gpuaccept train`: real training workloads used as acceptance (MNIST)."""

from __future__ import annotations

import math
import os
import time
from datetime import UTC, datetime, timedelta
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
from gpuaccept.cli.train_llm import llm
from gpuaccept.errors import InputError, Interrupted
from gpuaccept.interrupts import raise_if_interrupted

if TYPE_CHECKING:
    import torch

    from gpuaccept.mnist.data import MnistData
    from gpuaccept.mnist.recipes import Recipe
    from gpuaccept.mnist.train import EpochRecord
    from gpuaccept.store.history import HistoryLocation

TRAIN_PROGRESS_SECONDS = 10.0

app = typer.Typer(
    rich_markup_mode=None,
    help="Training workloads: a real PyTorch job as acceptance.",
    no_args_is_help=True,
)

# Where `--data` looks when it is not given: what an HTCondor job transfers in, then a folder.
DEFAULT_DATA = (Path("MNIST_data.tar.gz"), Path("data"))
_RESERVED_EXIT_CODES = range(0, 4)  # gpuaccept's own: 0 pass, 1 gate, 2 input, 3 environment


def _target_fraction(value: float | None) -> float | None:
    """--target-accuracy as a fraction: 0.99 and 99 both mean 99%."""
    if value is None:
        return None
    if not 0 < value <= 100:
        raise InputError(f"--target-accuracy must be in (0, 1] or (1, 100] percent (got {value:g})")
    return value if value <= 1 else value / 100


def _default_data() -> Path:
    for candidate in DEFAULT_DATA:
        if candidate.exists():
            return candidate
    raise InputError(
        "no MNIST data: pass --data with a directory or MNIST_data.tar.gz "
        f"(looked for ./{DEFAULT_DATA[0]} and ./{DEFAULT_DATA[1]}/)"
    )


def _data_files(path: Path) -> list[Path]:
    """The data path and, for a directory, the files in it (MNIST/raw/ included): what an output
    must not replace. Bounded, so a huge directory costs little."""
    found = [path]
    if path.is_dir():
        for depth in ("*", "*/*", "*/*/*"):
            found += [p for p in sorted(path.glob(depth))[:1000] if p.is_file()]
    return found


def _check_output(path: Path | None, flag: str) -> None:
    """Refuse before training, not after it, when an output cannot be written."""
    from gpuaccept.output_files import check_output_file

    if path is not None:
        check_output_file(path, flag)


@app.command("mnist")
def mnist(
    data: Path | None = typer.Option(
        None,
        "--data",
        help="MNIST as a directory (flat or MNIST/raw/, gzipped or not) or MNIST_data.tar.gz. "
        "Default: ./MNIST_data.tar.gz, else ./data/.",
    ),
    model: str = typer.Option(
        "fast",
        "--model",
        metavar="[fast|lenet]",
        help="fast (default recipe) or lenet (the seed's).",
    ),
    epochs: int = typer.Option(20, "--epochs", min=1, help="Number of training epochs."),
    batch_size: int | None = typer.Option(
        None, "--batch-size", min=1, help="Global batch size (default: the recipe's)."
    ),
    learning_rate: float | None = typer.Option(
        None, "--lr", min=0, metavar="RATE", help="Peak learning rate (default: the recipe's)."
    ),
    seed: int = typer.Option(
        0,
        "--seed",
        min=0,
        max=2**32 - 1,
        metavar="N",
        help="Seed (0 to 2^32-1): the same seed gives the same model.",
    ),
    device: str = typer.Option(
        "auto", "--device", metavar="[auto|cuda|cpu]", help="auto, cuda or cpu."
    ),
    precision: str = typer.Option(
        "auto",
        "--precision",
        metavar="[auto|bf16|fp32]",
        help="auto (bf16 on a GPU that has it, else fp32), bf16 or fp32.",
    ),
    target_accuracy: float | None = typer.Option(
        None,
        "--target-accuracy",
        metavar="FRACTION",
        help="Exit 1 when the final test accuracy is below this (0.99 or 99 both mean 99%).",
    ),
    save_model: Path | None = typer.Option(
        None, "--save-model", help="Write the trained model and its metadata here (atomically)."
    ),
    checkpoint: Path | None = typer.Option(
        None,
        "--checkpoint",
        help="Checkpoint file: resumed from when it exists, rewritten every --checkpoint-every.",
    ),
    checkpoint_every: int = typer.Option(
        1, "--checkpoint-every", min=1, help="Epochs between checkpoints."
    ),
    checkpoint_exit_code: int | None = typer.Option(
        None,
        "--checkpoint-exit-code",
        min=4,
        max=255,
        help="Exit with this code after each checkpoint but the last (HTCondor's "
        "checkpoint_exit_code: the job is restarted and resumes).",
    ),
    report_dir: Path | None = typer.Option(
        None, "--report-dir", help="Write the JSON report (with environment capture) here."
    ),
    scratch: Path | None = typer.Option(
        None,
        "--scratch",
        help="Where a tarball is extracted (default: $_CONDOR_SCRATCH_DIR, else the temp dir).",
    ),
    history: str | None = HISTORY,
    no_history: bool = NO_HISTORY,
    drop_tolerance: float | None = DROP_TOLERANCE,
    fail_on_drop: bool = FAIL_ON_DROP,
) -> None:
    """Train an MNIST CNN with the data on the device; gate on test accuracy.

    Under torchrun every rank trains its slice of each batch (DDP); rank 0 prints and writes.
    Exit 0: trained (and target reached); 1: below --target-accuracy; 2: bad input.
    """
    from gpuaccept.mnist.recipes import RECIPES

    if model not in RECIPES:
        raise InputError(f"--model must be one of {', '.join(RECIPES)} (got {model!r})")
    if precision not in ("auto", "bf16", "fp32"):
        raise InputError(f"--precision must be auto, bf16 or fp32 (got {precision!r})")
    if learning_rate is not None and not math.isfinite(learning_rate):
        raise InputError(f"--lr must be a finite number (got {learning_rate})")
    if checkpoint_exit_code is not None and checkpoint is None:
        raise InputError("--checkpoint-exit-code needs --checkpoint")
    target = _target_fraction(target_accuracy)
    drop = drop_policy(drop_tolerance, fail_on_drop)
    data_path = data if data is not None else _default_data()
    _check_output(save_model, "--save-model")
    _check_output(checkpoint, "--checkpoint")
    from gpuaccept.cli.recording import history_path as recorded_in
    from gpuaccept.output_files import refuse_collisions

    # the checkpoint is read and rewritten: an output; the data, every file of it, an input
    refuse_collisions(
        {
            "--history": recorded_in(history, no_history),
            "--save-model": save_model,
            "--checkpoint": checkpoint,
        },
        {
            f"--data {path}" if path != data_path else "--data": path
            for path in _data_files(data_path)
        },
    )
    if report_dir is not None:
        from gpuaccept.output_files import check_output_directory

        check_output_directory(report_dir, "--report-dir")
    history_path = history_target(history, no_history)
    if scratch is None and os.environ.get("_CONDOR_SCRATCH_DIR"):
        scratch = Path(os.environ["_CONDOR_SCRATCH_DIR"])
    # The data before torch: a wrong tarball or a truncated file is refused in a fraction of a
    # second, not after seconds of importing torch (more on a GPU node).
    from gpuaccept.mnist.data import load_mnist

    load_started = time.monotonic()
    from gpuaccept.cli.signals import interrupts_as_exceptions

    # a signal while a tarball is extracted ends the load through its cleanup: nothing of the
    # extraction stays in --scratch (it is exit 130/143 with one line; no run had started)
    with interrupts_as_exceptions():
        dataset = load_mnist(data_path, scratch)
    load_seconds = time.monotonic() - load_started

    import dataclasses

    import torch

    from gpuaccept.distributed.torchrun import torchrun_process_group

    recipe = RECIPES[model]
    if batch_size is not None:
        recipe = dataclasses.replace(recipe, batch_size=batch_size)
    if learning_rate is not None:
        recipe = dataclasses.replace(recipe, learning_rate=learning_rate)
    with torchrun_process_group(device) as (run_device, rank, world):
        _train_and_report(
            recipe_name=model,
            recipe=recipe,
            dataset=dataset,
            load_seconds=load_seconds,
            run_device=run_device,
            rank=rank,
            world=world,
            epochs=epochs,
            seed=seed,
            bf16=precision == "bf16"
            or (
                precision == "auto" and run_device.type == "cuda" and torch.cuda.is_bf16_supported()
            ),
            target=target,
            save_model=save_model,
            checkpoint=checkpoint,
            checkpoint_every=checkpoint_every,
            checkpoint_exit_code=checkpoint_exit_code,
            report_dir=report_dir,
            history=history_path,
            drop=drop,
        )


def _train_and_report(
    *,
    recipe_name: str,
    recipe: Recipe,
    dataset: MnistData,
    load_seconds: float,
    run_device: torch.device,
    rank: int,
    world: int,
    epochs: int,
    seed: int,
    bf16: bool,
    target: float | None,
    save_model: Path | None,
    checkpoint: Path | None,
    checkpoint_every: int,
    checkpoint_exit_code: int | None,
    report_dir: Path | None,
    history: HistoryLocation | None,
    drop: DropPolicy,
) -> None:
    from gpuaccept import __version__
    from gpuaccept.mnist.checkpoint import save_model as write_model
    from gpuaccept.mnist.result import training_check
    from gpuaccept.mnist.train import CheckpointPlan, TrainConfig, train_mnist
    from gpuaccept.record.environment import capture_environment, stack_sha256
    from gpuaccept.report.console import check_line
    from gpuaccept.results import RunReport

    lead = rank == 0
    # the run's duration counts loading the data, as it did when loading came first here
    started = datetime.now(UTC) - timedelta(seconds=load_seconds)
    clock = time.monotonic() - load_seconds
    config = TrainConfig(recipe=recipe, epochs=epochs, seed=seed, bf16=bf16)
    environment = capture_environment() if lead else {}
    if lead:
        typer.echo(
            f"[TRAIN] mnist --model {recipe_name}: {len(dataset.train_labels)} train / "
            f"{len(dataset.test_labels)} test images from {dataset.source}; {run_device}"
            f"{f' x {world} ranks' if world > 1 else ''}, {'bf16' if bf16 else 'fp32'}, "
            f"batch {recipe.batch_size}, seed {seed}, {epochs} epoch{'' if epochs == 1 else 's'}"
        )
        if checkpoint is not None and checkpoint.exists():
            typer.echo(f"[TRAIN] resuming from {checkpoint}")

    said = [time.monotonic()]  # when the log last heard of this run (an epoch or a step)

    def show(record: EpochRecord) -> None:
        said[0] = time.monotonic()
        if lead:
            typer.echo(
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
            typer.echo(f"[TRAIN] {done / steps:.0%} of epoch {epoch}/{epochs}")

    mode_said: list[str] = []

    def say_step_mode(mode: str) -> None:  # before the first epoch's line, not after the last
        mode_said.append(mode)
        if lead:
            typer.echo(f"[TRAIN] training step: {mode}")

    def stop_for_scheduler(epoch: int) -> None:
        if checkpoint_exit_code is not None:
            if lead:
                typer.echo(
                    f"[TRAIN] checkpoint at epoch {epoch} written; exiting {checkpoint_exit_code} "
                    f"so the scheduler saves it and restarts the job"
                )
            raise typer.Exit(checkpoint_exit_code)

    from gpuaccept.cli.signals import interrupts_as_exceptions

    try:
        with interrupts_as_exceptions():
            outcome = train_mnist(
                dataset,
                config,
                run_device,
                checkpoint=CheckpointPlan(checkpoint, checkpoint_every) if checkpoint else None,
                on_epoch=show,
                after_checkpoint=stop_for_scheduler,
                on_step=progress,
                on_step_mode=say_step_mode,
            )
    except (Interrupted, KeyboardInterrupt) as error:
        # SIGTERM (preemption, scancel, an eviction without checkpoint_exit_code) or Ctrl-C: the
        # run is recorded as interrupted, with the epochs a checkpoint kept, never as a verdict
        stopped = error if isinstance(error, Interrupted) else Interrupted(2)
        run = StoppedRun(
            "train-mnist", recipe_name, "mnist", "TRAIN", run_device.type, started, clock
        )
        finish_interrupted(stopped, run, environment, report_dir, history, lead=lead)
    if lead and not mode_said:  # no epoch ran here (a finished checkpoint): say it now
        typer.echo(f"[TRAIN] training step: {outcome.step_mode}")
    # Every rank holds the same (all-reduced) accuracy, so every rank reaches the same verdict and
    # exits the same way; only rank 0 writes.
    check = training_check(outcome, config, dataset, target, time.monotonic() - clock)
    if not lead:
        if check.status.is_failure:
            raise typer.Exit(1)
        return
    if save_model is not None:
        final = outcome.records[-1]
        write_model(
            save_model,
            outcome.model.state_dict(),
            {
                "model": recipe.model,
                "epoch": final.epoch,
                "test_accuracy": outcome.final_accuracy,
                "seed": seed,
                "data_sha256": dataset.sha256,
                "environment_sha256": stack_sha256(environment),
                "gpuaccept_version": __version__,
            },
        )
        typer.echo(f"[TRAIN] model written to {save_model}")
    report = RunReport.completed(
        command="train-mnist",
        level=recipe_name,
        device_mode=run_device.type,
        started=started,
        monotonic_start=clock,
        checks=[check],
        environment=environment,
    )
    typer.echo(check_line(check))
    finish_run(report, history, drop, report_dir)


app.command("llm")(llm)
