"""Resolve a `gpuaccept ...` argument list to the CLI command it names, without running it."""

from __future__ import annotations

from typing import Any

import typer.main

from gpuaccept.cli import app


def resolve_cli(args: list[str]) -> tuple[list[str], dict[str, Any]]:
    """Parse `args` exactly as the CLI would; return the command path and its parsed options.

    Raises the CLI parser's own usage error for an unknown command, option or bad value.
    """
    command: Any = typer.main.get_command(app)
    context = command.make_context("gpuaccept", list(args))
    path = ["gpuaccept"]
    while hasattr(command, "resolve_command"):
        rest = [*getattr(context, "_protected_args", []), *context.args]
        if not rest:
            break
        name, command, rest = command.resolve_command(context, rest)
        path.append(name)
        context = command.make_context(name, rest, parent=context)
    return path, dict(context.params)
