"""`gpuaccept bench`: full benchmark sweeps (matmul, membw, transfer, collectives, nbody)."""

from __future__ import annotations

import typer

from gpuaccept.errors import NotBuiltError

app = typer.Typer(
    help="Benchmarks that read like nccl-tests, mamf-finder and STREAM.",
    invoke_without_command=True,
)


@app.callback()
def bench(ctx: typer.Context) -> None:
    """Run the benchmark sweeps (not built yet: issue #5)."""
    if ctx.invoked_subcommand is None:
        raise NotBuiltError("`gpuaccept bench` is not built yet (tracked in issue #5)")
