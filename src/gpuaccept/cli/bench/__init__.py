"""`gpuaccept bench`: full benchmark sweeps (matmul, membw, transfer, collectives, nbody), one
module per command; `gpuaccept bench` alone runs each with its default sweep. What they do is
gpuaccept.commands.bench."""

from __future__ import annotations

import typer

from gpuaccept.cli.bench import collectives, matmul, membw, nbody, transfer
from gpuaccept.cli.bench.common import run_and_exit
from gpuaccept.cli.declared import command_of
from gpuaccept.commands.bench import every
from gpuaccept.commands.bench.common import BenchRequest
from gpuaccept.errors import InputError

app = typer.Typer(
    rich_markup_mode=None,
    help="Benchmarks that read like nccl-tests, mamf-finder, STREAM and cuda-samples nbody.",
    invoke_without_command=True,
)


@app.callback()
@command_of(BenchRequest, context=True)
def bench(request: BenchRequest, ctx: typer.Context) -> None:
    """Run every benchmark with its default sweep (or name one: see the commands below)."""
    if ctx.invoked_subcommand is not None:
        _refuse_options_before(ctx, ctx.invoked_subcommand)
        return
    run_and_exit(every.run, request)


def _refuse_options_before(ctx: typer.Context, benchmark: str) -> None:
    """`bench --device cuda matmul` gave the options to `bench`, which then ran matmul with its
    own defaults (on the CPU, into the default history, no JSON) and exited 0: refused, naming
    where the option goes."""
    for param in ctx.command.params:
        source = ctx.get_parameter_source(param.name or "")
        if source is not None and source.name == "COMMANDLINE":
            flag = param.opts[0]
            raise InputError(
                f"{flag} before {benchmark!r} is `bench`'s own (for every benchmark at once); "
                f"for {benchmark} put it after the name: gpuaccept bench {benchmark} {flag} ..."
            )


app.command("matmul")(matmul.matmul)
app.command("membw")(membw.membw)
app.command("transfer")(transfer.transfer)
app.command("nbody")(nbody.nbody)
app.command("collectives")(collectives.collectives)
