"""The JSON report: RunReport as is (schema: docs/report-schema.json), in a file of its own."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from gpuaccept.output_files import write_new_file
from gpuaccept.record.identity import node_name_of
from gpuaccept.results import RunReport


def _safe(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]", "_", text)[:120]


def run_identity(environ: Mapping[str, str] | None = None) -> str:
    """What tells this run from a concurrent one on the same node: the process id, after the
    Slurm job id when there is one (so a report can be traced to its job)."""
    env = os.environ if environ is None else environ
    job = f"slurm{_safe(env['SLURM_JOB_ID'])}-" if env.get("SLURM_JOB_ID") else ""
    return f"{job}pid{os.getpid()}"


def report_filename(report: RunReport, environ: Mapping[str, str] | None = None) -> str:
    host = _safe(node_name_of(report) or "unknown-host")
    stamp = report.started_at.replace(":", "").replace("-", "").split(".")[0]
    return f"gpuaccept-{report.command}-{host}-{stamp}-{run_identity(environ)}.json"


def write_json_report(report: RunReport, directory: Path, flag: str = "--report-dir") -> Path:
    """Write the report as a new file in `directory`; another run's report is never replaced."""
    text = report.model_dump_json(indent=2) + "\n"
    return write_new_file(directory, report_filename(report), text, flag)


def report_json_schema() -> dict[str, Any]:
    schema: dict[str, Any] = RunReport.model_json_schema()
    return schema


def render_report_schema() -> str:
    return json.dumps(report_json_schema(), indent=2, sort_keys=True) + "\n"
