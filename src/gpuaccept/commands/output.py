"""Where a command's lines go. The library says what happened; the edge decides how it looks.

The CLI's implementation (cli/render.py) writes lines to stdout and stderr, shows the suite's
live progress and the summary table on a terminal; `Collected` keeps them for a test or a caller
that renders them its own way.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from gpuaccept.results import CheckResult, RunReport
    from gpuaccept.suite.runner import Observer
    from gpuaccept.suite.selection import CheckSpec


class Output(Protocol):
    """A command's lines, in the order they happen."""

    def line(self, text: str) -> None:
        """A line of the run's log (stdout)."""

    def error(self, text: str) -> None:
        """A line about something that went wrong beside the run (stderr)."""

    def summary(self, report: RunReport) -> None:
        """The run's table of checks: a table on a terminal, plain ASCII in a job log."""

    def suite_progress(self) -> AbstractContextManager[Observer]:
        """What the suite shows while its checks run."""


@dataclass
class Collected:
    """Every line kept in order, with the stream it was for: ("out" | "err" | "summary", text)."""

    lines: list[tuple[str, str]] = field(default_factory=list)

    def line(self, text: str) -> None:
        self.lines.append(("out", text))

    def error(self, text: str) -> None:
        self.lines.append(("err", text))

    def summary(self, report: RunReport) -> None:
        from gpuaccept.report.console import summary_text

        self.lines.append(("summary", summary_text(report)))

    @contextmanager
    def suite_progress(self) -> Iterator[Observer]:
        yield _CollectedProgress(self)

    def text(self, stream: str = "out") -> str:
        return "".join(text + "\n" for kind, text in self.lines if kind == stream)


@dataclass
class _CollectedProgress:
    into: Collected

    def started(self, spec: CheckSpec, devices: list[str]) -> None:
        self.into.line(f"[RUN] {spec.name}" + (f" on {', '.join(devices)}" if devices else ""))

    def finished(self, result: CheckResult) -> None:
        from gpuaccept.report.console import check_line

        self.into.line(check_line(result))

    def note(self, text: str) -> None:
        self.into.line(f"[RUN] {text}")
