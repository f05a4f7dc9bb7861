"""The fleet on one page (issue #33 §3, issue #53 §2): the decision first, the detail after.

The first screen says how many nodes are in each state, the nodes to act on now (the most
severe action first, the action and why in one line each), what changed since a time the
operator picked (newly failing, newly slower than before, returned to pass) and the stacks in
use with their pass rates, first seen first, so the stack before an upgrade stands beside the
one after. Then each GPU model's distributions, counted in bins by the store (with axes, their
lagging figures named, those with no spread folded into one line), then the node table, those
to act on first, then the lagging GPUs, silent data corruption and the mean time between
incidents.

Paged, so the page stays small whatever the fleet: the node table's first page is in the page,
every other page a file of its own beside it (`PAGE.nodes/2.js`, ...), loaded when shown. Files
beside the page, not JSON fetched: a page opened from disk (file://) may not fetch() a file
(browsers refuse file:// as a cross-origin request) but may load a <script src> beside it, so
the same files serve from disk and from a web server. Sorting or filtering loads every page
first (10,000 nodes: about 2 MB of script files, loaded once).

Every value from the history is escaped; the script reads the rows as JSON and writes them with
`textContent`, never as markup. The page opens with the view in its address
(`page.html#filter=rack12&attention=1&sort=node&page=3`), so a link can point at what to see.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from dataclasses import dataclass
from html import escape
from pathlib import Path

from gpuaccept.compare.fleet import BINS, JUDGED_RUNS, Distribution, FleetState
from gpuaccept.naming import format_number
from gpuaccept.results import device_label

PAGE_ROWS = 100  # the node table's rows a page
ROWS_SHOWN = 200  # rows of the act-now, lagging and MTBI tables in the page (JSON: every one)
NAMES_SHOWN = 50  # nodes named in each list of what changed
OUTLIERS_NAMED = 5  # lagging figures named under a histogram

_STYLE = """
body { font-family: system-ui, sans-serif; margin: 1.5em; color: #222; max-width: 80em; }
h1 { font-size: 1.4em; margin-bottom: 0.2em; } h2 { font-size: 1.15em; margin-top: 1.4em; }
h3 { font-size: 1em; }
table { border-collapse: collapse; margin: 0.5em 0; font-size: 0.85em; }
th, td { border: 1px solid #ccc; padding: 0.2em 0.5em; text-align: left; vertical-align: top; }
th { background: #f3f3f3; }
#nodes th { cursor: pointer; user-select: none; }
th[aria-sort=ascending]::after { content: " \\25B2"; }
th[aria-sort=descending]::after { content: " \\25BC"; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
.pass { color: #176c2f; font-weight: 600; } .fail { color: #b3261e; font-weight: 600; }
.other { color: #777; font-weight: 600; } .warn { color: #8a5a00; font-weight: 600; }
.states span { display: inline-block; margin: 0 0.4em 0.3em 0; padding: 0.25em 0.6em;
  border-radius: 0.3em; background: #f3f3f3; font-weight: 600; }
.states .fail { background: #fde8e7; } .states .pass { background: #e6f4ea; }
.states .other { background: #eee; }
.overlays span { margin-right: 1.2em; }
.bar { position: sticky; top: 0; background: #fff; padding: 0.4em 0; z-index: 2; }
.metrics { display: flex; flex-wrap: wrap; gap: 1.2em; }
.metric { flex: 0 0 26em; }
svg text { font-size: 10px; fill: #444; } svg line.axis { stroke: #888; }
svg rect.bin { fill: #9bb7d4; } svg rect.bin.lag { fill: #d9534f; }
svg line.median { stroke: #1f4e79; stroke-width: 2; }
details { margin: 0.5em 0; }
"""

# The node table: rows as arrays (COLUMNS' order), the first page inline, the others in files
# beside the page, each calling gpuacceptNodes(page, rows). Default view: the stored order (those
# to act on first); a filter or a sort loads every page, then pages the rows it keeps.
_SCRIPT = """
(function () {
  var meta = JSON.parse(document.getElementById('nodes-meta').textContent);
  var chunks = {1: JSON.parse(document.getElementById('nodes-1').textContent)};
  var waiting = {}, view = null, page = 1, sortKey = null, descending = false;
  var body = document.querySelector('#nodes tbody');
  var heads = Array.from(document.querySelectorAll('#nodes th'));
  window.gpuacceptNodes = function (number, rows) {
    chunks[number] = rows;
    (waiting[number] || []).forEach(function (done) { done(); });
    delete waiting[number];
  };
  function load(number, done) {
    if (chunks[number]) { done(); return; }
    if (waiting[number]) { waiting[number].push(done); return; }
    waiting[number] = [done];
    var script = document.createElement('script');
    script.src = meta.dir + '/' + number + '.js';
    script.onerror = function () {
      document.getElementById('nodes-status').textContent =
        'page file ' + script.src + ' is missing: write the page again';
    };
    document.head.appendChild(script);
  }
  function loadAll(done) {
    var left = meta.pages;
    for (var n = 1; n <= meta.pages; n++) {
      load(n, function () { left -= 1; if (left === 0) { done(); } });
    }
  }
  function all() {
    var rows = [];
    for (var n = 1; n <= meta.pages; n++) { rows = rows.concat(chunks[n]); }
    return rows;
  }
  function wanted() {
    var text = document.getElementById('filter').value.trim().toLowerCase();
    var only = document.getElementById('attention').checked;
    return {text: text, only: only, plain: !text && !only && sortKey === null};
  }
  function compute(done) {
    var want = wanted();
    if (want.plain) { view = null; done(); return; }
    loadAll(function () {
      var index = meta.columns.indexOf(sortKey);
      var rows = all().filter(function (r) {
        return (!want.text || r.slice(0, meta.text).join(' ').toLowerCase()
          .indexOf(want.text) >= 0) && (!want.only || r[meta.attention] === 1);
      });
      if (index >= 0) {
        rows = rows.map(function (r, i) { return [r, i]; }).sort(function (a, b) {
          var x = a[0][index], y = b[0][index];
          if (typeof x === 'string') { x = x.toLowerCase(); y = String(y).toLowerCase(); }
          var order = x < y ? -1 : x > y ? 1 : a[1] - b[1];
          return descending && x !== y ? -order : order;
        }).map(function (p) { return p[0]; });
      }
      view = rows; done();
    });
  }
  function cell(text, css) {
    var td = document.createElement('td');
    td.textContent = String(text);
    if (css) { td.className = css; }
    return td;
  }
  function show(rows, total) {
    body.textContent = '';
    rows.forEach(function (r) {
      var tr = document.createElement('tr');
      tr.setAttribute('data-attention', String(r[meta.attention]));
      meta.columns.forEach(function (name, i) {
        var css = meta.css[name] ? r[meta.css[name]] :
          meta.numbers.indexOf(name) >= 0 ? 'num' : '';
        tr.appendChild(cell(r[i], css));
      });
      body.appendChild(tr);
    });
    var pages = Math.max(1, Math.ceil(total / meta.size));
    document.getElementById('nodes-shown').textContent = String(total);
    document.getElementById('nodes-page').textContent = String(page);
    document.getElementById('nodes-pages').textContent = String(pages);
    document.getElementById('prev').disabled = page <= 1;
    document.getElementById('next').disabled = page >= pages;
  }
  function render() {
    if (view === null) {
      load(page, function () { show(chunks[page], meta.total); });
    } else {
      var pages = Math.max(1, Math.ceil(view.length / meta.size));
      page = Math.min(page, pages);
      show(view.slice((page - 1) * meta.size, page * meta.size), view.length);
    }
  }
  function refresh() { compute(render); }
  function sortBy(th, desc) {
    heads.forEach(function (c) { c.removeAttribute('aria-sort'); });
    th.setAttribute('aria-sort', desc ? 'descending' : 'ascending');
    sortKey = th.getAttribute('data-key'); descending = desc;
  }
  heads.forEach(function (th) {
    th.addEventListener('click', function () {
      sortBy(th, th.getAttribute('aria-sort') === 'ascending'); page = 1; refresh();
    });
  });
  document.getElementById('filter').addEventListener('input', function () { page = 1; refresh(); });
  document.getElementById('attention').addEventListener('change', function () {
    page = 1; refresh();
  });
  document.getElementById('prev').addEventListener('click', function () { page -= 1; render(); });
  document.getElementById('next').addEventListener('click', function () { page += 1; render(); });
  var asked = new URLSearchParams(window.location.hash.slice(1));
  document.getElementById('filter').value = asked.get('filter') || '';
  document.getElementById('attention').checked = asked.get('attention') === '1';
  heads.forEach(function (th) {
    if (th.getAttribute('data-key') === asked.get('sort')) {
      sortBy(th, asked.get('desc') === '1');
    }
  });
  var first = parseInt(asked.get('page') || '1', 10);
  page = isFinite(first) && first >= 1 ? Math.min(first, meta.pages) : 1;
  refresh();
})();
"""

# the node table's columns: (key, title); their cells are the row's first entries
COLUMNS = (
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
)
_NUMBERS = ("lagging", "run")
# after the cells: the result's and the action's CSS class, and whether it needs attention
_RESULT_CSS, _ACTION_CSS, _ATTENTION = len(COLUMNS), len(COLUMNS) + 1, len(COLUMNS) + 2


@dataclass(frozen=True)
class FleetPage:
    """The page's HTML and the node table's other pages, each a file (name, text) of the
    directory `directory` beside the page."""

    html: str
    directory: str
    chunks: list[tuple[str, str]]


def _json_in_html(value: object) -> str:
    """JSON inside a <script type="application/json">: no '<' or '&' that HTML would read."""
    return (
        json.dumps(value, ensure_ascii=True, separators=(",", ":"))
        .replace("<", "\\u003c")
        .replace(">", "\\u003e")
        .replace("&", "\\u0026")
    )


def _cell(value: object, *, number: bool = False, css: str = "") -> str:
    classes = " ".join(filter(None, ["num" if number else "", css]))
    attributes = f' class="{classes}"' if classes else ""
    return f"<td{attributes}>{escape(str(value))}</td>"


def _table(table_id: str, headers: list[str], rows: list[str]) -> str:
    head = "".join(f"<th>{escape(title)}</th>" for title in headers)
    return (
        f'<table id="{table_id}"><thead><tr>{head}</tr></thead>'
        f"<tbody>{''.join(rows)}</tbody></table>"
    )


def _more(shown: int, total: int, where: str) -> str:
    if total <= shown:
        return ""
    return f"<p>… and {format_number(total - shown)} more ({escape(where)}).</p>"


def _states(state: FleetState) -> str:
    counts = state.counts()
    css = {"pass": "pass", "fail": "fail"}
    badges = "".join(
        f'<span class="{css.get(what, "other")}">{escape(format_number(n))} {escape(what)}</span>'
        for what, n in sorted(counts.items(), key=lambda item: (item[0] != "fail", item[0]))
    )
    view = state.view
    gpu_lag, cpu_lag = state.lagging()
    overlays = [
        f"{len(state.out_of_service)} to take out of service",
        f"{gpu_lag} GPU figure(s) lagging",
        f"{len(state.slower)} slower than before",
        f"{len(state.sdc)} with silent data corruption",
    ]
    if cpu_lag:
        overlays.insert(2, f"{cpu_lag} CPU-twin figure(s) lagging")
    return (
        f'<p class="states"><b>{escape(format_number(len(view.nodes)))} node(s)</b>, each by '
        f"its newest accept: {badges or '<span>none</span>'}</p>"
        '<p class="overlays">' + "".join(f"<span>{escape(s)}</span>" for s in overlays) + "</p>"
    )


def _act_now(state: FleetState) -> str:
    if not state.act_now:
        return "<h2>Act now</h2><p>Nothing: no node's newest accept asks for an action.</p>"
    shown = state.act_now[:ROWS_SHOWN]
    out_of_service = {"reset-gpu", "reboot-node", "drain", "replace"}
    rows = [
        "<tr>"
        + _cell(e.node or "(unnamed)")
        + _cell(e.action, css="fail" if e.action in out_of_service else "warn")
        + _cell(" ".join(e.why.split()) + (f" (+{e.more} more)" if e.more else ""))
        + _cell(e.run_id, number=True)
        + "</tr>"
        for e in shown
    ]
    return (
        f"<h2>Act now: {escape(format_number(len(state.act_now)))} node(s), the most severe "
        "action first</h2>"
        + _table("act-now", ["node", "action", "why", "run"], rows)
        + _more(len(shown), len(state.act_now), "the node table lists them first")
    )


def _changes(state: FleetState) -> str:
    changes = state.changes
    if changes is None:
        return ""
    items = []
    for title, found in (
        ("newly failing", changes.newly_failing),
        ("newly slower than before", changes.newly_slow),
        ("returned to pass", changes.returned),
    ):
        names = ", ".join(c.node or "(unnamed)" for c in found[:NAMES_SHOWN])
        more = f" and {len(found) - NAMES_SHOWN} more" if len(found) > NAMES_SHOWN else ""
        items.append(
            f"<li><b>{len(found)} {escape(title)}</b>{': ' if names else ''}"
            f"{escape(names + more)}</li>"
        )
    return (
        f"<h2>Changed since {escape(changes.since[:16].replace('T', ' '))} UTC</h2>"
        f"<ul>{''.join(items)}</ul>"
    )


def _stacks(state: FleetState) -> str:
    if not state.stacks:
        return ""
    from datetime import UTC, datetime

    def when(seconds: float) -> str:
        return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%d %H:%M")

    rows = [
        "<tr>"
        + _cell(s.stack)
        + _cell(format_number(s.nodes_now), number=True)
        + _cell(format_number(s.judged), number=True)
        + _cell(f"{100 * s.passed / s.judged:.1f}%" if s.judged else "-", number=True)
        + _cell(when(s.first))
        + _cell(when(s.last))
        + "</tr>"
        for s in state.stacks
    ]
    return (
        f"<h2>Stacks in use: accept runs of the UTC days {escape(state.mtbi.since[:10])} to "
        f"{escape(state.mtbi.until[:10])}, first seen first</h2>"
        + _table(
            "stacks",
            ["stack", "nodes now", "judged runs", "pass rate", "first", "last"],
            rows,
        )
    )


def _histogram(d: Distribution) -> str:
    """An SVG histogram with axes: BINS bars, the lagging share of each in red, the median as a
    line, the least, the median and the greatest value under the x axis, the tallest bar's
    count beside the y axis."""
    left, width, height, top_pad = 56, 360, 80, 14
    tallest = max(d.bins)
    bar = width / BINS
    span = d.high - d.low
    parts = [
        f'<line class="axis" x1="{left}" x2="{left}" y1="{top_pad}" y2="{height + top_pad}">'
        "</line>",
        f'<line class="axis" x1="{left}" x2="{left + width}" y1="{height + top_pad}" '
        f'y2="{height + top_pad}"></line>',
        f'<text x="{left - 4}" y="{top_pad + 8}" text-anchor="end">{tallest} '
        f"{'GPUs' if d.gpu else 'nodes'}</text>",
        f'<text x="{left - 4}" y="{height + top_pad}" text-anchor="end">0</text>',
    ]
    for i, (count, lag) in enumerate(zip(d.bins, d.lagging, strict=True)):
        if not count:
            continue
        start = d.low + span * i / BINS
        title = f"{format_number(start)} to {format_number(start + span / BINS)}: {count}"
        if lag:
            title += f", {lag} lagging"
        h = max(2.0, height * count / tallest)  # a bin of one among thousands still shows
        x = left + i * bar
        parts.append(
            f'<rect class="bin" x="{x:.1f}" y="{top_pad + height - h:.1f}" '
            f'width="{max(bar - 1, 1):.1f}" height="{h:.1f}"><title>{escape(title)}</title></rect>'
        )
        if lag:
            hl = max(2.0, height * lag / tallest)
            parts.append(
                f'<rect class="bin lag" x="{x:.1f}" y="{top_pad + height - hl:.1f}" '
                f'width="{max(bar - 1, 1):.1f}" height="{hl:.1f}"></rect>'
            )
    mx = left + (d.median - d.low) / span * width
    parts.append(
        f'<line class="median" x1="{mx:.1f}" x2="{mx:.1f}" y1="{top_pad}" '
        f'y2="{height + top_pad}"></line>'
    )
    base = height + top_pad + 12
    # the median's label kept inside the drawing near either end
    anchor = "end" if mx > left + width - 50 else "start" if mx < left + 50 else "middle"
    parts += [
        f'<text x="{left}" y="{base}" text-anchor="start">{escape(format_number(d.low))}</text>',
        f'<text x="{mx:.1f}" y="{top_pad - 4}" text-anchor="{anchor}">median '
        f"{escape(format_number(d.median))}</text>",
        f'<text x="{left + width}" y="{base}" text-anchor="end">'
        f"{escape(format_number(d.high))} {escape(d.unit)}</text>",
    ]
    what = "GPUs" if d.gpu else "nodes"
    label = (
        f"{d.metric}: {d.count} {what} from {format_number(d.low)} to {format_number(d.high)} "
        f"{d.unit}, median {format_number(d.median)}"
    )
    return (
        f'<svg width="{left + width + 8}" height="{base + 4}" role="img" '
        f'aria-label="{escape(label)}">{"".join(parts)}</svg>'
    )


def _distributions(state: FleetState) -> str:
    if state.distributions is None:
        raise ValueError("the fleet's page draws distributions: fleet_state(distributions=True)")
    if not state.distributions:
        return "<h2>Figures across the fleet</h2><p>No figures in the nodes' newest runs.</p>"
    sections = ["<h2>Figures across the fleet, per GPU model</h2>"]
    tolerance = format_number(state.view.tolerance_percent)
    for model in sorted({d.model for d in state.distributions}, key=lambda m: (m == "cpu", m)):
        mine = [d for d in state.distributions if d.model == model]
        spread = [d for d in mine if d.spread]
        flat = [d for d in mine if not d.spread]
        title = "CPU-twin and node figures (no GPU: not GPU figures)" if model == "cpu" else model
        sections.append(f"<h3>{escape(title)}</h3>")
        blocks = []
        for d in spread:
            what = "GPU(s)" if d.gpu else "node(s)"
            said = (
                f"{d.count} {what}; a median of fewer than {state.view.min_samples} is not "
                "trusted: none marked"
                if not d.trusted
                else f"{d.count} {what}, {len(d.outliers)} more than {tolerance}% worse than "
                "the median"
            )
            named = "".join(
                f"<li>{escape(f.point.hostname or '(unnamed)')} "
                f"{escape(device_label(f.point.device_index) if d.gpu else '')} "
                f"{escape(format_number(f.point.value))} ({f.deviation_percent:+.1f}%)</li>"
                for f in d.outliers[:OUTLIERS_NAMED]
            )
            more = (
                f"<li>… {len(d.outliers) - OUTLIERS_NAMED} more in the lagging table</li>"
                if len(d.outliers) > OUTLIERS_NAMED
                else ""
            )
            blocks.append(
                f'<div class="metric"><b>{escape(d.metric)}</b> ({escape(d.unit)})<br>'
                f"<small>{escape(said)}</small><br>{_histogram(d)}"
                + (f"<ul>{named}{more}</ul>" if named else "")
                + "</div>"
            )
        if blocks:
            sections.append(f'<div class="metrics">{"".join(blocks)}</div>')
        if flat:
            items = "".join(
                f"<li>{escape(d.metric)}: {escape(format_number(d.low))} {escape(d.unit)} on "
                f"all {d.count}</li>"
                for d in flat
            )
            sections.append(
                f"<details><summary>{len(flat)} figure(s) with no spread (the same on every "
                f"{'GPU' if model != 'cpu' else 'node'})</summary><ul>{items}</ul></details>"
            )
    return "".join(sections)


def _node_rows(state: FleetState) -> list[list[object]]:
    """The node table's rows, those to act on first: COLUMNS' cells, then the result's and the
    action's CSS class and whether it needs attention (1 or 0)."""
    lagging: dict[str, int] = {}
    for figure in state.view.outliers:
        key = figure.point.hostname or ""
        lagging[key] = lagging.get(key, 0) + 1
    slower = {run.id: check.message for run, check in state.slower}
    sdc = {run.hostname or "" for run in state.sdc}
    out_of_service = state.out_of_service
    rows: list[list[object]] = []
    for run in state.attention_order():
        node = run.hostname or ""
        verdict = run.verdict
        outcome = verdict.outcome.value
        attention = (
            not verdict.passed or run.id in slower or lagging.get(node, 0) > 0 or node in sdc
        )
        rows.append(
            [
                run.hostname or "(unnamed)",
                verdict.label,
                ", ".join(verdict.failed_checks),
                state.actions.get(run.id, ""),
                run.level,
                run.started_at[:19].replace("T", " "),
                lagging.get(node, 0),
                slower.get(run.id, ""),
                "yes" if node in sdc else "",
                run.id,
                "pass" if verdict.passed else "fail" if outcome == "fail" else "other",
                "fail" if run.id in out_of_service else "",
                int(attention),
            ]
        )
    return rows


def _nodes(state: FleetState, directory: str) -> tuple[str, list[tuple[str, str]]]:
    rows = _node_rows(state)
    pages = [rows[i : i + PAGE_ROWS] for i in range(0, len(rows), PAGE_ROWS)] or [[]]
    meta = {
        "dir": directory,
        "pages": len(pages),
        "size": PAGE_ROWS,
        "total": len(rows),
        "columns": [key for key, _ in COLUMNS],
        "numbers": list(_NUMBERS),
        "css": {"result": _RESULT_CSS, "action": _ACTION_CSS},
        "attention": _ATTENTION,
        "text": len(COLUMNS),  # the cells a filter reads
    }
    chunks = [
        (f"{number}.js", f"gpuacceptNodes({number},{json.dumps(page, ensure_ascii=True)});\n")
        for number, page in enumerate(pages[1:], start=2)
    ]
    head = "".join(f'<th data-key="{key}">{escape(title)}</th>' for key, title in COLUMNS)
    total = format_number(len(rows))
    html = (
        f"<h2>Nodes, those to act on first ({escape(total)})</h2>"
        '<div class="bar"><label>Filter <input id="filter" type="search" size="30"></label> '
        '<label><input id="attention" type="checkbox"> only what needs attention</label> '
        '<button id="prev" type="button">previous</button> page <span id="nodes-page">1</span> '
        f'of <span id="nodes-pages">{len(pages)}</span> '
        '<button id="next" type="button">next</button> · '
        f'<span id="nodes-shown">{len(rows)}</span> of {len(rows)} shown '
        '<span id="nodes-status"></span></div>'
        f'<table class="rows" id="nodes"><thead><tr>{head}</tr></thead><tbody></tbody></table>'
        f'<script type="application/json" id="nodes-meta">{_json_in_html(meta)}</script>'
        f'<script type="application/json" id="nodes-1">{_json_in_html(pages[0])}</script>'
    )
    return html, chunks


def _lagging(state: FleetState) -> str:
    view = state.view
    if not view.outliers:
        return (
            f"<h2>Lagging figures</h2><p>No figure more than "
            f"{escape(format_number(view.tolerance_percent))}% worse than its model's median.</p>"
        )
    worst = sorted(view.outliers, key=lambda f: -abs(f.deviation_percent))
    rows = [
        "<tr>"
        + _cell(f.point.hostname or "(unnamed)")
        + _cell(device_label(f.point.device_index) if f.model != "cpu" else "node (CPU twin)")
        + _cell(f.point.gpu_uuid or "")
        + _cell(f.model)
        + _cell(f.point.metric)
        + _cell(f"{format_number(f.point.value)} {f.point.unit}", number=True)
        + _cell(format_number(f.fleet_median), number=True)
        + _cell(f"{f.deviation_percent:+.1f}%", number=True)
        + _cell(f.point.run_id, number=True)
        + "</tr>"
        for f in worst[:ROWS_SHOWN]
    ]
    return (
        "<h2>Lagging figures, the worst first</h2>"
        + _table(
            "outliers",
            [
                *("node", "device", "UUID", "model", "metric", "value", "fleet median"),
                *("deviation", "run"),
            ],
            rows,
        )
        + _more(len(rows), len(worst), "`gpuaccept history fleet --json` lists every one")
    )


def _mtbi(state: FleetState) -> str:
    mtbi = state.mtbi
    hit = [m for m in mtbi.nodes if m.incidents]
    node_rows = [
        "<tr>"
        + _cell(m.what)
        + _cell(m.incidents, number=True)
        + _cell(f"{m.hours:.1f}", number=True)
        + _cell("" if m.mean_hours is None else f"{m.mean_hours:.1f}", number=True)
        + _cell(m.runs, number=True)
        + "</tr>"
        for m in hit[:ROWS_SHOWN]
    ]
    gpu_rows = [
        "<tr>"
        + _cell(m.what)
        + _cell(m.serial or "")
        + _cell(", ".join(m.hosts))
        + _cell(m.incidents, number=True)
        + _cell("" if m.mean_hours is None else f"{m.mean_hours:.1f}", number=True)
        + "</tr>"
        for m in mtbi.gpus[:ROWS_SHOWN]
    ]
    fleet_hours = mtbi.fleet_hours()
    return (
        f"<h2>Mean time between incidents ({escape(mtbi.since[:10])} to "
        f"{escape(mtbi.until[:10])})</h2>"
        f"<p>{len(hit)} of {len(mtbi.nodes)} node(s) had an incident; the fleet's MTBI per "
        f"node {'n/a' if fleet_hours is None else f'{fleet_hours:.1f} h'}. "
        f"{escape(JUDGED_RUNS[0].upper() + JUDGED_RUNS[1:])}.</p>"
        + (
            _table(
                "mtbi",
                ["node", "incidents", "hours observed", "mean hours between", "judged runs"],
                node_rows,
            )
            + _more(len(node_rows), len(hit), "`history fleet --json` lists every one")
            if node_rows
            else ""
        )
        + (
            _table("gpus", ["GPU", "serial", "hosts", "incidents", "mean hours between"], gpu_rows)
            + _more(len(gpu_rows), len(mtbi.gpus), "`history fleet --json` lists every one")
            if gpu_rows
            else "<p>No GPU named for a remediation in the window.</p>"
        )
    )


def render_fleet_html(
    state: FleetState, *, source: str, generated_at: str, directory: str = "fleet.nodes"
) -> FleetPage:
    """The page for `state`, read from the history at `source` at `generated_at`; the node
    table's pages after the first go in `directory` (beside the page, named relative to it)."""
    nodes, chunks = _nodes(state, directory)
    sdc = (
        "<h2>Silent data corruption (newest burn-in)</h2><ul>"
        + "".join(
            f"<li>{escape(str(run.hostname))}: run {run.id} at {escape(run.started_at)}</li>"
            for run in state.sdc
        )
        + "</ul>"
        if state.sdc
        else ""
    )
    body = [
        "<h1>gpuaccept fleet</h1>",
        f"<p>From {escape(source)} at {escape(generated_at)} (UTC). Each node by its newest "
        "accept; figures from each node's newest run of each kind.</p>",
        _states(state),
        _act_now(state),
        _changes(state),
        _stacks(state),
        _distributions(state),
        nodes,
        _lagging(state),
        sdc,
        _mtbi(state),
    ]
    html = (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        "<title>gpuaccept fleet</title>"
        f"<style>{_STYLE}</style></head><body>{''.join(body)}"
        f"<script>{_SCRIPT}</script></body></html>\n"
    )
    return FleetPage(html, directory, chunks)


def pages_directory(html: Path) -> Path:
    """Where the node table's other pages of the page at `html` go: `NAME.nodes` beside it."""
    return html.with_name(html.name + ".nodes")


def write_fleet_page(page: FleetPage, html: Path) -> None:
    """The page and its directory of pages, each whole: the directory is written under another
    name and put in place (the one before it removed), then the page written atomically; an
    error while the pages are written leaves the page and pages before them as they were. The
    page names its directory relatively, so the two move together."""
    from gpuaccept.output_files import write_text_atomically

    directory = html.parent / page.directory
    fresh = Path(tempfile.mkdtemp(prefix=f".{directory.name}.", dir=html.parent))
    try:
        for name, text in page.chunks:
            (fresh / name).write_text(text, encoding="utf-8")
        os.chmod(fresh, 0o755)  # mkdtemp's 0700 would keep a web server out
        old = None
        if directory.is_dir() and not directory.is_symlink():
            old = Path(tempfile.mkdtemp(prefix=f".{directory.name}.old.", dir=html.parent))
            os.replace(directory, old / "pages")
        os.replace(fresh, directory)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
    except BaseException:
        shutil.rmtree(fresh, ignore_errors=True)
        raise
    write_text_atomically(html, page.html)
