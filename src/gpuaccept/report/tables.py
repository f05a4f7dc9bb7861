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
    """Right-aligned columns under a header line, nccl-tests style; empty when there are no rows.

    Rows of different kinds (the collectives: all_reduce runs in place only, all_gather both
    ways) are printed as one table per value of their first column, each without the columns
    that are empty in all of its rows, so no table carries columns of n/a.
    """
    columns = check.details.get("columns") or []
    rows = check.details.get("rows") or []
    if not columns or not rows:
        return ""
    first = columns[0][0]
    kinds = list(dict.fromkeys(str(row.get(first)) for row in rows))
    if len(kinds) > 1 and any(
        all(row.get(key) is None for row in rows if str(row.get(first)) == kind)
        for kind in kinds
        for key, _ in columns
    ):
        return "\n\n".join(
            _table(columns, [row for row in rows if str(row.get(first)) == kind], drop_empty=True)
            for kind in kinds
        )
    return _table(columns, rows, drop_empty=False)


def _table(columns: list[Any], rows: list[dict[str, Any]], *, drop_empty: bool) -> str:
    if drop_empty:
        columns = [c for c in columns if any(row.get(c[0]) is not None for row in rows)]
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
