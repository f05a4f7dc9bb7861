"""Options and option callbacks shared by the commands: each declared here once."""

from __future__ import annotations

import math

import typer


def finite_number(value: float | None) -> float | None:
    """Refuse inf and NaN (click's min= lets them through): an infinite floor fails everything,
    a NaN one nothing."""
    if value is not None and not math.isfinite(value):
        raise typer.BadParameter(f"must be a finite number (got {value})")
    return value


# -- options several commands take, declared once -------------------------------------------

HISTORY = typer.Option(
    None,
    "--history",
    metavar="FILE|postgresql://...",
    help="History to record the run in: an SQLite file or a PostgreSQL URI (default: "
    "$GPUACCEPT_HISTORY, else ~/.local/share/gpuaccept/history.sqlite). A server that cannot "
    "be reached keeps the run in the spool ($GPUACCEPT_SPOOL) for `gpuaccept history push`.",
    rich_help_panel="History",
)
NO_HISTORY = typer.Option(
    False,
    "--no-history",
    help="Do not record this run in the history (nor compare it with the node's past).",
    rich_help_panel="History",
)
DROP_TOLERANCE = typer.Option(
    None,
    "--drop-tolerance",
    metavar="PERCENT",
    show_default="20 on a GPU, 50 on the CPU twins",
    help="Warn when a figure is more than PERCENT worse than the median of this node's last "
    "comparable runs in the history (docs/accept.md, 'Slower than it was').",
    rich_help_panel="History",
)
FAIL_ON_DROP = typer.Option(
    False,
    "--fail-on-drop",
    help="Fail the run (exit 1), not only warn, when a figure dropped past --drop-tolerance.",
    rich_help_panel="History",
)
