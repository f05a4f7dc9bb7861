"""`gpuaccept accept`: its options are AcceptRequest's fields; the run itself is commands.accept."""

from __future__ import annotations

import contextlib
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING

import typer

from gpuaccept.cli.declared import command_of
from gpuaccept.commands.accept.request import AcceptRequest

if TYPE_CHECKING:
    from gpuaccept.results import RunReport


@command_of(AcceptRequest)
def accept(request: AcceptRequest) -> None:
    """Run the acceptance suite on the GPUs this process was given.

    Exit 0: fit (warnings allowed); 1: a check failed, or nothing could be judged; 2: bad input;
    3: environment error; 130/143: interrupted by SIGINT/SIGTERM (the report is still written).
    """
    from gpuaccept.cli.render import CONSOLE
    from gpuaccept.cli.signals import interrupts_as_exceptions

    json_out: AbstractContextManager[list[RunReport] | None] = contextlib.nullcontext(None)
    if request.as_json:  # first: from the moment the option is parsed, stdout is the report's
        from gpuaccept.cli.accept_json import json_on_stdout

        json_out = json_on_stdout(request.level, request.device)
    with json_out as written:
        from gpuaccept.commands.accept import run

        with interrupts_as_exceptions():
            result = run(request, CONSOLE, written)
        if result.exit_code:  # inside --json's block: its report is printed all the same
            raise typer.Exit(result.exit_code)
