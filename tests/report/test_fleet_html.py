"""The fleet on one page (issue #33 §3): `report --fleet --html PAGE` from either store, every
value escaped, bounded in size, and its script checked in a real headless Chromium (Debian's
`chromium`): the filter and the sort in the page's address select and order the rows a person
would see."""

from __future__ import annotations

import re
import shutil
import subprocess
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gpuaccept.cli import app
from gpuaccept.compare.fleet import fleet_state
from gpuaccept.report.fleet_html import render_fleet_html
from gpuaccept.store.history import History
from tests.run_reports import gpu_report, rejudged
from tests.store.test_history_stores import _corpus

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
needs_chromium = pytest.mark.skipif(
    CHROMIUM is None, reason="no headless Chromium here (Debian: apt-get install chromium)"
)


def _page(location: str | Path) -> str:
    with History.open(location, create=False) as store:
        state = fleet_state(
            store, tolerance_percent=10.0, min_samples=3, mtbi_days=30.0, every_figure=True
        )
    return render_fleet_html(state, source="the history", generated_at="2026-11-26T00:00:00")


def _rows(html: str, table: str) -> list[tuple[bool, list[str]]]:
    """(hidden, cell texts) of each body row of a table, as a DOM dump shows them."""
    body = re.search(rf'<table class="rows" id="{table}">.*?<tbody>(.*?)</tbody>', html, re.S)
    assert body is not None, table
    rows = []
    for attributes, cells in re.findall(r"<tr([^>]*)>(.*?)</tr>", body.group(1), re.S):
        texts = [re.sub(r"<[^>]+>", "", c) for c in re.findall(r"<td[^>]*>(.*?)</td>", cells)]
        rows.append(("hidden" in attributes, texts))
    return rows


@pytest.fixture
def corpus_history(tmp_path: Path) -> Path:
    path = tmp_path / "history.sqlite"
    with History.open(path) as history:
        history.append(_corpus())
    return path


def test_the_page_says_what_the_fleet_is(corpus_history: Path) -> None:
    html = _page(corpus_history)
    nodes = _rows(html, "nodes")
    assert [cells[0] for _, cells in nodes] == ["node-a", "node-b", "node-c", "node-d", "node-e"]
    by_node = {cells[0]: cells for _, cells in nodes}
    # node-b's newest accept failed on a pending row remap: reset the GPU
    assert by_node["node-b"][1].startswith("FAIL")
    assert by_node["node-b"][3] == "reset-gpu"
    assert by_node["node-b"][6] == "1"  # its GPU 1 lags the fleet (600 against 778)
    assert "12.5% below" in by_node["node-e"][7]
    assert by_node["node-c"][1] == "PASS"
    assert by_node["node-c"][3] == ""
    assert "2 to take out of service" in html
    assert "1 GPU figure(s) lagging" in html
    (outlier,) = _rows(html, "outliers")
    assert outlier[1][:2] == ["node-b", "gpu1"]
    assert outlier[1][7] == "-22.8%"
    assert html.count("<svg") == 3  # one histogram per model and metric
    assert "Node figures (no device)" in html


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
    html = _page(path)
    assert html.count("<script>") == 1  # the page's own
    assert "<img" not in html
    assert "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;" in html


def test_report_fleet_is_refused_in_one_line_when_asked_wrong(
    corpus_history: Path, tmp_path: Path
) -> None:
    runner = CliRunner()
    base = ["report", "--fleet", "--history", str(corpus_history)]
    for argv, said in (
        ([*base], "give --html PAGE"),
        ([*base, "--html", str(tmp_path / "p.html"), "--markdown", "-"], "give --html PAGE"),
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


@needs_chromium
def test_the_filter_and_sort_in_the_address_select_and_order_rows(
    corpus_history: Path, tmp_path: Path
) -> None:
    page = tmp_path / "fleet.html"
    page.write_text(_page(corpus_history))
    shown = _rows(_dom(page), "nodes")
    assert [hidden for hidden, _ in shown] == [False] * 5
    filtered = _rows(_dom(page, "#filter=node-b"), "nodes")
    assert [cells[0] for hidden, cells in filtered if not hidden] == ["node-b"]
    # what needs attention: the two failing, node-b's lagging GPU, node-e slower than before
    attention = _rows(_dom(page, "#attention=1"), "nodes")
    assert [cells[0] for hidden, cells in attention if not hidden] == [
        "node-a",
        "node-b",
        "node-e",
    ]
    newest_first = _rows(_dom(page, "#sort=run&desc=1"), "nodes")
    assert [cells[9] for _, cells in newest_first] == ["10", "9", "8", "7", "5"]
    by_result = _rows(_dom(page, "#sort=result"), "nodes")
    assert [cells[1][:4] for _, cells in by_result] == ["FAIL", "FAIL", "PASS", "PASS", "PASS"]
    counted = _dom(page, "#filter=node-b")
    assert '<span id="nodes-shown">1</span> of 5 shown' in counted


@needs_chromium
@pytest.mark.slow
def test_two_thousand_nodes_make_a_page_a_browser_opens_and_filters(tmp_path: Path) -> None:
    path = tmp_path / "h.sqlite"
    with History.open(path) as history:
        history.append(
            [
                (gpu_report(f"node{i:04d}", [800.0 - (i % 7)] * 8, passed=i % 100 != 0), "t")
                for i in range(2000)
            ]
        )
    began = time.monotonic()
    html = _page(path)
    rendered = time.monotonic() - began
    page = tmp_path / "fleet.html"
    page.write_text(html)
    # the histograms are bins, not one mark per GPU: the page grows with the nodes' table only
    assert len(html) < 2_000_000, len(html)
    assert html.count("<rect") < 200
    rows = _rows(_dom(page, "#attention=1"), "nodes")
    assert len(rows) == 2000
    assert [cells[0] for hidden, cells in rows if not hidden] == [
        f"node{i:04d}" for i in range(0, 2000, 100)
    ]
    print(f"2,000 nodes x 8 GPUs: rendered in {rendered:.2f} s, {len(html) / 1e6:.2f} MB")


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
