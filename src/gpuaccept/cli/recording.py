"""Temporary: the end-of-run calls on the console, for commands not yet moved to commands/.

The library half lives in gpuaccept.commands.recording; the shared options in cli.options.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

import typer

from gpuaccept.cli.options import DROP_TOLERANCE, FAIL_ON_DROP, HISTORY, NO_HISTORY
from gpuaccept.cli.render import CONSOLE
from gpuaccept.commands import recording as library
from gpuaccept.commands.recording import DropPolicy, StoppedRun, drop_policy, history_path

if TYPE_CHECKING:
    from gpuaccept.actions import ActionRules
    from gpuaccept.errors import Interrupted
    from gpuaccept.results import RunReport
    from gpuaccept.store.history import HistoryLocation

__all__ = [
    "DROP_TOLERANCE",
    "FAIL_ON_DROP",
    "HISTORY",
    "NO_HISTORY",
    "DropPolicy",
    "StoppedRun",
    "compared_with_history",
    "drop_policy",
    "finish_interrupted",
    "finish_run",
    "history_path",
    "history_target",
    "record_run",
]


def compared_with_history(
    report: RunReport,
    target: HistoryLocation | None,
    policy: DropPolicy,
    rules: ActionRules | None = None,
) -> RunReport:
    return library.compared_with_history(report, target, policy, CONSOLE, rules)


def history_target(path: str | Path | None, disabled: bool) -> HistoryLocation | None:
    return library.history_target(path, disabled, CONSOLE)


def record_run(report: RunReport, target: HistoryLocation | None) -> None:
    library.record_run(report, target, CONSOLE)


def finish_run(
    report: RunReport, history: HistoryLocation | None, drop: DropPolicy, report_dir: Path | None
) -> None:
    report = library.finish_run(report, history, drop, report_dir, CONSOLE)
    if report.verdict.exit_code:
        raise typer.Exit(report.verdict.exit_code)


def finish_interrupted(
    stopped: Interrupted,
    run: StoppedRun,
    environment: dict[str, Any],
    report_dir: Path | None,
    history: HistoryLocation | None,
    *,
    lead: bool = True,
) -> NoReturn:
    raise typer.Exit(
        library.finish_interrupted(
            stopped, run, environment, report_dir, history, CONSOLE, lead=lead
        )
    )
