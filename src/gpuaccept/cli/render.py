"""The console a command's library call writes through (commands.output.Output): lines to stdout
and stderr, the suite's live progress and the summary table on a terminal, plain text in a log."""

from __future__ import annotations

import sys
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING

import typer

if TYPE_CHECKING:
    from gpuaccept.results import RunReport
    from gpuaccept.suite.runner import Observer


class ConsoleOutput:
    """commands.output.Output on this process's stdout and stderr. `table_on_a_terminal`: burnin's
    is False (its window lines said it as it ran: the table goes to a job log only)."""

    def __init__(self, table_on_a_terminal: bool = True) -> None:
        self.table_on_a_terminal = table_on_a_terminal

    def line(self, text: str) -> None:
        typer.echo(text)

    def error(self, text: str) -> None:
        typer.echo(text, err=True)

    def summary(self, report: RunReport) -> None:
        from gpuaccept.report.console import summary_table, summary_text

        if sys.stdout.isatty():
            if not self.table_on_a_terminal:
                return
            from rich.console import Console

            Console().print(summary_table(report))
        else:  # a job log gets the same table, in plain ASCII
            typer.echo(summary_text(report))

    def suite_progress(self) -> AbstractContextManager[Observer]:
        from gpuaccept.cli.progress import suite_display

        return suite_display()


CONSOLE = ConsoleOutput()
BURNIN_CONSOLE = ConsoleOutput(table_on_a_terminal=False)
