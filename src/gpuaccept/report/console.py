"""Console lines and the summary table (the CLI prints them)."""

from __future__ import annotations

from typing import Any

from rich.table import Table

from gpuaccept.naming import figure_text, run_title
from gpuaccept.results import RunReport, Status
from gpuaccept.results import check_line as check_line

_STATUS_STYLE = {
    Status.PASS: "green",
    Status.WARN: "yellow",
    Status.FAIL: "bold red",
    Status.ERROR: "bold red",
    Status.SKIP: "dim",
}


# A CPU run exercises the code; it must never read as a GPU acceptance.
CPU_MODE_LINE = (
    "[ENV] CPU mode: the checks run their CPU twins. This exercises the code, "
    "it is NOT a GPU acceptance."
)


def environment_line(what: str, environment: dict[str, Any]) -> str:
    """`[ENV] <what>: torch 2.x (CUDA 12.9), 8 GPU(s) NVIDIA H100 80GB HBM3`."""
    torch_info = environment.get("torch") or {}
    gpus = environment.get("gpus") or []
    build = f"CUDA {torch_info['cuda']}" if torch_info.get("cuda") else "CPU build"
    names = ", ".join(sorted({str(g.get("name")) for g in gpus if isinstance(g, dict)}))
    version = torch_info.get("version") or "unknown"
    return f"[ENV] {what}: torch {version} ({build}), {len(gpus)} GPU(s) {names}".rstrip()


def result_line(report: RunReport) -> str:
    """The run's stored verdict as the last line of a log (`[RESULT] SUCCESS`, ...)."""
    return f"[RESULT] {report.verdict.sentence}"


ACTION_LINES_SHOWN = 8


CUT = " ... (cut: the JSON report has it whole)"


def clipped(text: str, limit: int) -> str:
    """`text` within about `limit` characters, cut where a word ends (never inside a figure:
    "534.2 TFLOPS" is not shown as "534."), saying that it was cut."""
    if len(text) <= limit:
        return text
    head = text[: limit + 1]
    end = head.rfind(" ")
    # one word longer than the line: nothing to cut at, so it is cut where it must be
    head = head[:end] if end > 0 else text[:limit]
    return head.rstrip(" ,;:") + CUT


def action_lines(report: RunReport) -> list[str]:
    """The node's recommended action, then each finding's (`[ACTION] ...`): what to do, said
    before the verdict's last line."""
    plan = report.action_plan
    if not plan.recommendations:
        return ["[ACTION] none: nothing to do"]
    lines = [
        f"[ACTION] {plan.action.value}: the node's action, the most severe of "
        f"{len(plan.recommendations)} finding(s) ({plan.rules})"
    ]
    for r in plan.recommendations[:ACTION_LINES_SHOWN]:
        gpu = f" [{r.gpu}]" if r.gpu else ""
        finding, cause = clipped(r.finding, 160), clipped(r.cause, 100)
        lines.append(f"[ACTION]   {r.action.value} <- {r.check}{gpu}: {finding} ({cause})")
    more = len(plan.recommendations) - ACTION_LINES_SHOWN
    if more > 0:
        lines.append(f"[ACTION]   ... and {more} more (the JSON report has them all)")
    return lines


def summary_table(report: RunReport) -> Table:
    table = Table(title=run_title(report))
    for column in ("area", "check", "status", "seconds", "key figures"):
        table.add_column(column)
    for check in report.checks:
        figures = "\n".join(figure_text(m) for m in check.measurements[:4])
        table.add_row(
            check.area,
            check.name,
            f"[{_STATUS_STYLE[check.status]}]{check.status.value}[/]",
            f"{check.duration_seconds:.1f}",
            figures,
        )
    return table


def summary_text(report: RunReport, width: int = 120) -> str:
    """The summary table as plain ASCII for a job log (no colour, no box-drawing characters)."""
    import io

    from rich import box
    from rich.console import Console

    table = summary_table(report)
    table.box = box.ASCII
    buffer = io.StringIO()
    Console(file=buffer, width=width, color_system=None, force_terminal=False).print(table)
    return buffer.getvalue().rstrip("\n")
