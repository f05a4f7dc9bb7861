"""Trend charts (PNG) of figures over time, drawn with matplotlib's object API (no pyplot state)."""

from __future__ import annotations

import io
from collections.abc import Mapping, Sequence
from datetime import datetime


def trend_chart_png(
    title: str, unit: str, series: Mapping[str, Sequence[tuple[datetime, float]]]
) -> bytes:
    """One line per series (a node's GPU), time on x, the figure on y; PNG bytes."""
    from matplotlib.dates import AutoDateLocator, ConciseDateFormatter, date2num
    from matplotlib.figure import Figure

    figure = Figure(figsize=(5.6, 2.8), dpi=100, layout="constrained")
    axes = figure.add_subplot()
    for label, points in sorted(series.items()):
        ordered = sorted(points)
        axes.plot(
            date2num([when for when, _ in ordered]),
            [value for _, value in ordered],
            marker="o",
            markersize=4,
            linewidth=1.5,
            label=label,
        )
    locator = AutoDateLocator()
    axes.xaxis.set_major_locator(locator)
    axes.xaxis.set_major_formatter(ConciseDateFormatter(locator))
    axes.set_title(title, fontsize=10)
    axes.set_ylabel(unit)
    axes.grid(True, alpha=0.3)
    if len(series) > 1:
        axes.legend(fontsize=7, loc="best")
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png")
    return buffer.getvalue()
