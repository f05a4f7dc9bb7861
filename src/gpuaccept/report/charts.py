"""Trend charts (PNG) of figures over time, drawn with matplotlib's object API (no pyplot state).

Honest axes: the y axis starts at zero (a 0.5% wobble looks like one), the time axis spans the
runs with a margin (runs minutes apart are spread over the axis, not a spike in a day-wide one;
runs seconds apart get at least a minute), the run the page is about is marked, the reference
floor is drawn when there is one, and the legend names only what is drawn.
"""

from __future__ import annotations

import io
import math
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

_MIN_SPAN = timedelta(minutes=1)
_MARGIN = 0.08  # of the runs' span, either side


def _finite(value: Any) -> float | None:
    """A plottable number, or None (not a number, a bool, NaN or an infinity)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None


# matplotlib's dates span years 1 to 9999 and pad the axis beyond the data: runs dated outside
# this window (a clock gone wrong, a forged report) are left out of trend charts
_CHARTABLE = (datetime(1971, 1, 1, tzinfo=UTC), datetime(9000, 1, 1, tzinfo=UTC))


def plain(text: str) -> str:
    """`text` as matplotlib draws it literally: a `$` would open mathtext, and a check or device
    name holding `$x^$` would stop the chart (and the page) with a parse error."""
    return text.replace("$", r"\$")


def drawn(draw: Any, *args: Any, **kwargs: Any) -> tuple[bytes | None, str | None]:
    """(the chart's PNG, None), or (None, why) when it cannot be drawn: a figure that cannot be
    drawn is left out with a note, and the page around it always renders."""
    try:
        return draw(*args, **kwargs), None
    except Exception as error:  # matplotlib raises many kinds; none may stop a report
        return None, f"{type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''}"


def chartable(when: datetime) -> bool:
    moment = when if when.tzinfo is not None else when.replace(tzinfo=UTC)
    return _CHARTABLE[0] <= moment <= _CHARTABLE[1]


def time_axis(times: Sequence[datetime]) -> tuple[datetime, datetime]:
    """The time axis for runs at `times`: their span (at least a minute) and a margin each side."""
    start, end = min(times), max(times)
    span = max(end - start, _MIN_SPAN)
    middle = start + (end - start) / 2
    half = span / 2 + span * _MARGIN
    return middle - half, middle + half


def trend_chart_png(
    title: str,
    unit: str,
    series: Mapping[str, Sequence[tuple[datetime, float]]],
    *,
    this_run: datetime | None = None,
    floor: float | None = None,
) -> bytes:
    """One line per series (a node's GPU), time on x, the figure on y; PNG bytes."""
    from matplotlib.dates import AutoDateLocator, ConciseDateFormatter, date2num
    from matplotlib.figure import Figure

    series = {
        label: kept
        for label, points in series.items()
        if (kept := [(when, value) for when, value in points if chartable(when)])
    }
    figure = Figure(figsize=(5.6, 2.8), dpi=100, layout="constrained")
    axes = figure.add_subplot()
    times = [when for points in series.values() for when, _ in points]
    values = [value for points in series.values() for _, value in points]
    starred = False
    for label, points in sorted(series.items()):
        ordered = sorted(points)
        axes.plot(
            date2num([when for when, _ in ordered]),
            [value for _, value in ordered],
            marker="o",
            markersize=4,
            linewidth=1.5,
            label=plain(label),
        )
        mine = [
            (when, value) for when, value in ordered if this_run is not None and when == this_run
        ]
        if mine:
            axes.plot(
                date2num([when for when, _ in mine]),
                [value for _, value in mine],
                linestyle="none",
                marker="*",
                markersize=11,
                color="black",
                label=None if starred else "this run",
            )
            starred = True
    if floor is not None:
        axes.axhline(floor, color="#b3261e", linestyle="--", linewidth=1, label="reference floor")
    if times:
        axes.set_xlim(*(date2num(when) for when in time_axis(times)))
    finite = [v for v in values if v == v] + ([floor] if floor is not None else [])
    if finite and min(finite) >= 0:
        axes.set_ylim(bottom=0, top=max(finite) * 1.1 or 1.0)
    if times:  # no chartable run: an empty axis, no date ticks to pick
        locator = AutoDateLocator(minticks=3, maxticks=6)
        axes.xaxis.set_major_locator(locator)
        axes.xaxis.set_major_formatter(ConciseDateFormatter(locator))
    axes.set_title(plain(title), fontsize=10)
    axes.set_ylabel(plain(unit))
    axes.grid(True, alpha=0.3)
    if len(series) > 1 or floor is not None or starred:
        axes.legend(fontsize=7, loc="lower left")
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png")
    return buffer.getvalue()


def load_chart_png(
    title: str,
    samples: Sequence[Mapping[str, Any]],
    *,
    marked: Sequence[str] = (),
) -> bytes:
    """Power (with its enforced limit) and SM clock over a check's seconds under load; the
    samples that carry one of the `marked` clock-event reasons are flagged in red. PNG bytes."""
    from matplotlib.figure import Figure

    def series(key: str) -> tuple[list[float], list[float]]:
        # a report read back may hold anything a schema allows: a sample without its time, a
        # string, an infinity; such points are left out of the picture (the JSON keeps them)
        pairs = [
            (when, value)
            for s in samples
            if (when := _finite(s.get("seconds"))) is not None
            and (value := _finite(s.get(key))) is not None
        ]
        return [t for t, _ in pairs], [v for _, v in pairs]

    figure = Figure(figsize=(5.6, 2.8), dpi=100, layout="constrained")
    power_axes = figure.add_subplot()
    clock_axes = power_axes.twinx()
    times, power = series("power_w")
    power_axes.plot(times, power, color="#1f6feb", linewidth=1.2, label="power (W)")
    limit_times, limits = series("power_limit_w")
    if limits:
        power_axes.plot(
            limit_times, limits, color="#1f6feb", linestyle="--", linewidth=1, label="power limit"
        )
    clock_times, clocks = series("sm_clock_mhz")
    clock_axes.plot(clock_times, clocks, color="#9a6700", linewidth=1.2, label="SM clock (MHz)")
    flagged = [
        when
        for s in samples
        if (when := _finite(s.get("seconds"))) is not None
        and isinstance(s.get("reasons"), list | tuple)
        and any(reason in s["reasons"] for reason in marked)
    ]
    for when in flagged:
        power_axes.axvline(when, color="#b3261e", alpha=0.25, linewidth=1)
    power_axes.set_ylim(bottom=0, top=max(power + limits + [1.0]) * 1.15)
    clock_axes.set_ylim(bottom=0, top=max([*clocks, 1.0]) * 1.15)
    power_axes.set_xlabel("seconds")
    power_axes.set_ylabel("W")
    clock_axes.set_ylabel("MHz")
    power_axes.set_title(plain(title) + (" (red: slowdown)" if flagged else ""), fontsize=10)
    power_axes.grid(True, alpha=0.3)
    handles = power_axes.get_legend_handles_labels()
    clock_handles = clock_axes.get_legend_handles_labels()
    power_axes.legend(
        handles[0] + clock_handles[0], handles[1] + clock_handles[1], fontsize=7, loc="lower right"
    )
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png")
    return buffer.getvalue()


def series_chart_png(
    title: str,
    unit: str,
    lines: Mapping[str, Sequence[tuple[float, float]]],
    *,
    marked: Sequence[float] = (),
    xlabel: str = "hours of load",
) -> bytes:
    """One line per device over the time of load (a burn-in's windows), y from zero; the
    `marked` times (windows with a failure or an event) as red bands. PNG bytes."""
    from matplotlib.figure import Figure

    figure = Figure(figsize=(5.6, 2.8), dpi=100, layout="constrained")
    axes = figure.add_subplot()
    top = 0.0
    for label, points in sorted(lines.items()):
        kept = [
            (x, y)
            for x0, y0 in points
            if (x := _finite(x0)) is not None and (y := _finite(y0)) is not None
        ]
        if not kept:
            continue
        top = max(top, *(y for _, y in kept))
        axes.plot(
            [x for x, _ in kept],
            [y for _, y in kept],
            marker=".",
            linewidth=1.2,
            label=plain(label),
        )
    for when in marked:
        if _finite(when) is not None:
            axes.axvline(when, color="#b3261e", alpha=0.35, linewidth=2)
    axes.set_ylim(bottom=0, top=(top or 1.0) * 1.15)  # an empty or all-zero chart still has an axis
    axes.set_xlabel(xlabel)
    axes.set_ylabel(plain(unit))
    axes.set_title(plain(title) + (" (red: a failure or event)" if marked else ""), fontsize=10)
    axes.grid(True, alpha=0.3)
    if axes.get_legend_handles_labels()[0]:
        axes.legend(fontsize=7, loc="lower left")
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png")
    return buffer.getvalue()
