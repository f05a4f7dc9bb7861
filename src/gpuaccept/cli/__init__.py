"""The `gpuaccept` command line: assembles one Typer app from one module per command group.

Only Typer is imported here; every command imports the library (and torch) inside its body,
so `gpuaccept --help` and `gpuaccept --version` stay fast and torch-free.
"""

from __future__ import annotations

from typing import Any

import typer
import typer.core

from gpuaccept import __version__
from gpuaccept.cli import accept, bench, env, history, report, train
from gpuaccept.errors import GpuacceptError


class _ErrorMappingGroup(typer.core.TyperGroup):
    """Root group: a library error becomes one line on stderr and the error's exit code."""

    def invoke(self, ctx: Any) -> Any:
        try:
            return super().invoke(ctx)
        except GpuacceptError as error:
            typer.echo(f"gpuaccept: error: {error}", err=True)
            raise typer.Exit(error.exit_code) from None


app = typer.Typer(
    cls=_ErrorMappingGroup,
    name="gpuaccept",
    help="Is this GPU machine fit to run real PyTorch work, and is it as fast as it should be?",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _print_version(value: bool) -> None:
    if value:
        typer.echo(f"gpuaccept {__version__}")
        raise typer.Exit(0)


@app.callback()
def _root(
    version: bool = typer.Option(
        False,
        "--version",
        callback=_print_version,
        is_eager=True,
        help="Print the version and exit.",
    ),
) -> None:
    """Acceptance checks, benchmarks and workloads for GPU nodes and pools.

    Exit codes: 0 pass (warnings allowed), 1 a check or gate failed,
    2 usage or input error, 3 environment error.
    """


app.command("accept")(accept.accept)
app.add_typer(bench.app, name="bench")
app.add_typer(train.app, name="train")
app.command("env")(env.env)
app.add_typer(history.app, name="history")
app.command("report")(report.report)


def main() -> None:
    """Console-script entry point."""
    app(prog_name="gpuaccept")
