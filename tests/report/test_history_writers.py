"""Prometheus, Markdown and HTML writers: parsed by their readers, escaped, charts that render."""

from __future__ import annotations

import base64
import io
import re
from datetime import UTC, datetime
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pytest
from prometheus_client.parser import text_string_to_metric_families

from gpuaccept.report.html import render_html
from gpuaccept.report.markdown import render_markdown
from gpuaccept.report.prometheus import render_prometheus, write_prometheus
from gpuaccept.results import RunReport
from gpuaccept.store.history import History
from tests.run_reports import gpu_report, rejudged

HOSTILE_HOST = 'gpu"node\\7\n<script>alert(1)</script> ☃'


def _hostile_report():  # type: ignore[no-untyped-def]
    return gpu_report(HOSTILE_HOST, [800.0, 612.5], passed=False)


def test_prometheus_textfile_parses_with_prometheus_client() -> None:
    report = _hostile_report()
    families = {f.name: f for f in text_string_to_metric_families(render_prometheus(report))}
    [run] = families["gpuaccept_run_passed"].samples
    assert run.value == 0.0
    assert run.labels["node"] == HOSTILE_HOST  # escaped on the way out, intact on the way in
    values = {
        (s.labels["metric"], s.labels["gpu"]): s.value
        for s in families["gpuaccept_measurement_value"].samples
    }
    assert values[("matmul_bf16_tflops", "1")] == 612.5
    assert values[("train_elapsed", "node")] == 12.0  # a figure of the run, no device
    floors = families["gpuaccept_measurement_reference_floor"].samples
    assert {s.value for s in floors} == {640.0}
    checks = {s.labels["check"]: s.value for s in families["gpuaccept_check_passed"].samples}
    assert checks == {"compute": 0.0, "train": 1.0}
    [started] = families["gpuaccept_run_start_time_seconds"].samples
    assert started.value == 1793520000.0  # 2026-11-01T08:00:00Z


def test_prometheus_file_is_readable_by_other_users(tmp_path: Path) -> None:
    path = tmp_path / "gpuaccept.prom"
    write_prometheus(_hostile_report(), path)
    assert path.stat().st_mode & 0o044 == 0o044  # node_exporter rarely runs as the job's user
    assert [p.name for p in tmp_path.iterdir()] == ["gpuaccept.prom"]


def test_markdown_tables_survive_pipes_and_newlines() -> None:
    text = render_markdown(_hostile_report())
    assert "FAIL (compute)" in text.splitlines()[0]
    table = [line for line in text.splitlines() if line.startswith("| ")]
    widths = {line.replace("\\|", "").count("|") for line in table[:4]}
    assert widths == {6}  # every row of the checks table keeps its 5 columns
    assert "gpu1" in text
    assert "612.5" in text


class _Images(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.sources: list[str] = []
        self.scripts = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "img":
            self.sources.append(dict(attrs)["src"] or "")
        if tag == "script":
            self.scripts += 1


def test_html_page_is_self_contained_escaped_and_its_charts_render(tmp_path: Path) -> None:
    from matplotlib.image import imread

    reports = [gpu_report("n1", [800.0 - 10 * h, 790.0], hours=h) for h in range(4)]
    with History.open(tmp_path / "h.sqlite") as history:
        history.append([(r, "run") for r in reports])
        trends = {
            metric: history.points(metric, node="n1")
            for metric in ("compute/matmul_bf16_tflops", "train/train_elapsed")
        }
    hostile = _hostile_report()
    page = render_html(hostile, trends)
    parser = _Images()
    parser.feed(page)
    assert parser.scripts == 0  # the hostname's <script> arrived as text
    assert "&lt;script&gt;" in page
    assert not re.search(r"(src|href)=\"(https?:)?//", page)  # nothing fetched from elsewhere
    # one chart per key (higher-is-better) figure: TFLOPS yes, seconds no
    assert len(parser.sources) == 1
    png = base64.b64decode(parser.sources[0].removeprefix("data:image/png;base64,"))
    pixels = imread(io.BytesIO(png), format="png")
    assert pixels.shape[0] > 200
    assert pixels.shape[1] > 400
    # a chart, not a blank canvas: many distinct colours (lines, markers, text, grid)
    assert len(np.unique(pixels.reshape(-1, pixels.shape[-1]), axis=0)) > 20


def test_html_charts_compare_like_with_like_and_mark_this_run_and_the_floor(
    tmp_path: Path,
) -> None:
    quick = [rejudged(gpu_report("n1", [800.0 + h], hours=h), level="quick") for h in range(3)]
    standard = rejudged(gpu_report("n1", [500.0], hours=4), level="standard")
    with History.open(tmp_path / "h.sqlite") as history:
        history.append([(r, "run") for r in [*quick, standard]])
        mixed = history.points("compute/matmul_bf16_tflops", node="n1")
        alike = history.points(
            "compute/matmul_bf16_tflops", node="n1", command="accept", level="quick"
        )
    assert 500.0 in [p.value for p in mixed]
    assert sorted(p.value for p in alike) == [800.0, 801.0, 802.0]  # the standard run left out
    page = render_html(quick[-1], {"compute/matmul_bf16_tflops": alike})
    assert "this run" in page
    assert "matmul bf16 over time" in page  # a readable title, not compute/matmul_bf16_tflops
    assert "compute/matmul_bf16_tflops" not in page


def test_one_point_and_math_signs_in_names_still_chart(tmp_path: Path) -> None:
    from gpuaccept.naming import chart_title
    from gpuaccept.report.charts import trend_chart_png

    png = trend_chart_png(
        chart_title("check/$weird_metric_$x^{2"),
        "GB/s$",
        {"node gpu0": [(datetime(2026, 11, 1, tzinfo=UTC), 1.0)]},
        this_run=datetime(2026, 11, 1, tzinfo=UTC),
        floor=0.5,
    )
    assert png.startswith(b"\x89PNG")


def test_a_cpu_run_does_not_read_as_a_gpu_acceptance() -> None:
    cpu = rejudged(gpu_report("n1", [1.0]), device_mode="cpu")
    page = render_html(cpu, {})
    assert "not a GPU acceptance" in page
    assert 'class="verdict pass"' not in page  # no big green PASS for a CPU run
    bench = rejudged(gpu_report("n1", [1.0]), command="bench", level="all")
    assert "--level all" not in render_html(bench, {})


def test_the_html_page_draws_the_samples_taken_under_load() -> None:
    from gpuaccept.checks.load_judging import judge_load, trace_details
    from gpuaccept.probe.load_sampler import LoadSample, LoadTrace

    trace = LoadTrace(
        [
            LoadSample(
                seconds=i * 0.1,
                power_w=300.0 + i,
                power_limit_w=700.0,
                sm_clock_mhz=1755.0,
                reasons=("power brake (external)",) if i > 10 else (),
            )
            for i in range(20)
        ],
        sm_clock_max_mhz=1980.0,
    )
    verdict = judge_load(trace, None, "gpu0")
    report = gpu_report("node-a", [750.0])
    compute = report.checks[0].model_copy(
        update={"details": {"load": {"gpu0": trace_details(trace, verdict)}}}
    )
    page = render_html(rejudged(report, checks=[compute, *report.checks[1:]]), {})
    assert page.count('alt="gpu0 power and SM clock under load"') == 1
    assert "power max (W)" in page  # the summary the verdicts came from, labelled for people
    assert "power_max_w" not in page.split("<details>")[0]  # (the raw JSON is at the end)
    assert '"power_w"' not in page  # the raw samples stay in the JSON report


def test_the_time_axis_fits_the_runs_not_a_day() -> None:
    from datetime import timedelta

    from gpuaccept.report.charts import time_axis

    t0 = datetime(2026, 11, 1, 8, 0, tzinfo=UTC)
    minutes_apart = [t0, t0 + timedelta(minutes=10), t0 + timedelta(minutes=20)]
    start, end = time_axis(minutes_apart)
    assert (start, end) == (t0 - timedelta(minutes=1.6), t0 + timedelta(minutes=21.6))
    weeks = [t0, t0 + timedelta(days=14)]
    assert time_axis(weeks)[1] - time_axis(weeks)[0] == timedelta(days=14 * 1.16)
    alone = time_axis([t0])
    assert alone[1] - alone[0] == timedelta(minutes=1.16)
    assert alone[0] < t0 < alone[1]


def test_a_first_run_gets_no_empty_charts_and_says_why(tmp_path: Path) -> None:
    first = gpu_report("n1", [800.0])
    with History.open(tmp_path / "h.sqlite") as history:
        history.append([(first, "run")])
        trends = {"compute/matmul_bf16_tflops": history.points("compute/matmul_bf16_tflops")}
    page = render_html(first, trends)
    parser = _Images()
    parser.feed(page)
    assert parser.sources == []
    assert "First run of its kind on this node: no trend to draw yet" in page


def test_the_floor_an_option_set_is_drawn_when_it_decided(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """--min-busbw judged the all-reduce; the chart drew no floor (the figure has no reference)."""
    import gpuaccept.report.html as html
    from gpuaccept.results import CheckResult, Measurement, Status

    def run(hours: int, busbw: float) -> RunReport:
        check = CheckResult(
            name="collectives",
            area="COLLECTIVES",
            status=Status.FAIL if busbw < 90 else Status.PASS,
            message="m",
            measurements=[Measurement(name="allreduce_busbw_gbps", value=busbw, unit="GB/s")],
            details={"floors": {"allreduce_busbw_gbps": 90.0}},
        )
        return rejudged(gpu_report("n1", [800.0], hours=hours), checks=[check])

    reports = [run(0, 120.0), run(1, 60.0)]
    with History.open(tmp_path / "h.sqlite") as history:
        history.append([(r, "run") for r in reports])
        trends = {"collectives/allreduce_busbw_gbps": history.points("allreduce_busbw_gbps")}
    drawn: list[object] = []
    real = html.trend_chart_png

    def spy(*args: object, **kwargs: object) -> bytes:
        drawn.append(kwargs.get("floor"))
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(html, "trend_chart_png", spy)
    html.render_html(reports[-1], trends)
    assert drawn == [90.0]
