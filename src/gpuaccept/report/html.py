"""One self-contained HTML page for a run: verdict, environment, checks, details, trend charts.

Everything is inline (CSS, charts as base64 PNG), so the file can be attached to a ticket or
served from anywhere. Every value from the report is escaped: hostnames and messages are data.
"""

from __future__ import annotations

import base64
import json
import math
from collections import defaultdict
from collections.abc import Sequence
from datetime import datetime
from html import escape
from typing import Any

from gpuaccept.compare.comparison import higher_is_better
from gpuaccept.naming import (
    chart_title,
    detail_title,
    floor_verdict_text,
    format_number,
    metric_title,
    run_title,
)
from gpuaccept.record.identity import node_title
from gpuaccept.report.charts import drawn, load_chart_png, series_chart_png, trend_chart_png
from gpuaccept.results import CheckResult, Outcome, RunReport, device_label
from gpuaccept.store.history import MetricPoint

MAX_CHARTS = 12

_STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em; color: #222; max-width: 75em; }
h1 { font-size: 1.4em; } h2 { font-size: 1.15em; margin-top: 1.6em; }
table { border-collapse: collapse; margin: 0.5em 0; font-size: 0.9em; }
th, td { border: 1px solid #ccc; padding: 0.25em 0.6em; text-align: left; vertical-align: top; }
th { background: #f3f3f3; }
.pass { color: #176c2f; font-weight: 600; } .warn { color: #9a6700; font-weight: 600; }
.fail, .error { color: #b3261e; font-weight: 600; } .skip { color: #777; }
.verdict { font-size: 1.2em; padding: 0.3em 0.8em; display: inline-block; border-radius: 4px; }
.verdict.pass { background: #e3f4e8; } .verdict.fail { background: #fbe4e2; }
.verdict.cpu, .verdict.skip { background: #eeeeee; color: #444; }
.charts { display: flex; flex-wrap: wrap; gap: 1em; }
.charts figure { margin: 0; } pre { background: #f7f7f7; padding: 1em; overflow-x: auto; }
"""


def _text(value: Any) -> str:
    if isinstance(value, bool):  # a person reads yes/no, not Python's True/False
        return "yes" if value else "no"
    return "n/a" if value is None else escape(str(value))


def _number(value: Any) -> str:
    if isinstance(value, int | float) and not isinstance(value, bool):
        return escape(format_number(value))
    return _text(value)


def _value(value: Any, depth: int = 0) -> str:
    """A details value as a person reads it: scalars as text, objects as small tables, lists of
    scalars as one line; only what is nested deeper than that stays compact JSON."""
    if isinstance(value, dict | list) and not value:
        return "none"
    if isinstance(value, dict) and depth < 2:
        return _table(
            None,
            [[f"<b>{_text(detail_title(k))}</b>", _value(v, depth + 1)] for k, v in value.items()],
        )
    if isinstance(value, list) and all(not isinstance(v, dict | list) for v in value):
        return ", ".join(_number(v) for v in value) or "none"
    if isinstance(value, dict | list):
        return f"<code>{escape(json.dumps(value, sort_keys=True, default=str))}</code>"
    return _number(value)


def _table(header: Sequence[str] | None, rows: Sequence[Sequence[str]]) -> str:
    body = "".join("<tr>" + "".join(f"<td>{cell}</td>" for cell in row) + "</tr>" for row in rows)
    if header is None:
        return f"<table><tbody>{body}</tbody></table>"
    head = "".join(f"<th>{escape(h)}</th>" for h in header)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _environment(report: RunReport) -> str:
    env = report.environment

    def get(section: str, key: str) -> Any:
        part = env.get(section)
        return part.get(key) if isinstance(part, dict) else None

    def pair(first: Any, second: Any) -> str:
        return f"{_text(first)} / {_text(second)}"

    rows = [
        ("node", _text(node_title(report))),
        ("os / kernel", pair(get("system", "os"), get("system", "kernel"))),
        ("cpu", _text(get("system", "cpu_model"))),
        ("python", _text(get("python", "version"))),
        ("torch", _text(get("torch", "version"))),
        ("CUDA runtime / driver", pair(get("cuda", "runtime"), get("cuda", "driver_version"))),
        ("cuDNN / NCCL", pair(get("cuda", "cudnn"), get("cuda", "nccl"))),
        ("pixi environment", _text(get("pixi", "environment"))),
        ("pixi.lock sha256", _text(get("pixi", "lock_sha256"))),
        ("image", _text(get("container", "image"))),
        ("git", _text(get("git", "sha"))),
    ]
    gpus = [
        [
            _text(g.get("index")),
            _text(g.get("name")),
            _text(g.get("uuid")),
            _text(g.get("pci_bus_id")),
            _text(g.get("compute_capability")),
        ]
        for g in env.get("gpus") or []
        if isinstance(g, dict)
    ]
    html = _table(None, [[f"<b>{escape(k)}</b>", v] for k, v in rows])
    if gpus:
        html += _table(["index", "GPU", "UUID", "PCI", "capability"], gpus)
    return html


def _check_details(check: CheckResult) -> str:
    parts = []
    if check.measurements:
        parts.append(
            _table(
                ["metric", "device", "value", "unit", "floor", "verdict"],
                [
                    [
                        _text(metric_title(m.name)),
                        device_label(m.device_index),
                        _number(m.value),
                        _text(m.unit),
                        _number(m.reference.floor) if m.reference else "",
                        f'<span class="{escape(m.verdict.value)}">'
                        f"{_text(floor_verdict_text(m))}</span>",
                    ]
                    for m in check.measurements
                ],
            )
        )
    columns = check.details.get("columns")
    rows = check.details.get("rows")
    if isinstance(columns, list) and isinstance(rows, list) and columns and rows:
        keys = [str(column[0]) for column in columns]
        parts.append(
            _table(
                [str(column[1]) for column in columns],
                [[_number(row.get(key)) for key in keys] for row in rows if isinstance(row, dict)],
            )
        )
    load = check.details.get("load")
    if isinstance(load, dict):
        parts.append(_load_charts(check.name, load))
    series = check.details.get("series")
    if isinstance(series, list) and series and all(isinstance(w, dict) for w in series):
        parts.append(_burnin_charts(series))
    if check.name == "workload" and isinstance(check.details.get("losses"), list):
        parts.append(_workload_charts(check.details))
    # "findings" are the Actions table's rows
    hidden = (
        "columns",
        "rows",
        "load",
        "series",
        "losses",
        "tokens_per_second_per_step",
        "findings",
    )
    rest = {k: v for k, v in check.details.items() if k not in hidden}
    if rest:
        parts.append(_value(rest))
    return "".join(parts) or "<p>No figures.</p>"


# A burn-in window's load figures drawn over the run: (key, title, unit).
_BURNIN_LOAD = (
    ("power_p90_w", "power (90th percentile of the window)", "W"),
    ("temperature_max_c", "temperature (window maximum)", "°C"),
    ("sm_clock_median_mhz", "SM clock (window median)", "MHz"),
)


def _burnin_charts(series: list[dict[str, Any]]) -> str:
    """A burn-in's time series: per-device lines over hours of load for each stressor's
    throughput, then power, temperature and clocks, with the windows that failed or saw an
    NVML event marked (the figures themselves stay in the JSON report)."""

    ends = [
        w["start_seconds"] + w["seconds"]
        for w in series
        if isinstance(w.get("start_seconds"), int | float)
        and isinstance(w.get("seconds"), int | float)
    ]
    # a burn-in of minutes is drawn in minutes, one of hours in hours
    scale, xlabel = (
        (3600, "hours of load") if max(ends, default=0) >= 7200 else (60, "minutes of load")
    )

    def hours(window: dict[str, Any]) -> float:
        start, seconds = window.get("start_seconds"), window.get("seconds")
        if not isinstance(start, int | float) or not isinstance(seconds, int | float):
            return math.nan
        return (start + seconds / 2) / scale

    def found(window: dict[str, Any]) -> bool:
        return any(window.get(k) for k in ("correctness", "hardware", "stragglers", "events"))

    marked = [hours(w) for w in series if found(w)]
    charts: list[tuple[str, str, dict[str, list[tuple[float, float]]]]] = []
    for stressor in dict.fromkeys(str(w.get("stressor")) for w in series):
        lines: dict[str, list[tuple[float, float]]] = {}
        unit = ""
        for window in series:
            rates = window.get("throughput")
            if str(window.get("stressor")) != stressor or not isinstance(rates, dict):
                continue
            unit = str(window.get("unit") or unit)
            for device, value in rates.items():
                lines.setdefault(str(device), []).append((hours(window), value))
        charts.append((f"{stressor} throughput", unit, lines))
    for key, title, unit in _BURNIN_LOAD:
        lines = {}
        for window in series:
            load = window.get("load")
            for device, figures in load.items() if isinstance(load, dict) else []:
                if isinstance(figures, dict) and key in figures:
                    lines.setdefault(str(device), []).append((hours(window), figures[key]))
        if lines:
            charts.append((title, unit, lines))
    figures = []
    for title, unit, lines in charts:
        png, why = drawn(
            series_chart_png, f"burn-in: {title}", unit, lines, marked=marked, xlabel=xlabel
        )
        figures.append(
            _left_out(f"burn-in {title}", why)
            if png is None
            else f'<figure><img alt="burn-in {escape(title)} per device" '
            f'src="data:image/png;base64,{base64.b64encode(png).decode("ascii")}"></figure>'
        )
    found_windows = [w for w in series if found(w)]
    table = (
        _table(
            ["window", "stressor", "findings"],
            [
                [
                    _text(int(w["window"]) + 1 if isinstance(w.get("window"), int) else "?"),
                    _text(w.get("stressor")),
                    _text(
                        "; ".join(
                            str(t)
                            for k in ("correctness", "hardware", "stragglers", "events")
                            for t in (w.get(k) or [])
                        )
                    ),
                ]
                for w in found_windows
            ],
        )
        if found_windows
        else "<p>No window found anything.</p>"
    )
    return f'<div class="charts">{"".join(figures)}</div>{table}'


def _workload_charts(details: dict[str, Any]) -> str:
    """The LLM workload over its steps: the loss (mean over ranks) against the source's floor and
    the limit it had to end below, and each step's tokens/s per GPU."""

    def numbers(key: str) -> list[float]:
        values = details.get(key)
        if not isinstance(values, list):
            return []
        return [
            float(v) if isinstance(v, int | float) and not isinstance(v, bool) else math.nan
            for v in values
        ]

    losses, rates = numbers("losses"), numbers("tokens_per_second_per_step")
    steps = range(len(losses))
    loss_lines: dict[str, list[tuple[float, float]]] = {
        "loss": list(zip(steps, losses, strict=True))
    }
    for key, label in (("convergence_limit", "limit"), ("entropy_rate", "floor")):
        value = details.get(key)
        if isinstance(value, int | float) and not isinstance(value, bool) and losses:
            loss_lines[label] = [(0, float(value)), (len(losses) - 1, float(value))]
    charts = [("loss", "nats", loss_lines)]
    if rates:
        charts.append(("tokens/s per GPU", "tokens/s", {"step": list(enumerate(rates))}))
    figures = []
    for title, unit, lines in charts:
        png, why = drawn(series_chart_png, f"workload: {title}", unit, lines, xlabel="step")
        figures.append(
            _left_out(f"workload {title}", why)
            if png is None
            else f'<figure><img alt="workload {escape(title)} over steps" '
            f'src="data:image/png;base64,{base64.b64encode(png).decode("ascii")}"></figure>'
        )
    return f'<div class="charts">{"".join(figures)}</div>'


def _load_charts(check: str, load: dict[str, Any]) -> str:
    """Each device's samples under load drawn, with the summary the verdicts came from (the
    samples themselves stay in the JSON report)."""
    from gpuaccept.checks.load_judging import FAILING_REASONS

    parts = []
    for label, trace in load.items():
        if not isinstance(trace, dict):
            continue
        samples = trace.get("samples")
        summary = trace.get("summary", {})
        if isinstance(samples, list) and samples and all(isinstance(s, dict) for s in samples):
            png, why = drawn(
                load_chart_png, f"{check}: {label} under load", samples, marked=FAILING_REASONS
            )
            parts.append(
                _left_out(f"{label} under load", why)
                if png is None
                else f'<figure><img alt="{escape(label)} power and SM clock under load" '
                f'src="data:image/png;base64,{base64.b64encode(png).decode("ascii")}"></figure>'
            )
        parts.append(f"<p><b>{_text(label)} under load</b></p>{_value(summary)}")
    return "".join(parts)


def _left_out(what: str, why: str | None) -> str:
    said = escape(why or "")
    return f"<p><i>The chart of {escape(what)} is left out: it cannot be drawn ({said}).</i></p>"


def _charts(trends: dict[str, list[MetricPoint]], report: RunReport) -> str:
    # Key figures are the ones where more is better: throughput, bandwidth, accuracy. Counts of
    # wrong elements sit at zero and would only bury them.
    key = [m for m in sorted(trends) if trends[m] and higher_is_better(trends[m][0].unit)]
    floors = {
        f"{check.name}/{m.name}": m.reference.floor
        for check in report.checks
        for m in check.measurements
        if m.reference is not None
    }
    # a floor an option set (--min-busbw) judges beside the reference: the higher one decided
    for check in report.checks:
        extra = check.details.get("floors")
        for name, value in extra.items() if isinstance(extra, dict) else ():
            if isinstance(value, int | float) and not isinstance(value, bool):
                metric = f"{check.name}/{name}"
                floors[metric] = max(float(value), floors.get(metric, float("-inf")))
    this_run = datetime.fromisoformat(report.started_at)
    # a figure measured in one run only has no trend: a panel with one star on an empty axis
    # says nothing, so it is not drawn, and the page says why
    key = [m for m in key if len({point.run_id for point in trends[m]}) > 1]
    if not key:
        return (
            "<p>First run of its kind on this node: no trend to draw yet (the charts appear "
            "from the second run on).</p>"
        )
    figures = []
    for metric in key[:MAX_CHARTS]:
        points = trends[metric]
        series: dict[str, list[tuple[datetime, float]]] = defaultdict(list)
        for point in points:
            series[f"{point.hostname} {device_label(point.device_index)}"].append(
                (datetime.fromisoformat(point.started_at), point.value)
            )
        png, why = drawn(
            trend_chart_png,
            chart_title(metric),
            points[0].unit,
            series,
            this_run=this_run,
            floor=floors.get(metric),
        )
        figures.append(
            _left_out(metric_title(metric), why)
            if png is None
            else f'<figure><img alt="{escape(metric_title(metric))} over time" '
            f'src="data:image/png;base64,{base64.b64encode(png).decode("ascii")}"></figure>'
        )
    if not figures:
        return "<p>No figures to chart.</p>"
    what = f"runs of <code>{escape(run_title(report))}</code> on this node"
    return f'<p>{what}; &#9733; marks this run.</p><div class="charts">{"".join(figures)}</div>'


def render_html(report: RunReport, trends: dict[str, list[MetricPoint]]) -> str:
    """The page; `trends` maps `check/metric` to its stored points (this run included)."""
    run_verdict = report.verdict
    # A failure is red in CPU mode too; only a CPU pass is grey, since a green PASS would read as
    # a GPU acceptance.
    verdict = {
        Outcome.PASS: "cpu" if run_verdict.cpu_mode else "pass",
        Outcome.FAIL: "fail",
        Outcome.NOT_JUDGED: "skip",
        Outcome.INTERRUPTED: "skip",
    }[run_verdict.outcome]
    title = run_title(report)
    shown = escape(run_verdict.sentence)
    checks = _table(
        ["area", "check", "status", "seconds", "message"],
        [
            [
                _text(c.area),
                f'<a href="#check-{i}">{_text(c.name)}</a>',
                f'<span class="{escape(c.status.value)}">{_text(c.status.value.upper())}</span>',
                f"{c.duration_seconds:.1f}",
                _text(c.message),
            ]
            for i, c in enumerate(report.checks)
        ],
    )
    details = "".join(
        f'<h3 id="check-{i}">{_text(c.name)} ({_text(c.status.value)})</h3>{_check_details(c)}'
        for i, c in enumerate(report.checks)
    )
    plan = report.action_plan
    actions = _table(
        ["action", "check", "status", "GPU", "finding", "why"],
        [
            [
                f"<b>{_text(r.action.value)}</b>",
                _text(r.check),
                _text(r.status.value),
                _text(r.gpu or ""),
                _text(r.finding),
                _text(r.cause),
            ]
            for r in plan.recommendations
        ],
    )
    environment_json = json.dumps(report.environment, indent=2, sort_keys=True, ensure_ascii=False)
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en"><head><meta charset="utf-8">'
        f"<title>{escape(title)}</title><style>{_STYLE}</style></head><body>"
        f"<h1>{escape(title)}</h1>"
        f'<p><span class="verdict {verdict}">{shown}</span></p>'
        f'<p>Recommended action: <b id="action">{_text(plan.action.value)}</b> '
        f"(tables: {_text(plan.rules)})</p>"
        f"<p>Started {_text(report.started_at)}, {report.duration_seconds:.1f} s, "
        f"gpuaccept {_text(report.tool_version)}</p>"
        f"<h2>Environment</h2>{_environment(report)}"
        f"<h2>Checks</h2>{checks}"
        + (f"<h2>Actions</h2>{actions}" if plan.recommendations else "")
        + f"<h2>Trends</h2>{_charts(trends, report)}"
        f"<h2>Details</h2>{details}"
        f"<h2>Environment capture</h2><details><summary>JSON</summary>"
        f"<pre>{escape(environment_json)}</pre></details>"
        "</body></html>\n"
    )
