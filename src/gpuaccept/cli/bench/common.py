"""What every `gpuaccept bench` command shares on the command line: the progress a sweep shows,
and the exit (their options are their requests' fields, commands.bench).

What the benchmarks do (planning, refusals, measuring, the report) is gpuaccept.commands.bench.
"""

from __future__ import annotations

import contextlib
import sys
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import typer

if TYPE_CHECKING:
    from gpuaccept.commands.bench.common import BenchResult, ProgressBar
    from gpuaccept.commands.output import Output

LOG_PROGRESS_SECONDS = 10.0


@contextlib.contextmanager
def progress_bar(total: int, label: str) -> Iterator[Callable[[], None]]:
    """An advance() for each finished step: a Rich bar on a terminal; in a job log or a pipe, a
    short line at most every LOG_PROGRESS_SECONDS, so a long sweep is never silent and a short
    one adds nothing between its header and its table."""
    if not sys.stdout.isatty():
        done, started, said = [0], time.monotonic(), [time.monotonic()]
        name = label.split(":", 1)[0]

        def advance() -> None:
            done[0] += 1
            now = time.monotonic()
            if now - said[0] >= LOG_PROGRESS_SECONDS and done[0] < total:
                said[0] = now
                typer.echo(f"[BENCH] {name}: {done[0]} of {total} steps, {now - started:.0f} s")

        yield advance
        return
    from rich.progress import Progress

    with Progress(transient=True) as bar:
        task = bar.add_task(label, total=total)
        yield lambda: bar.advance(task)


def run_and_exit(run: Callable[[Any, Output, ProgressBar], BenchResult], request: Any) -> None:
    """Every benchmark's body after its request: run it on the console, interruptible, with the
    progress bar, and exit with its verdict (0 returns normally)."""
    from gpuaccept.cli.render import CONSOLE
    from gpuaccept.cli.signals import interrupts_as_exceptions

    with interrupts_as_exceptions():
        result = run(request, CONSOLE, progress_bar)
    if result.exit_code:
        raise typer.Exit(result.exit_code)
