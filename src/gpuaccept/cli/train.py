"""`gpuaccept train`: real training workloads used as acceptance (MNIST, and the LLM in
cli/train_llm.py). Options only: the run is gpuaccept.commands.train_mnist's."""

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
from gpuaccept.cli.train_llm import llm

app = typer.Typer(
    rich_markup_mode=None,
    help="Training workloads: a real PyTorch job as acceptance.",
    no_args_is_help=True,
)


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
    device: DeviceChoice = device_option("auto, cuda or cpu."),
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
    report_dir: Path | None = TRAIN_REPORT_DIR,
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
    options = dict(locals())  # first: the options as parsed
    from gpuaccept.cli.render import CONSOLE
    from gpuaccept.cli.signals import interrupts_as_exceptions
    from gpuaccept.commands.train_mnist import TrainMnistRequest, run

    request = request_from(TrainMnistRequest, options)
    # signals become Interrupted around the data's loading and the training (the edge's policy)
    result = run(request, CONSOLE, interrupts_as_exceptions)
    if result.exit_code:
        raise typer.Exit(result.exit_code)


app.command("llm")(llm)
