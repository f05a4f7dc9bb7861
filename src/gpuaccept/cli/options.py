"""Option callbacks shared by the commands."""

from __future__ import annotations

import math

import typer


def finite_number(value: float | None) -> float | None:
    """Refuse inf and NaN (click's min= lets them through): an infinite floor fails everything,
    a NaN one nothing."""
    if value is not None and not math.isfinite(value):
        raise typer.BadParameter(f"must be a finite number (got {value})")
    return value
