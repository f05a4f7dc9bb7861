"""What every `gpuaccept bench` command shares on the command line: its own options, the sweep
options with each benchmark's defaults in their help, the progress a sweep shows, and the exit.

What the benchmarks do (planning, refusals, measuring, the report) is gpuaccept.commands.bench.
"""

from __future__ import annotations

import contextlib
import sys
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import typer

from gpuaccept.cli.options import device_option
from gpuaccept.commands.bench.common import DEFAULT_SIZES

if TYPE_CHECKING:
    from gpuaccept.commands.bench.common import BenchResult, ProgressBar
    from gpuaccept.commands.output import Output

DEVICE = device_option("auto (GPU when usable), cuda or cpu.")
JSON_OUT = typer.Option(None, "--json", help="Write the report (results model) to this file.")
CSV_OUT = typer.Option(None, "--csv", help="Write every table row to this CSV file.")
WARMUP = typer.Option(None, "--warmup", "-w", min=0, help="Warm-up iterations (default by device).")
ITERATIONS = typer.Option(
    None, "--iterations", "-n", min=1, help="Timed iterations (default by device)."
)

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


def _defaults(benchmark: str, part: int) -> str:
    gpu, cpu = (DEFAULT_SIZES[benchmark][kind][part] for kind in ("cuda", "cpu"))
    return f"default {gpu} on a GPU, {cpu} on the CPU"


def sweep_options(benchmark: str) -> tuple[Any, Any, Any]:
    """-b/-e/-f for one benchmark's sweep, as nccl-tests takes them, with its defaults shown."""
    return (
        typer.Option(
            None,
            "-b",
            "--begin",
            metavar="SIZE",
            help=f"Smallest size: 8, 64K, 256M, 1G ({_defaults(benchmark, 0)}).",
        ),
        typer.Option(
            None, "-e", "--end", metavar="SIZE", help=f"Largest size ({_defaults(benchmark, 1)})."
        ),
        typer.Option(
            None,
            "-f",
            "--factor",
            metavar="N",
            help=f"Multiply the size by this each step ({_defaults(benchmark, 2)}).",
        ),
    )
