"""Benchmark rows (CheckResult.details 'columns' and 'rows') as a text table and as CSV."""

from __future__ import annotations

import csv
import io
from pathlib import Path
from typing import Any

from gpuaccept.naming import format_number
from gpuaccept.output_files import write_text_atomically
from gpuaccept.results import CheckResult, RunReport


def _cell(value: Any) -> str:
    """One number format for every table (the same as the console, Markdown and HTML)."""
    if isinstance(value, int | float) or value is None:
        return format_number(value)
    return str(value)


def render_table(check: CheckResult) -> str:
    """Right-aligned columns under a header line, nccl-tests style; empty when there are no rows."""
    columns = check.details.get("columns") or []
    rows = check.details.get("rows") or []
    if not columns or not rows:
        return ""
    cells = [[header for _, header in columns]]
    cells += [[_cell(row.get(key)) for key, _ in columns] for row in rows]
    widths = [max(len(line[i]) for line in cells) for i in range(len(columns))]
    lines = [
        "  ".join(text.rjust(width) for text, width in zip(line, widths, strict=True))
        for line in cells
    ]
    lines.insert(1, "  ".join("-" * width for width in widths))
    return "\n".join(lines)


def render_csv(report: RunReport) -> str:
    """Every benchmark's rows, one CSV with a leading 'benchmark' column (raw numbers, no units)."""
    keys: list[str] = []
    for check in report.checks:
        for key, _ in check.details.get("columns") or []:
            if key not in keys:
                keys.append(key)
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(["benchmark", *keys])
    for check in report.checks:
        for row in check.details.get("rows") or []:
            writer.writerow([check.name, *("" if row.get(k) is None else row.get(k) for k in keys)])
    return buffer.getvalue()


def write_csv(report: RunReport, path: Path) -> None:
    write_text_atomically(path, render_csv(report))
