"""The fleet on one page (issue #33 §3): every node's newest accept, each GPU model's figures
across the fleet with the laggards marked, the nodes slower than their own past, the burn-ins
that found silent data corruption, the nodes a run would take out of service, and the mean time
between incidents.

One self-contained file: inline CSS, inline SVG histograms (bounded in size whatever the fleet:
bins, not one mark per GPU), and a few lines of script to sort and filter the tables in the
browser, no server. Every value from the history is escaped, and the script reads only text
(`textContent`), never markup. The page opens with the filter in its address
(`page.html#filter=rack12&attention=1&sort=node`), so a link can point at what to look at.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from html import escape

from gpuaccept.compare.comparison import FleetFigure
from gpuaccept.compare.fleet import JUDGED_RUNS, FleetState
from gpuaccept.naming import format_number
from gpuaccept.results import device_label

BINS = 40

_STYLE = """
body { font-family: system-ui, sans-serif; margin: 1.5em; color: #222; }
h1 { font-size: 1.4em; } h2 { font-size: 1.15em; margin-top: 1.6em; } h3 { font-size: 1em; }
table { border-collapse: collapse; margin: 0.5em 0; font-size: 0.85em; }
th, td { border: 1px solid #ccc; padding: 0.2em 0.5em; text-align: left; vertical-align: top; }
th { background: #f3f3f3; cursor: pointer; user-select: none; position: sticky; top: 0; }
th[aria-sort=ascending]::after { content: " \\25B2"; }
th[aria-sort=descending]::after { content: " \\25BC"; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
.pass { color: #176c2f; font-weight: 600; } .fail { color: #b3261e; font-weight: 600; }
.other { color: #777; font-weight: 600; }
.summary span { display: inline-block; margin-right: 1.2em; }
.bar { position: sticky; top: 0; background: #fff; padding: 0.5em 0; z-index: 2; }
.metric { display: flex; gap: 1.5em; align-items: flex-start; flex-wrap: wrap; }
svg rect.bin { fill: #9bb7d4; } svg rect.bin.lag { fill: #d9534f; }
svg line.median { stroke: #1f4e79; stroke-width: 2; }
"""

# Sort by a column (numbers by their data-v), filter rows by text and by need of attention, and
# start from the address's #filter=...&attention=1&sort=COLUMN. Only textContent is read.
_SCRIPT = """
(function () {
  function rows(table) { return Array.from(table.tBodies[0].rows); }
  function key(cell) {
    var v = cell.getAttribute('data-v');
    return v === null ? cell.textContent.trim().toLowerCase() : parseFloat(v);
  }
  function sortBy(th, descending) {
    var table = th.closest('table'), index = th.cellIndex, body = table.tBodies[0];
    Array.from(th.parentNode.cells).forEach(function (c) { c.removeAttribute('aria-sort'); });
    th.setAttribute('aria-sort', descending ? 'descending' : 'ascending');
    rows(table).sort(function (a, b) {
      var x = key(a.cells[index]), y = key(b.cells[index]);
      var order = x < y ? -1 : x > y ? 1 : 0;
      return descending ? -order : order;
    }).forEach(function (r) { body.appendChild(r); });
  }
  function filter() {
    var text = document.getElementById('filter').value.trim().toLowerCase();
    var only = document.getElementById('attention').checked;
    document.querySelectorAll('table.rows').forEach(function (table) {
      var shown = 0;
      rows(table).forEach(function (r) {
        var keep = (!text || r.textContent.toLowerCase().indexOf(text) >= 0) &&
          (!only || r.getAttribute('data-attention') === '1');
        r.hidden = !keep; if (keep) { shown += 1; }
      });
      var count = document.getElementById(table.id + '-shown');
      if (count) { count.textContent = String(shown); }
    });
  }
  document.querySelectorAll('table.rows th').forEach(function (th) {
    th.addEventListener('click', function () {
      sortBy(th, th.getAttribute('aria-sort') === 'ascending');
    });
  });
  document.getElementById('filter').addEventListener('input', filter);
  document.getElementById('attention').addEventListener('change', filter);
  var wanted = new URLSearchParams(window.location.hash.slice(1));
  document.getElementById('filter').value = wanted.get('filter') || '';
  document.getElementById('attention').checked = wanted.get('attention') === '1';
  var sort = wanted.get('sort');
  if (sort) {
    document.querySelectorAll('#nodes th').forEach(function (th) {
      if (th.getAttribute('data-key') === sort) { sortBy(th, wanted.get('desc') === '1'); }
    });
  }
  filter();
})();
"""


def _cell(value: object, *, number: float | None = None, css: str = "") -> str:
    attributes = f' class="{css}"' if css else ""
    if number is not None:
        attributes = f' class="num{" " + css if css else ""}" data-v="{number!r}"'
    return f"<td{attributes}>{escape(str(value))}</td>"


def _table(table_id: str, headers: list[tuple[str, str]], rows: list[str], total: int) -> str:
    head = "".join(f'<th data-key="{key}">{escape(title)}</th>' for key, title in headers)
    return (
        f'<p><span id="{table_id}-shown">{total}</span> of {total} shown</p>'
        f'<table class="rows" id="{table_id}"><thead><tr>{head}</tr></thead>'
        f"<tbody>{''.join(rows)}</tbody></table>"
    )


def _histogram(figures: list[FleetFigure]) -> str:
    """An SVG histogram of one metric over one model's GPUs: BINS bars, the laggards' share of
    each bar in red, the median as a line."""
    values = [f.point.value for f in figures]
    low, high = min(values), max(values)
    span = (high - low) or abs(high) or 1.0
    counts, lagging = [0] * BINS, [0] * BINS
    for figure in figures:
        index = min(BINS - 1, int((figure.point.value - low) / span * BINS))
        counts[index] += 1
        lagging[index] += figure.outlier
    width, height, top = 400, 80, max(counts)
    bar = width / BINS
    parts = []
    for i, (count, lag) in enumerate(zip(counts, lagging, strict=True)):
        if not count:
            continue
        start = low + span * i / BINS
        title = f"{format_number(start)} to {format_number(start + span / BINS)}: {count} GPU(s)"
        if lag:
            title += f", {lag} lagging"
        h = height * count / top
        parts.append(
            f'<rect class="bin" x="{i * bar:.1f}" y="{height - h:.1f}" width="{bar - 1:.1f}" '
            f'height="{h:.1f}"><title>{escape(title)}</title></rect>'
        )
        if lag:
            hl = height * lag / top
            parts.append(
                f'<rect class="bin lag" x="{i * bar:.1f}" y="{height - hl:.1f}" '
                f'width="{bar - 1:.1f}" height="{hl:.1f}"></rect>'
            )
    median = statistics.median(values)
    x = (median - low) / span * width
    parts.append(f'<line class="median" x1="{x:.1f}" x2="{x:.1f}" y1="0" y2="{height}"></line>')
    label = f"{format_number(low)} … {format_number(high)}, median {format_number(median)}"
    return (
        f'<svg width="{width}" height="{height + 4}" role="img" aria-label="{escape(label)}">'
        f"{''.join(parts)}</svg><br><small>{escape(label)}</small>"
    )


def _models(state: FleetState) -> str:
    if state.view.figures is None:
        raise ValueError("the fleet's page draws every figure: fleet_state(every_figure=True)")
    groups: dict[tuple[str, str], list[FleetFigure]] = defaultdict(list)
    for figure in state.view.figures:
        groups[(figure.model, figure.point.metric)].append(figure)
    if not groups:
        return "<p>No figures in the nodes' newest runs.</p>"
    sections = []
    for model in sorted({model for model, _ in groups}):
        # figures without a device (a node's own, the CPU twins') are grouped as "cpu"
        title = "Node figures (no device)" if model == "cpu" else model
        sections.append(f"<h3>{escape(title)}</h3>")
        for (_, metric), figures in sorted(
            (key, value) for key, value in groups.items() if key[0] == model
        ):
            unit = figures[0].point.unit
            lag = [f for f in figures if f.outlier]
            what = "GPU(s)" if figures[0].point.device_index is not None else "node(s)"
            said = (
                f"{len(figures)} {what}; a median of fewer than {state.view.min_samples} is "
                "not trusted: none marked"
                if len(figures) < state.view.min_samples
                else f"{len(figures)} {what}, {len(lag)} more than "
                f"{format_number(state.view.tolerance_percent)}% worse than the median"
            )
            sections.append(
                f'<div class="metric"><div><b>{escape(metric)}</b> ({escape(unit)})<br>'
                f"<small>{escape(said)}</small><br>{_histogram(figures)}</div></div>"
            )
    return "".join(sections)


def render_fleet_html(state: FleetState, *, source: str, generated_at: str) -> str:
    """The page for `state`, read from the history at `source` at `generated_at`."""
    view = state.view
    lagging: dict[str | None, int] = defaultdict(int)
    for figure in view.outliers:
        lagging[figure.point.hostname] += 1
    slower = {run.id: check for run, check in state.slower}
    sdc_nodes = {run.hostname for run in state.sdc}
    out_of_service = state.out_of_service
    node_rows = []
    for run in view.nodes:
        action = state.actions.get(run.id, "")
        outcome = run.verdict.outcome.value
        attention = (
            not run.verdict.passed
            or run.id in slower
            or lagging[run.hostname] > 0
            or run.hostname in sdc_nodes
        )
        css = "pass" if run.verdict.passed else "fail" if outcome == "fail" else "other"
        node_rows.append(
            f'<tr data-attention="{int(attention)}">'
            + _cell(run.hostname or "(unnamed)")
            + _cell(run.verdict.label, css=css)
            + _cell(", ".join(run.verdict.failed_checks))
            + _cell(action, css="fail" if run.id in out_of_service else "")
            + _cell(run.level)
            + _cell(run.started_at[:19].replace("T", " "))
            + _cell(lagging[run.hostname], number=lagging[run.hostname])
            + _cell(slower[run.id].message if run.id in slower else "")
            + _cell("yes" if run.hostname in sdc_nodes else "")
            + _cell(run.id, number=run.id)
            + "</tr>"
        )
    outlier_rows = [
        '<tr data-attention="1">'
        + _cell(f.point.hostname or "(unnamed)")
        + _cell(device_label(f.point.device_index))
        + _cell(f.point.gpu_uuid or "")
        + _cell(f.model)
        + _cell(f.point.metric)
        + _cell(f"{format_number(f.point.value)} {f.point.unit}", number=f.point.value)
        + _cell(format_number(f.fleet_median), number=f.fleet_median)
        + _cell(f"{f.deviation_percent:+.1f}%", number=f.deviation_percent)
        + _cell(f.point.run_id, number=f.point.run_id)
        + "</tr>"
        for f in view.outliers
    ]
    mtbi = state.mtbi
    mtbi_rows = [
        f'<tr data-attention="{int(m.incidents > 0)}">'
        + _cell(m.what)
        + _cell(m.incidents, number=m.incidents)
        + _cell(f"{m.hours:.1f}", number=m.hours)
        + _cell(
            "" if m.mean_hours is None else f"{m.mean_hours:.1f}",
            number=-1.0 if m.mean_hours is None else m.mean_hours,
        )
        + _cell(m.runs, number=m.runs)
        + "</tr>"
        for m in mtbi.nodes
    ]
    gpu_rows = [
        '<tr data-attention="1">'
        + _cell(m.what)
        + _cell(m.serial or "")
        + _cell(", ".join(m.hosts))
        + _cell(m.incidents, number=m.incidents)
        + _cell(
            "" if m.mean_hours is None else f"{m.mean_hours:.1f}",
            number=-1.0 if m.mean_hours is None else m.mean_hours,
        )
        + "</tr>"
        for m in mtbi.gpus
    ]
    drained = [run for run in view.nodes if run.id in out_of_service]
    fleet_hours = mtbi.fleet_hours()
    summary = [
        f"{len(view.nodes)} node(s)",
        f"{len(state.failing)} not passing",
        f"{len(drained)} to take out of service",
        f"{len(view.outliers)} GPU figure(s) lagging",
        f"{len(state.slower)} slower than before",
        f"{len(state.sdc)} with silent data corruption",
        "MTBI per node "
        + ("n/a" if fleet_hours is None else f"{fleet_hours:.1f} h")
        + f" over {format_number(mtbi.days)} d",
    ]
    body = [
        "<h1>gpuaccept fleet</h1>",
        f"<p>From {escape(source)} at {escape(generated_at)} (UTC). Each node's newest accept; "
        "figures from each node's newest run of each kind.</p>",
        '<p class="summary">' + "".join(f"<span>{escape(s)}</span>" for s in summary) + "</p>",
        '<div class="bar"><label>Filter <input id="filter" type="search" size="30"></label> '
        '<label><input id="attention" type="checkbox"> only what needs attention</label></div>',
        "<h2>Nodes</h2>",
        _table(
            "nodes",
            [
                ("node", "node"),
                ("result", "result"),
                ("failed", "failed checks"),
                ("action", "action"),
                ("level", "level"),
                ("started", "started (UTC)"),
                ("lagging", "lagging figures"),
                ("slower", "slower than before"),
                ("sdc", "SDC"),
                ("run", "run"),
            ],
            node_rows,
            len(node_rows),
        ),
        "<h2>Figures across the fleet, per GPU model</h2>",
        _models(state),
        "<h2>Lagging GPUs</h2>",
        _table(
            "outliers",
            [
                ("node", "node"),
                ("device", "device"),
                ("uuid", "UUID"),
                ("model", "model"),
                ("metric", "metric"),
                ("value", "value"),
                ("median", "fleet median"),
                ("deviation", "deviation"),
                ("run", "run"),
            ],
            outlier_rows,
            len(outlier_rows),
        )
        if outlier_rows
        else f"<p>No GPU more than {escape(format_number(view.tolerance_percent))}% worse "
        "than its model's median.</p>",
        "<h2>Silent data corruption (newest burn-in)</h2>",
        "<ul>"
        + "".join(
            f"<li>{escape(str(run.hostname))}: run {run.id} at {escape(run.started_at)}</li>"
            for run in state.sdc
        )
        + "</ul>"
        if state.sdc
        else "<p>No node's newest burn-in found GPUs disagreeing bit for bit.</p>",
        f"<h2>Mean time between incidents ({escape(mtbi.since[:10])} to "
        f"{escape(mtbi.until[:10])})</h2>",
        f"<p>{escape(JUDGED_RUNS[0].upper() + JUDGED_RUNS[1:])}.</p>",
        _table(
            "mtbi",
            [
                ("node", "node"),
                ("incidents", "incidents"),
                ("hours", "hours observed"),
                ("mean", "mean hours between"),
                ("runs", "judged runs"),
            ],
            mtbi_rows,
            len(mtbi_rows),
        ),
        _table(
            "gpus",
            [
                ("uuid", "GPU"),
                ("serial", "serial"),
                ("hosts", "hosts"),
                ("incidents", "incidents"),
                ("mean", "mean hours between"),
            ],
            gpu_rows,
            len(gpu_rows),
        )
        if gpu_rows
        else "<p>No GPU named for a remediation in the window.</p>",
    ]
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        "<title>gpuaccept fleet</title>"
        f"<style>{_STYLE}</style></head><body>{''.join(body)}"
        f"<script>{_SCRIPT}</script></body></html>\n"
    )
