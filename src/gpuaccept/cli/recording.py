"""The --history / --no-history options every run command shares, and recording a finished run."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import typer

if TYPE_CHECKING:
    from gpuaccept.results import RunReport

HISTORY = typer.Option(
    None,
    "--history",
    help="SQLite history to record the run in (default: $GPUACCEPT_HISTORY, else "
    "~/.local/share/gpuaccept/history.sqlite).",
)
NO_HISTORY = typer.Option(False, "--no-history", help="Do not record this run in the history.")


def history_path(path: Path | None, disabled: bool) -> Path | None:
    """The database a run would be recorded in (not opened): for the collision checks."""
    if disabled:
        return None
    from gpuaccept.record.history import default_history_path

    return path or default_history_path()


def history_target(path: Path | None, disabled: bool) -> Path | None:
    """The database the run will be recorded in, opened (and so checked) before the run starts.

    A corrupt or foreign database stops the command here, before minutes of measuring.
    """
    if disabled:
        return None
    from gpuaccept.record.history import History, default_history_path

    target = path or default_history_path()
    with History.open(target) as history:
        history.check_writable()
    return target


def record_run(report: RunReport, target: Path | None) -> None:
    if target is None:
        return
    from gpuaccept.record.history import History

    with History.open(target) as history:
        [(run_id, _)] = history.append([(report, "run")])
    typer.echo(f"[HISTORY] run {run_id} recorded in {target}")
