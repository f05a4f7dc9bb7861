"""`gpuaccept train`: real training workloads used as acceptance (MNIST, and the LLM in
cli/train_llm.py). Options only: the run is gpuaccept.commands.train_mnist's."""

from __future__ import annotations

import typer

from gpuaccept.cli.declared import command_of
from gpuaccept.cli.train_llm import llm
from gpuaccept.commands.train_mnist import TrainMnistRequest

app = typer.Typer(
    rich_markup_mode=None,
    help="Training workloads: a real PyTorch job as acceptance.",
    no_args_is_help=True,
)


@app.command("mnist")
@command_of(TrainMnistRequest)
def mnist(request: TrainMnistRequest) -> None:
    """Train an MNIST CNN with the data on the device; gate on test accuracy.

    Under torchrun every rank trains its slice of each batch (DDP); rank 0 prints and writes.
    Exit 0: trained (and target reached); 1: below --target-accuracy; 2: bad input.
    """
    from gpuaccept.cli.render import CONSOLE
    from gpuaccept.cli.signals import interrupts_as_exceptions
    from gpuaccept.commands.train_mnist import run

    # signals become Interrupted around the data's loading and the training (the edge's policy)
    result = run(request, CONSOLE, interrupts_as_exceptions)
    if result.exit_code:
        raise typer.Exit(result.exit_code)


app.command("llm")(llm)
