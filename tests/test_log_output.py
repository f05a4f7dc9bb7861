"""What a run leaves in a job log: the summary table in plain ASCII, figures that read as words."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from gpuaccept.naming import figure_text, floor_verdict_text
from gpuaccept.report.console import summary_text
from gpuaccept.report.html import render_html
from gpuaccept.report.junit import write_junit
from gpuaccept.report.markdown import render_markdown
from gpuaccept.results import CheckResult, Measurement, Status
from tests.run_reports import gpu_report, rejudged


def test_the_summary_for_a_log_is_plain_ascii_with_every_check() -> None:
    report = gpu_report("n1", [782.0])
    text = summary_text(report)
    assert text.isascii()
    assert "\x1b[" not in text  # no colour codes in a log
    rows = [line for line in text.splitlines() if line.startswith("| ")]
    assert [row.split("|")[2].strip() for row in rows[1:]] == ["compute", "train"]
    assert "gpu0 matmul bf16 782 TFLOPS" in text
    assert "gpuaccept accept --level standard (GPU)" in text.splitlines()[0]


def test_a_figure_does_not_repeat_its_unit_or_print_a_non_unit() -> None:
    assert figure_text(Measurement(name="gpus_usable", value=0, unit="GPUs")) == "GPUs usable 0"
    ratio = figure_text(Measurement(name="loss_ratio", value=0.124, unit="ratio"))
    assert not ratio.endswith("ratio")
    assert figure_text(Measurement(name="train_elapsed", value=12, unit="s")).endswith("12 s")


def test_a_figure_without_a_reference_says_so_in_every_writer(tmp_path: Path) -> None:
    bare = Measurement(name="allreduce_busbw_gbps", value=300.0, unit="GB/s")
    assert floor_verdict_text(bare) == "no reference"
    check = CheckResult(
        name="collectives",
        area="COLLECTIVES",
        status=Status.PASS,
        message="ok",
        measurements=[bare],
    )
    report = rejudged(gpu_report("n1", [782.0]), checks=[check])
    assert "no reference" in render_markdown(report)
    assert "unchecked" not in render_markdown(report)
    assert ">no reference</span>" in render_html(report, {})
    write_junit(report, tmp_path / "j.xml")
    out = ET.parse(tmp_path / "j.xml").getroot().find(".//system-out")
    assert out is not None
    assert out.text == "allreduce_busbw_gbps = 300 GB/s (no reference)"


def test_sizes_read_in_the_units_the_flags_take() -> None:
    from gpuaccept.sweeps.sizes import size_text, sweep_text

    assert [size_text(n) for n in (8, 3000, 65536, 16 * 1024**2, 2 * 1024**3)] == [
        "8 B",
        "3000 B",
        "64 KiB",
        "16 MiB",
        "2 GiB",
    ]
    assert sweep_text([16 * 1024**2, 32 * 1024**2, 64 * 1024**2]) == "16 MiB..64 MiB"
    assert sweep_text([1024]) == "1 KiB"


def test_a_sweep_in_a_log_says_where_it_is_every_ten_seconds_not_every_step(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from gpuaccept.cli.bench import common

    clock = [100.0]
    monkeypatch.setattr(common.time, "monotonic", lambda: clock[0])
    with common.progress_bar(40, "membw: STREAM copy/scale/add/triad, arrays of 16 MiB") as advance:
        for _ in range(40):
            clock[0] += 1.0  # a step a second: 40 s in all
            advance()
    lines = capsys.readouterr().out.splitlines()
    assert lines == [
        "[BENCH] membw: 10 of 40 steps, 10 s",
        "[BENCH] membw: 20 of 40 steps, 20 s",
        "[BENCH] membw: 30 of 40 steps, 30 s",
    ]  # the last step is followed by the table: nothing to say


def test_accept_help_groups_its_options_and_shows_what_each_level_runs() -> None:
    from typer.testing import CliRunner

    from gpuaccept.cli import app
    from gpuaccept.suite.selection import CHECKS, DEFAULT_TIMEOUT_SECONDS

    text = CliRunner().invoke(app, ["accept", "--help"]).output
    sections = [line for line in text.splitlines() if line.endswith(":") and line[0] != " "]
    assert sections == [
        "What to run:",
        "Judging:",
        "Outputs:",
        "The node beyond its GPUs:",
        "Across nodes:",
        "History:",
        "Other options:",
    ]
    assert text.index("--junit") > text.index("Outputs:") > text.index("--min-busbw")
    for level, limit in DEFAULT_TIMEOUT_SECONDS.items():
        [line] = [line for line in text.splitlines() if line.strip().startswith(f"{level} ")]
        names = [spec.name for spec in CHECKS if level in spec.levels]
        assert line.split(None, 1)[1] == f"{', '.join(names)} (each up to {limit:g} s)"
    assert "dcgm" not in text.split("standard ")[-1].split("\n")[0]


@pytest.mark.parametrize("benchmark", ["membw", "transfer", "collectives"])
def test_bench_help_shows_each_sweeps_own_defaults(benchmark: str) -> None:
    from typer.testing import CliRunner

    from gpuaccept.cli import app
    from gpuaccept.commands.bench.common import DEFAULT_SIZES

    text = " ".join(CliRunner().invoke(app, ["bench", benchmark, "--help"]).output.split())
    gpu, cpu = DEFAULT_SIZES[benchmark]["cuda"], DEFAULT_SIZES[benchmark]["cpu"]
    assert f"-b, --begin SIZE Smallest size: 8, 64K, 256M, 1G (default {gpu[0]} on a GPU, " in text
    assert f"-e, --end SIZE Largest size (default {gpu[1]} on a GPU, {cpu[1]} on the CPU)" in text
    assert f"(default {gpu[2]} on a GPU, {cpu[2]} on the CPU)" in text
    assert "TEXT" not in text


def test_html_details_read_as_words_not_python() -> None:
    from gpuaccept.naming import detail_title

    assert detail_title("nvml_gpu_count") == "NVML GPU count"
    assert detail_title("power_max_w") == "power max (W)"
    assert detail_title("tolerance_percent") == "tolerance (%)"
    assert detail_title("w") == "w"  # a lone word is no unit
    check = CheckResult(
        name="stack",
        area="STACK",
        status=Status.PASS,
        message="ok",
        details={"nvml_gpu_count": 8, "skipped_dtypes": {}, "cudnn_enabled": True, "tf32": False},
    )
    page = render_html(rejudged(gpu_report("n1", [782.0]), checks=[check]), {})
    body = page.split("<h2>Environment capture</h2>")[0]
    assert "<b>NVML GPU count</b></td><td>8" in body
    assert "<b>skipped dtypes</b></td><td>none" in body
    assert "<b>cudnn enabled</b></td><td>yes" in body
    assert "<b>tf32</b></td><td>no" in body
    assert "True" not in body
    assert "False" not in body
    assert "{}" not in body
