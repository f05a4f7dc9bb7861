"""The JSON report: RunReport as is, written atomically (schema: docs/report-schema.json)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from gpuaccept.atomic_write import write_text_atomically
from gpuaccept.results import RunReport


def report_filename(report: RunReport) -> str:
    host = report.hostname or "unknown-host"
    safe_host = "".join(c if c.isalnum() or c in "-_." else "_" for c in host)
    stamp = report.started_at.replace(":", "").replace("-", "").split(".")[0]
    return f"gpuaccept-{report.command}-{safe_host}-{stamp}.json"


def write_json_report(report: RunReport, directory: Path) -> Path:
    path = directory / report_filename(report)
    write_text_atomically(path, report.model_dump_json(indent=2) + "\n")
    return path


def report_json_schema() -> dict[str, Any]:
    schema: dict[str, Any] = RunReport.model_json_schema()
    return schema


def render_report_schema() -> str:
    return json.dumps(report_json_schema(), indent=2, sort_keys=True) + "\n"
