"""What a person sees while a run goes on: the running step with its elapsed time on a terminal,
a plain line per step in a job log (where a live bar would only be noise)."""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

import typer

if TYPE_CHECKING:
    from rich.console import Console
    from rich.live import Live
    from rich.text import Text

    from gpuaccept.results import CheckResult
    from gpuaccept.suite.selection import CheckSpec


def _devices(devices: list[str]) -> str:
    if len(devices) <= 3:
        return ", ".join(devices)
    return f"{devices[0]}..{devices[-1]} ({len(devices)} devices)"


class _Running:
    """A one-line renderable: what runs now and for how long (Rich re-renders it 4x a second)."""

    def __init__(self) -> None:
        self.what = ""
        self.since = time.monotonic()

    def __rich__(self) -> Text:
        from rich.text import Text

        if not self.what:
            return Text("")
        return Text.assemble(
            ("running ", "dim"), (self.what, "bold"), f"  {time.monotonic() - self.since:.1f} s"
        )


class SuiteDisplay:
    """The suite's observer: lines for finished checks, and a live 'running' line on a TTY."""

    def __init__(self, console: Console | None, live: Live | None, running: _Running) -> None:
        self._console = console
        self._live = live
        self._running = running

    def started(self, spec: CheckSpec, devices: list[str]) -> None:
        what = f"{spec.name} on {_devices(devices)}" if devices else spec.name
        if self._live is None:
            typer.echo(f"[RUN] {what}")
            return
        self._running.what, self._running.since = what, time.monotonic()

    def note(self, text: str) -> None:
        if self._console is None:
            typer.echo(f"[RUN] {text}")
        else:
            self._console.print(f"[RUN] {text}", markup=False, highlight=False)

    def finished(self, result: CheckResult) -> None:
        from gpuaccept.report.console import check_line

        self._running.what = ""
        if self._console is None:
            typer.echo(check_line(result))
        else:
            self._console.print(check_line(result), markup=False, highlight=False)


@contextmanager
def suite_display() -> Iterator[SuiteDisplay]:
    """A live display on a terminal; plain lines otherwise (job logs, pipes, tests)."""
    running = _Running()
    if not sys.stdout.isatty():
        yield SuiteDisplay(None, None, running)
        return
    from rich.console import Console
    from rich.live import Live

    console = Console()
    # the workers boot before the first check: say so rather than show nothing for seconds
    running.what, running.since = (
        "starting the warm workers (torch, device context)",
        time.monotonic(),
    )
    with Live(running, console=console, refresh_per_second=4, transient=True) as live:
        yield SuiteDisplay(console, live, running)
