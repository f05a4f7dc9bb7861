"""`gpuaccept train`: real training workloads used as acceptance (MNIST)."""

from __future__ import annotations

from pathlib import Path

import typer

from gpuaccept.errors import NotBuiltError

app = typer.Typer(
    help="Training workloads: a real PyTorch job as acceptance.", no_args_is_help=True
)


@app.command("mnist")
def mnist(
    epochs: int = typer.Option(20, "--epochs", min=1, help="Number of training epochs."),
    save_model: Path | None = typer.Option(
        None, "--save-model", help="Write the trained model here (atomically)."
    ),
) -> None:
    """Train the MNIST CNN (not built yet: issue #4)."""
    raise NotBuiltError("`gpuaccept train mnist` is not built yet (tracked in issue #4)")
