"""A Markdown summary of a run, for CI job summaries ($GITHUB_STEP_SUMMARY) and pull requests."""

from __future__ import annotations

from typing import Any

from gpuaccept.naming import floor_verdict_text, run_title
from gpuaccept.record.identity import node_title
from gpuaccept.results import RunReport, device_label

# Markdown renders inline HTML, so report text (a check message, a level, a host name) could hide
# the verdict in an HTML comment or add a script. Every character that starts inline markup is
# escaped (CommonMark backslash escapes; entities for HTML's own), so text shows as written. Our
# text is never at the start of a line, where #, + and - would matter.
_MARKDOWN_SPECIAL = str.maketrans(
    {c: "\\" + c for c in "\\`*_[]|~!"}
    | {"<": "&lt;", ">": "&gt;", "&": "&amp;", "\r": " ", "\n": " "}
)


def _inline(value: Any) -> str:
    """Report text as inert Markdown: shown as written, never markup."""
    return ("" if value is None else str(value)).translate(_MARKDOWN_SPECIAL)


def _cell(value: Any) -> str:
    return _inline(value)


def _known(value: Any) -> str:
    return "n/a" if value is None else _cell(value)


def _row(cells: list[Any]) -> str:
    return "| " + " | ".join(_cell(cell) for cell in cells) + " |"


def _table(header: list[str], rows: list[list[Any]]) -> list[str]:
    rule = "| " + " | ".join(["---"] * len(header)) + " |"
    return [_row(header), rule, *(_row(row) for row in rows)]


def render_markdown(report: RunReport) -> str:
    env = report.environment
    torch_info = env.get("torch") or {}
    cuda = env.get("cuda") or {}
    gpus = env.get("gpus") or []
    lines = [
        f"## {_inline(run_title(report))}: {_inline(report.verdict.label)}",
        "",
        f"**[RESULT] {_inline(report.verdict.sentence)}**",
        "",
        f"- recommended action: **{_inline(report.action_plan.sentence)}**",
        f"- node: {_known(node_title(report))}, started {report.started_at}, "
        f"{report.duration_seconds:.1f} s, gpuaccept {report.tool_version}",
        f"- torch {_known(torch_info.get('version'))}, CUDA runtime "
        f"{_known(cuda.get('runtime'))}, driver {_known(cuda.get('driver_version'))}",
        f"- GPUs: {len(gpus)}"
        + (f" ({', '.join(sorted({_known(g.get('name')) for g in gpus}))})" if gpus else ""),
        "",
        *_table(
            ["area", "check", "status", "seconds", "message"],
            [
                [c.area, c.name, c.status.value.upper(), f"{c.duration_seconds:.1f}", c.message]
                for c in report.checks
            ],
        ),
    ]
    figures = [
        [
            check.name,
            m.name,
            device_label(m.device_index),
            f"{m.value:.4g}",
            m.unit,
            f"{m.reference.floor:.4g}" if m.reference else "",
            floor_verdict_text(m),
        ]
        for check in report.checks
        for m in check.measurements
    ]
    if figures:
        lines += [
            "",
            "### Figures",
            "",
            *_table(["check", "metric", "device", "value", "unit", "floor", "verdict"], figures),
        ]
    return "\n".join(lines) + "\n"
