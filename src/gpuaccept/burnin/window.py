"""A finished burn-in window judged across the node (issue #23): what every device did under one
stressor becomes the window's figures and failures, in words that name the window, the
stressor and the device."""

from __future__ import annotations

from collections.abc import Mapping

from gpuaccept.burnin.judging import (
    DEFAULT_STRAGGLER_TOLERANCE_PERCENT,
    first_differing_row,
    judge_digests,
    stragglers,
)
from gpuaccept.burnin.plan import WindowFigures
from gpuaccept.burnin.stress import WindowWork


def judge_window(
    window: int,
    stressor: str,
    seconds: float,
    works: Mapping[str, WindowWork],
    *,
    straggler_tolerance_percent: float = DEFAULT_STRAGGLER_TOLERANCE_PERCENT,
) -> WindowFigures:
    """The window's figures and failures from each device's work (device label -> work).

    A failure: a device whose first and last iterations differed, a device whose bits differ
    from the majority's (with the first differing row), no majority at all, or a straggler.
    """
    where = f"window {window + 1} ({stressor})"
    failures = [
        f"{where}: {device} changed its result within the window (first and last iterations "
        "differ bit for bit)"
        for device, work in sorted(works.items())
        if not work.repeats_agree
    ]
    verdict = judge_digests({device: work.digest for device, work in works.items()})
    if verdict.majority is None and verdict.differing:
        failures.append(
            f"{where}: the devices disagree with no majority ({', '.join(verdict.differing)}): "
            "the float64 reference must decide"
        )
    elif verdict.differing:
        reference = works[verdict.agreeing[0]]
        for device in verdict.differing:
            row = first_differing_row(works[device].row_digests, reference.row_digests)
            failures.append(
                f"{where}: {device} computed other bits than the majority "
                f"({', '.join(verdict.agreeing)}), first in row {row}"
            )
    slow = stragglers(
        {device: work.throughput for device, work in works.items()}, straggler_tolerance_percent
    )
    units = {work.unit for work in works.values()}
    unit = units.pop() if len(units) == 1 else ""
    failures.extend(
        f"{where}: {s.gpu} is a straggler, {s.value:.4g} {unit} is {s.deviation_percent:+.1f}% "
        f"against the node's median {s.median:.4g}"
        for s in slow
    )
    return WindowFigures(
        window=window,
        stressor=stressor,
        seconds=seconds,
        throughput={device: work.throughput for device, work in sorted(works.items())},
        failures=failures,
    )
