"""`report` called as a library (gpuaccept.commands.report.run), without Typer: a run's Markdown
on stdout, its HTML and Prometheus files written from a run id, the fleet's page; options that
do not go together refused in one line before anything is read or written."""

from __future__ import annotations

from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from gpuaccept.commands.history.fleet import FleetJudging
from gpuaccept.commands.output import Collected
from gpuaccept.commands.report import STDOUT, ReportRequest, run
from gpuaccept.errors import InputError
from gpuaccept.report.markdown import render_markdown
from tests.run_reports import gpu_report, history_with


def test_a_report_file_with_no_output_named_is_its_markdown_on_stdout(tmp_path: Path) -> None:
    report = gpu_report("n1", [800.0])
    source = tmp_path / "r.json"
    source.write_text(report.model_dump_json())
    out = Collected()
    result = run(ReportRequest(source=str(source)), out)
    assert (result.exit_code, result.written) == (0, [])
    assert result.report == report
    assert out.text() == render_markdown(report)  # byte for byte, its last newline once
    assert out.text().startswith("## gpuaccept accept --level standard (GPU): PASS")
    assert out.text("err") == ""


def test_a_stored_run_is_written_as_html_and_prometheus(tmp_path: Path) -> None:
    db = history_with(
        tmp_path / "h.sqlite",
        gpu_report("n1", [800.0], hours=0),
        gpu_report("n1", [780.0], hours=1),
    )
    html, prom = tmp_path / "out" / "r.html", tmp_path / "out" / "r.prom"
    out = Collected()
    request = ReportRequest(source="2", html=html, prometheus=prom, history=str(db))
    result = run(request, out)
    assert result.written == [html, prom]
    assert out.lines == [("out", f"[REPORT] {html}"), ("out", f"[REPORT] {prom}")]
    # the node's two runs of the kind: the matmul figure's trend is drawn
    assert html.read_text().count("data:image/png;base64,") == 1
    names = {f.name for f in text_string_to_metric_families(prom.read_text())}
    assert "gpuaccept_measurement_value" in names


def test_files_written_beside_markdown_on_stdout_are_said_on_stderr(tmp_path: Path) -> None:
    source = tmp_path / "r.json"
    source.write_text(gpu_report("n1", [800.0]).model_dump_json())
    prom = tmp_path / "r.prom"
    out = Collected()
    run(ReportRequest(source=str(source), markdown=STDOUT, prometheus=prom), out)
    assert out.text("err") == f"[REPORT] {prom}\n"
    assert "[REPORT]" not in out.text()
    assert prom.is_file()


def test_the_fleet_page_is_written(tmp_path: Path) -> None:
    db = history_with(tmp_path / "h.sqlite", *(gpu_report(f"n{i}", [800.0]) for i in range(3)))
    page = tmp_path / "fleet.html"
    out = Collected()
    result = run(ReportRequest(source=None, html=page, history=str(db), fleet=True), out)
    assert (result.written, result.report) == ([page], None)
    assert out.text() == f"[REPORT] {page}\n"
    assert page.read_text().startswith("<!DOCTYPE html>")
    assert "n2" in page.read_text()


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"source": None}, "name a run id or a REPORT.json file"),
        (
            {"source": "1", "judging": FleetJudging(min_gpus=5)},
            "--tolerance, --min-gpus and --mtbi-days judge the fleet: give --fleet",
        ),
        ({"source": "1", "fleet": True, "html": Path("f.html")}, "--fleet shows the whole fleet"),
        ({"source": None, "fleet": True}, r"--fleet writes its page \(--html PAGE\) and/or"),
        (
            {"source": None, "fleet": True, "html": Path("f.html"), "markdown": STDOUT},
            "--fleet writes its page",
        ),
        # the history is read first: a scheme that is not PostgreSQL's is said before the rest
        ({"source": None, "history": "sqlite:///h.sqlite"}, "not a postgresql:// URI"),
    ],
)
def test_options_that_do_not_go_together_are_refused(
    fields: dict[str, object], message: str
) -> None:
    with pytest.raises(InputError, match=message):
        ReportRequest(**fields)  # type: ignore[arg-type]


def test_a_missing_run_or_file_writes_nothing(tmp_path: Path) -> None:
    db = history_with(tmp_path / "h.sqlite", gpu_report("n1", [800.0]))
    html = tmp_path / "r.html"
    with pytest.raises(InputError, match="no run 9"):
        run(ReportRequest(source="9", html=html, history=str(db)), Collected())
    with pytest.raises(InputError, match="cannot read"):
        run(ReportRequest(source=str(tmp_path / "missing.json"), html=html), Collected())
    assert not html.exists()


@pytest.mark.parametrize("flag", ["html", "prometheus"])
@pytest.mark.parametrize("fleet", [True, False])
def test_a_dash_is_stdout_for_markdown_alone_never_a_file_named_dash(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, flag: str, fleet: bool
) -> None:
    db = history_with(tmp_path / "h.sqlite", gpu_report("n1", [800.0]))
    monkeypatch.chdir(tmp_path)
    with pytest.raises(InputError, match=rf"^--{flag} -: stdout is --markdown's alone"):
        run(
            ReportRequest(
                source=None if fleet else "1", history=str(db), fleet=fleet, **{flag: STDOUT}
            ),
            Collected(),
        )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["h.sqlite"]


@pytest.mark.timeout(60)  # without the refusal the write blocks for a reader for ever
def test_the_fleet_page_is_refused_on_a_pipe_before_its_pages_are_put_beside_it(
    tmp_path: Path,
) -> None:
    import os

    db = history_with(tmp_path / "h.sqlite", gpu_report("n1", [800.0]))
    fifo = tmp_path / "page"
    os.mkfifo(fifo)  # written through, it blocked for a reader after making page.nodes/
    with pytest.raises(InputError, match=r"^--html .*page: the fleet's page keeps its node pages"):
        run(ReportRequest(source=None, html=fifo, history=str(db), fleet=True), Collected())
    assert sorted(p.name for p in tmp_path.iterdir()) == ["h.sqlite", "page"]


def test_since_without_the_fleet_page_is_refused_not_ignored(tmp_path: Path) -> None:
    db = history_with(tmp_path / "h.sqlite", gpu_report("n1", [800.0]))
    prom = tmp_path / "fleet.prom"
    with pytest.raises(InputError, match=r"^--since says what changed on the fleet's page"):
        ReportRequest(source=None, prometheus=prom, history=str(db), fleet=True, since="7d")
    assert not prom.exists()
