"""The fleet on one page (issue #33 §3, issue #53 §2): `report --fleet --html PAGE` from either
store, the decision first (states, what to act on, what changed, the stacks), distributions with
axes and their laggards named, every value escaped, the node table paged in files beside the
page; its script checked in a real headless Chromium (Debian's `chromium`): the filter, the sort
and the page in the address select and order the rows a person would see, loading the other
pages' files when they are needed."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gpuaccept.cli import app
from gpuaccept.compare.fleet import fleet_state
from gpuaccept.report.fleet_html import (
    PAGE_ROWS,
    FleetPage,
    pages_directory,
    render_fleet_html,
    write_fleet_page,
)
from gpuaccept.store.history import History
from tests.run_reports import gpu_report, rejudged
from tests.store.test_history_stores import _corpus

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
needs_chromium = pytest.mark.skipif(
    CHROMIUM is None, reason="no headless Chromium here (Debian: apt-get install chromium)"
)


def _page(location: str | Path, directory: str = "fleet.html.nodes") -> FleetPage:
    with History.open(location, create=False) as store:
        state = fleet_state(
            store, tolerance_percent=10.0, min_samples=3, mtbi_days=30.0, distributions=True
        )
    return render_fleet_html(
        state, source="the history", generated_at="2026-11-26T00:00:00", directory=directory
    )


def _data(page: FleetPage) -> list[list[object]]:
    """Every row of the node table as the page and its files hold them, in their order."""
    first = re.search(r'<script type="application/json" id="nodes-1">(.*?)</script>', page.html)
    assert first is not None
    rows: list[list[object]] = json.loads(first.group(1))
    for name, text in page.chunks:
        found = re.fullmatch(r"gpuacceptNodes\((\d+),(.*)\);\n", text, re.S)
        assert found is not None, name
        assert name == f"{found.group(1)}.js", name
        rows += json.loads(found.group(2))
    return rows


def _rows(html: str, table: str) -> list[list[str]]:
    """The cell texts of each body row of a table, as the page or a DOM dump shows them."""
    body = re.search(rf'<table[^>]* id="{table}">.*?<tbody>(.*?)</tbody>', html, re.S)
    assert body is not None, table
    return [
        [re.sub(r"<[^>]+>", "", c) for c in re.findall(r"<td[^>]*>(.*?)</td>", cells)]
        for cells in re.findall(r"<tr[^>]*>(.*?)</tr>", body.group(1), re.S)
    ]


@pytest.fixture
def corpus_history(tmp_path: Path) -> Path:
    path = tmp_path / "history.sqlite"
    with History.open(path) as history:
        history.append(_corpus())
    return path


def test_the_page_leads_with_what_to_do(corpus_history: Path) -> None:
    page = _page(corpus_history)
    html = page.html
    # the first screen, in this order: states, act now, what changed, stacks, figures, nodes
    places = [
        html.index(text)
        for text in (
            "2 fail</span>",
            "<h2>Act now: 3 node(s)",
            "<h2>Changed since",
            "<h2>Stacks in use",
            "<h2>Figures across the fleet",
            "<h2>Nodes, those to act on first (5)",
        )
    ]
    assert places == sorted(places)
    assert [row[:2] for row in _rows(html, "act-now")] == [
        ["node-a", "reset-gpu"],
        ["node-b", "reset-gpu"],
        ["node-e", "monitor"],
    ]
    assert "2 to take out of service" in html
    assert "1 GPU figure(s) lagging" in html
    # the node table: those to act on first, then the rest by name
    rows = _data(page)
    assert [row[0] for row in rows] == ["node-a", "node-b", "node-e", "node-c", "node-d"]
    by_node = {row[0]: row for row in rows}
    assert str(by_node["node-b"][1]).startswith("FAIL")
    assert by_node["node-b"][3] == "reset-gpu"
    assert by_node["node-b"][6] == 1  # its GPU 1 lags the fleet (600 against 778)
    assert "12.5% below" in str(by_node["node-e"][7])
    assert [row[12] for row in rows] == [1, 1, 1, 0, 0]  # needs attention
    (outlier,) = _rows(html, "outliers")
    assert outlier[:2] == ["node-b", "gpu1"]
    assert outlier[7] == "-22.8%"


def test_the_distributions_have_axes_name_their_laggards_and_fold_what_does_not_spread(
    corpus_history: Path,
) -> None:
    html = _page(corpus_history).html
    # one histogram: the H100s' matmul, which spreads; the figures equal everywhere fold away
    (svg,) = re.findall(r"<svg.*?</svg>", html, re.S)
    assert '<line class="axis"' in svg
    texts = re.findall(r"<text[^>]*>(.*?)</text>", svg)
    assert texts == ["2 GPUs", "0", "600", "median 778", "800 TFLOPS"]
    assert "<li>node-b gpu1 600 (-22.8%)</li>" in html  # the laggard named beside it
    folded = re.findall(r"<details><summary>(.*?)</summary>", html)
    assert folded == [
        "1 figure(s) with no spread (the same on every GPU)",
        "1 figure(s) with no spread (the same on every node)",
    ]
    # figures with no GPU are not called GPU figures
    assert "<h3>CPU-twin and node figures (no GPU: not GPU figures)</h3>" in html


def test_both_stores_draw_the_same_page(corpus_history: Path, pg_history: str) -> None:
    with History.open(pg_history) as history:
        history.append(_corpus())
    assert _page(corpus_history) == _page(pg_history)


def test_every_value_from_the_history_is_escaped(tmp_path: Path) -> None:
    hostile = '<script>alert("x")</script>"><img src=x onerror=alert(1)>'
    runs = [gpu_report(f"n{i}", [800.0]) for i in range(3)]
    bad = gpu_report("placeholder", [500.0], passed=False)
    bad = rejudged(bad, environment={**bad.environment, "system": {"hostname": hostile}})
    path = tmp_path / "h.sqlite"
    with History.open(path) as history:
        history.append([(r, "t") for r in [*runs, bad]])
    page = _page(path)
    html = page.html
    assert html.count("<script>") == 1  # the page's own
    assert "<img" not in html
    assert "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;" in html  # in the act-now table
    assert _data(page)[0][0] == hostile  # the node table's data reads back as it was stored


def test_report_fleet_is_refused_in_one_line_when_asked_wrong(
    corpus_history: Path, tmp_path: Path
) -> None:
    runner = CliRunner()
    base = ["report", "--fleet", "--history", str(corpus_history)]
    for argv, said in (
        ([*base], "--html PAGE"),
        ([*base, "--html", str(tmp_path / "p.html"), "--markdown", "-"], "--html PAGE"),
        ([*base, "3", "--html", str(tmp_path / "p.html")], "name no run"),
        (
            [
                "report",
                "--fleet",
                "--html",
                str(tmp_path / "p.html"),
                "--history",
                str(tmp_path / "none.sqlite"),
            ],
            "no such database",
        ),
        ([*base, "--html", str(corpus_history)], "is also the input --history"),
        (["report"], "name a run id"),
    ):
        result = runner.invoke(app, argv)
        assert result.exit_code == 2, (argv, result.output)
        (line,) = result.stderr.strip().splitlines()
        assert said in line, line
    assert not (tmp_path / "p.html").exists()
    written = runner.invoke(app, [*base, "--html", str(tmp_path / "p.html")])
    assert written.exit_code == 0, written.output
    assert (tmp_path / "p.html").read_text().startswith("<!DOCTYPE html>")


def test_a_page_whose_pages_cannot_be_written_is_refused(
    corpus_history: Path, tmp_path: Path
) -> None:
    page = tmp_path / "fleet.html"
    pages_directory(page).write_text("a file where the pages go")
    result = CliRunner().invoke(
        app, ["report", "--fleet", "--history", str(corpus_history), "--html", str(page)]
    )
    assert result.exit_code == 2, result.output
    (line,) = result.stderr.strip().splitlines()
    assert line.endswith(f"{pages_directory(page)}: cannot write the fleet's page: Not a directory")
    assert not page.exists()
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []  # no leftovers


def _dom(page: Path, fragment: str = "") -> str:
    """The page's DOM after its script ran, in headless Chromium."""
    assert CHROMIUM is not None
    done = subprocess.run(
        [
            CHROMIUM,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--virtual-time-budget=5000",
            "--dump-dom",
            page.as_uri() + fragment,
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return done.stdout


def _shown(dom: str) -> list[list[str]]:
    return _rows(dom, "nodes")


@needs_chromium
def test_the_filter_and_sort_in_the_address_select_and_order_rows(
    corpus_history: Path, tmp_path: Path
) -> None:
    html = tmp_path / "fleet.html"
    write_fleet_page(_page(corpus_history), html)
    # opened as it is: those to act on first
    assert [cells[0] for cells in _shown(_dom(html))] == [
        "node-a",
        "node-b",
        "node-e",
        "node-c",
        "node-d",
    ]
    assert [cells[0] for cells in _shown(_dom(html, "#filter=node-b"))] == ["node-b"]
    # what needs attention: the two failing, node-b's lagging GPU, node-e slower than before
    assert [cells[0] for cells in _shown(_dom(html, "#attention=1"))] == [
        "node-a",
        "node-b",
        "node-e",
    ]
    newest_first = _shown(_dom(html, "#sort=run&desc=1"))
    assert [cells[9] for cells in newest_first] == ["10", "9", "8", "7", "5"]
    by_node = _shown(_dom(html, "#sort=node"))
    assert [cells[0] for cells in by_node] == ["node-a", "node-b", "node-c", "node-d", "node-e"]
    counted = _dom(html, "#filter=node-b")
    assert '<span id="nodes-shown">1</span> of 5 shown' in counted


@needs_chromium
def test_the_node_table_is_paged_in_files_beside_the_page(tmp_path: Path) -> None:
    count = 2 * PAGE_ROWS + 50
    path = tmp_path / "h.sqlite"
    with History.open(path) as history:
        history.append(
            [
                (gpu_report(f"node{i:04d}", [800.0 - (i % 7)], passed=i % 100 != 3), "t")
                for i in range(count)
            ]
        )
    html = tmp_path / "fleet.html"
    page = _page(path)
    write_fleet_page(page, html)
    assert sorted(p.name for p in pages_directory(html).iterdir()) == ["2.js", "3.js"]
    failing = ["node0003", "node0103", "node0203"]
    first = _shown(_dom(html))
    assert len(first) == PAGE_ROWS
    assert [cells[0] for cells in first[:4]] == [*failing, "node0000"]
    # page 3: its rows come from 3.js alone
    third = _dom(html, "#page=3")
    assert [cells[0] for cells in _shown(third)][-1] == f"node{count - 1:04d}"
    assert len(_shown(third)) == count - 2 * PAGE_ROWS
    assert '<span id="nodes-page">3</span>' in third
    # a filter reads every page: a node of page 3, and the failing ones from every page
    assert [cells[0] for cells in _shown(_dom(html, "#filter=node0240"))] == ["node0240"]
    assert [cells[0] for cells in _shown(_dom(html, "#attention=1"))] == failing
    # written again for a smaller fleet: the pages of the larger one are gone
    with History.open(tmp_path / "small.sqlite") as small:
        small.append([(gpu_report("solo", [800.0]), "t")])
    write_fleet_page(_page(tmp_path / "small.sqlite"), html)
    assert list(pages_directory(html).iterdir()) == []
    assert [cells[0] for cells in _shown(_dom(html))] == ["solo"]
    # a page whose files were lost says so, rather than showing an empty table as the fleet
    write_fleet_page(page, html)
    (pages_directory(html) / "3.js").unlink()
    assert "is missing: write the page again" in _dom(html, "#page=3")


@needs_chromium
@pytest.mark.slow
def test_two_thousand_nodes_make_a_small_page_a_browser_opens_and_filters(
    tmp_path: Path,
) -> None:
    path = tmp_path / "h.sqlite"
    with History.open(path) as history:
        history.append(
            [
                (gpu_report(f"node{i:04d}", [800.0 - (i % 7)] * 8, passed=i % 100 != 0), "t")
                for i in range(2000)
            ]
        )
    began = time.monotonic()
    page = _page(path)
    rendered = time.monotonic() - began
    html = tmp_path / "fleet.html"
    write_fleet_page(page, html)
    # the histograms are bins, not one mark per GPU; the node table's first page alone is in it
    assert len(page.html) < 200_000, len(page.html)
    assert page.html.count("<rect") < 200
    assert len(page.chunks) == 2000 // PAGE_ROWS - 1
    rows = _shown(_dom(html, "#attention=1"))
    assert [cells[0] for cells in rows] == [f"node{i:04d}" for i in range(0, 2000, 100)]
    print(f"2,000 nodes x 8 GPUs: rendered in {rendered:.2f} s, {len(page.html) / 1e6:.2f} MB")


def test_report_fleet_judges_as_history_fleet_is_told(corpus_history: Path, tmp_path: Path) -> None:
    runner = CliRunner()
    page = tmp_path / "p.html"
    base = ["report", "--fleet", "--history", str(corpus_history), "--html", str(page)]
    assert runner.invoke(app, base).exit_code == 0
    assert "1 GPU figure(s) lagging" in page.read_text()
    # nine GPUs needed for a median: the H100s' eight are not enough to flag one
    assert runner.invoke(app, [*base, "--min-gpus", "9"]).exit_code == 0
    assert "0 GPU figure(s) lagging" in page.read_text()
    # node-b's 600 is 22.8% below the median: a 25% tolerance lets it be
    assert runner.invoke(app, [*base, "--tolerance", "25"]).exit_code == 0
    assert "0 GPU figure(s) lagging" in page.read_text()
    for argv, said in (
        ([*base, "--mtbi-days", "0"], "--mtbi-days 0: give days above 0"),
        (["report", "1", "--history", str(corpus_history), "--tolerance", "5"], "give --fleet"),
    ):
        result = runner.invoke(app, argv)
        assert result.exit_code == 2, result.output
        (line,) = result.stderr.strip().splitlines()
        assert said in line, line
