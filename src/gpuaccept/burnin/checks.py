"""A burn-in's windows as the report's checks (issue #23): what was found, window by window,
judged into three checks, with the whole time series in the report for the HTML page to draw.

- `burnin-correctness`: any window where a device computed other bits than the majority, changed
  its result within the window, left the devices without a majority, or was wrong against the
  CPU reference.
- `burnin-hardware`: any window with a hard event (critical XID or another condemning NVML
  event, counter growth as `checks.events` judges it, hardware slowdown, a lost device); clock
  sag, software thermal slowdown or power below the GEMM expectation warn.
- `burnin-throughput`: stragglers in any window, and drift. A device's rate under one stressor,
  fitted over the run (least squares), may lose at most the straggler tolerance between the
  middles of its first and last windows, in percent of its mean rate
  (`judging.drift_percent_per_hour` times the hours): a GPU that became 10% slower than itself
  is as unfit as one 10% slower than its neighbours (gpu-fryer's 10% between the GPUs of a node,
  cited in `burnin.judging`). Fewer than three windows of a stressor make no trend: reported,
  not judged.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Any

from gpuaccept.burnin.judging import drift_percent_per_hour
from gpuaccept.burnin.plan import BurnInPlan, BurnInProgress, WindowFigures, spoken_duration
from gpuaccept.results import CheckResult, Measurement, RunReport, Status

AREA = "BURNIN"
CHECK_NAMES = ("burnin-correctness", "burnin-hardware", "burnin-throughput")
_SHOWN = 3  # findings spelled out in a check's message; every one is in its details
MIN_TREND_WINDOWS = 3


@dataclass(frozen=True)
class Drift:
    device: str
    stressor: str
    windows: int
    percent_per_hour: float
    change_percent: float  # the fitted line's change, first to last window, in % of the mean

    def as_dict(self) -> dict[str, Any]:
        return {
            "device": self.device,
            "stressor": self.stressor,
            "windows": self.windows,
            "percent_per_hour": self.percent_per_hour,
            "change_percent": self.change_percent,
        }


def windows_digest(report: RunReport) -> str | None:
    """The digest of a burn-in report's windows (`burnin_checks` keeps it in burnin-throughput's
    details); None for a report without one."""
    check = next((c for c in report.checks if c.name == "burnin-throughput"), None)
    return None if check is None else check.details.get("windows_sha256")


def window_starts(windows: list[WindowFigures]) -> list[float]:
    """Each window's start in seconds of load (the time axis of the series)."""
    starts, total = [], 0.0
    for figures in windows:
        starts.append(total)
        total += figures.seconds
    return starts


def drifts(windows: list[WindowFigures]) -> list[Drift]:
    """Each device's trend under each stressor, over the windows that ran it."""
    points: dict[tuple[str, str], list[tuple[float, float]]] = {}
    for start, figures in zip(window_starts(windows), windows, strict=True):
        middle = start + figures.seconds / 2
        for device, value in figures.throughput.items():
            points.setdefault((figures.stressor, device), []).append((middle, value))
    found = []
    for (stressor, device), series in sorted(points.items()):
        slope = drift_percent_per_hour(series)
        if slope is None:
            continue
        hours = (series[-1][0] - series[0][0]) / 3600
        found.append(Drift(device, stressor, len(series), slope, slope * hours))
    return found


def _conclude(
    name: str, failures: list[str], warnings: list[str], ok: str, **extra: Any
) -> CheckResult:
    def said(found: list[str]) -> str:
        more = len(found) - _SHOWN
        return "; ".join(found[:_SHOWN]) + (
            f" (and {more} more: see the details)" if more > 0 else ""
        )

    if failures:
        status, message = Status.FAIL, said(failures)
    elif warnings:
        status, message = Status.WARN, said(warnings)
    else:
        status, message = Status.PASS, ok
    details = {"failures": failures, "warnings": warnings, **extra.pop("details", {})}
    return CheckResult(
        name=name, area=AREA, status=status, message=message, details=details, **extra
    )


def _measurements(
    windows: list[WindowFigures], device_mode: str, names: dict[str, str]
) -> list[Measurement]:
    """Each device's median rate per stressor over the run (on the CPU twin, the node's median:
    its workers are one CPU, not devices the history can tell apart)."""
    by: dict[tuple[str, str], list[float]] = {}
    units: dict[str, str] = {}
    for figures in windows:
        units[figures.stressor] = figures.unit
        for device, value in figures.throughput.items():
            by.setdefault((figures.stressor, device), []).append(value)
    measurements = []
    for stressor in sorted({s for s, _ in by}):
        metric = f"burnin_{stressor.replace('-', '_')}"
        if device_mode == "cpu":
            values = [v for (s, _), vs in by.items() if s == stressor for v in vs]
            measurements.append(
                Measurement(name=metric, value=statistics.median(values), unit=units[stressor])
            )
            continue
        for (s, device), values in sorted(by.items()):
            if s == stressor:
                measurements.append(
                    Measurement(
                        name=metric,
                        value=statistics.median(values),
                        unit=units[stressor],
                        device_index=int(device.removeprefix("gpu")),
                        device_name=names.get(device),
                    )
                )
    return measurements


def burnin_checks(
    progress: BurnInProgress,
    plan: BurnInPlan,
    *,
    device_mode: str,
    straggler_tolerance_percent: float,
    names: dict[str, str] | None = None,
    seconds: float = 0.0,
) -> list[CheckResult]:
    """The burn-in's three checks from the windows it finished (SKIP each when none did)."""
    windows = progress.windows
    if not windows:
        return [
            CheckResult(name=name, area=AREA, status=Status.SKIP, message="no window finished")
            for name in CHECK_NAMES
        ]
    count = f"{len(windows)} window(s), {spoken_duration(round(progress.load_seconds))} of load"
    correctness = _conclude(
        "burnin-correctness",
        [f for w in windows for f in w.correctness],
        [],
        f"{count}: every device computed the majority's bits, the same within each window, and "
        "within its CPU reference",
    )
    hardware = _conclude(
        "burnin-hardware",
        [f for w in windows for f in w.hardware],
        [f for w in windows for f in w.warnings],
        f"{count}: no hard event, no lost device, no hardware slowdown",
        details={"events": {str(w.window + 1): w.events for w in windows if w.events}},
    )
    trends = drifts(windows)
    drifted = [
        f"{d.device} {d.stressor} drifted {d.change_percent:+.1f}% over {d.windows} windows "
        f"({d.percent_per_hour:+.2f}%/h), more than the {straggler_tolerance_percent:g}% "
        "tolerance"
        for d in trends
        if d.windows >= MIN_TREND_WINDOWS and d.change_percent < -straggler_tolerance_percent
    ]
    throughput = _conclude(
        "burnin-throughput",
        [f for w in windows for f in w.stragglers] + drifted,
        [],
        f"{count}: no straggler beyond {straggler_tolerance_percent:g}% of the node's confirmed "
        "best, no drift beyond it",
        measurements=_measurements(windows, device_mode, names or {}),
        details={
            "plan": plan.fingerprint(),
            "stressors": list(plan.stressors),
            "window_seconds": plan.window_seconds,
            "duration_seconds": plan.duration_seconds,
            "load_seconds": progress.load_seconds,
            "windows_sha256": progress.records_sha256(),
            "devices": progress.devices,
            "straggler_tolerance_percent": straggler_tolerance_percent,
            "drift": [d.as_dict() for d in trends],
            "series": [
                {"start_seconds": start, **w.model_dump(mode="json")}
                for start, w in zip(window_starts(windows), windows, strict=True)
            ],
        },
    )
    return [
        check.model_copy(update={"duration_seconds": seconds})
        for check in (correctness, hardware, throughput)
    ]
