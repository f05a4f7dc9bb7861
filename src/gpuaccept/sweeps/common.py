"""What every sweep shares: the device's vendor peak, percent of it, and the result's shape.

Each sweep states its table as a CheckResult (columns and rows in details).

Figures are reported, not judged: a benchmark FAILs only on a wrong result (#wrong, n-body
error) or on a floor the operator set (--min-busbw). Each figure that has a vendor peak in the
shipped table says how close it came to it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import torch

from gpuaccept.references import ReferenceTable, load_shipped_references
from gpuaccept.results import CheckResult, Measurement, Status, nan_figure_failures

Progress = Callable[[], None]
Columns = list[tuple[str, str]]  # (row key, column header)


def no_progress() -> None:
    pass


def device_name(device: torch.device) -> str:
    return torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"


def peak(device: torch.device, key: str, table: ReferenceTable | None = None) -> float | None:
    """The vendor dense peak `key` (e.g. 'bf16_tflops', 'membw_gbps') of this device's model."""
    table = table or load_shipped_references()
    model = table.model_for(device_name(device))
    return table.models[model].peaks.get(key) if model else None


def percent_of(value: float | None, ceiling: float | None) -> float | None:
    return None if value is None or not ceiling else 100.0 * value / ceiling


def bench_result(
    name: str,
    failures: list[str],
    summary: str,
    started: float,
    columns: Columns,
    rows: list[dict[str, Any]],
    measurements: list[Measurement],
    **details: Any,
) -> CheckResult:
    """FAIL with the failures as the message when there are any, else PASS with the summary."""
    failures = failures + nan_figure_failures(measurements)
    return CheckResult(
        name=name,
        area="BENCH",
        status=Status.FAIL if failures else Status.PASS,
        message="; ".join(failures) if failures else summary,
        duration_seconds=time.monotonic() - started,
        measurements=measurements,
        details={"columns": [list(c) for c in columns], "rows": rows, **details},
    )
