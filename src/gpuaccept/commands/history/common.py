"""What the `history` subcommands share: the commands a history records runs of, a run id as a
user types it, a history opened for reading, and the plain aligned table they print."""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING

from gpuaccept.commands.options import opt
from gpuaccept.errors import InputError

# the options every `history` command shares
HISTORY = opt(
    "--history",
    "FILE|postgresql://...",
    "History: an SQLite file or a PostgreSQL URI (default: $GPUACCEPT_HISTORY, else "
    "~/.local/share/gpuaccept/history.sqlite).",
)
NODE = opt("--node", "NODE", "Only this node (its name as recorded).")
AS_JSON = opt("--json", text="Print it as JSON on stdout (for scripts).")
COMMAND = opt("--command", "[accept|bench|train-mnist|burnin]", "Only runs of this command.")

if TYPE_CHECKING:
    from gpuaccept.commands.output import Output
    from gpuaccept.store.history import History

COMMANDS = ("accept", "bench", "train-mnist", "burnin")  # what the history records runs of


def known_command(command: str | None) -> None:
    """Refuse a --command the history records no runs of (it would only say "no runs")."""
    if command is not None and command not in COMMANDS:
        raise InputError(f"--command must be one of {', '.join(COMMANDS)} (got {command!r})")


def run_id(text: str) -> int:
    """A run id as typed (`history show 7`). Read where the run is looked up, after the history
    is opened: a history that cannot be opened is what a user hears of first."""
    # ASCII digits only ('²'.isdigit() is true), and no more than SQLite's 64-bit integers hold
    if not re.fullmatch(r"[0-9]{1,18}", text):
        raise InputError(f"run id must be a number from `gpuaccept history list` (got {text!r})")
    return int(text)


@contextmanager
def opened(path: str | None, *, create: bool = False) -> Iterator[History]:
    """The history --history names (else the default), open for the length of the block."""
    from gpuaccept.store.history import History, history_location

    with History.open(history_location(path), create=create) as history:
        yield history


def table_lines(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    """Plain aligned columns: greppable in job logs, like the bench tables."""
    widths = [max(len(str(cell)) for cell in column) for column in zip(header, *rows, strict=True)]
    return [
        "  ".join(str(c).ljust(w) for c, w in zip(line, widths, strict=True)).rstrip()
        for line in [header, ["-" * w for w in widths], *rows]
    ]


def write_table(out: Output, header: Sequence[str], rows: Sequence[Sequence[str]]) -> None:
    for line in table_lines(header, rows):
        out.line(line)
