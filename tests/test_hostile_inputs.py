"""Hostile inputs (issue #25): each refused with one line and exit 2 before any work, and nothing
the user handed in or named is lost."""

from __future__ import annotations

import hashlib
import math
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gpuaccept.cli import app
from gpuaccept.results import RunReport
from gpuaccept.store.history import History
from tests.run_reports import gpu_report

runner = CliRunner()


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _refused(args: list[str], fragment: str) -> None:
    result = runner.invoke(app, args)
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    (line,) = result.stderr.strip().splitlines()
    # prefixed with the command as typed (`gpuaccept history show: error: ...`)
    words = line.split(": error: ", 1)[0].split()
    assert words[0] == "gpuaccept", line
    assert words[1:] == args[: len(words) - 1], line
    assert len(words) > 1, line
    assert fragment in line, line


@pytest.fixture
def history(tmp_path: Path) -> Path:
    db = tmp_path / "h.sqlite"
    with History.open(db) as store:
        store.append([(gpu_report("n1", [800.0]), "a")])
    return db


@pytest.mark.parametrize("flag", ["--prometheus", "--markdown", "--html"])
def test_report_never_writes_over_the_history_it_reads(history: Path, flag: str) -> None:
    before = _digest(history)
    _refused(["report", "1", "--history", str(history), flag, str(history)], "--history")
    assert _digest(history) == before


def test_report_never_writes_over_its_source_or_one_output_over_another(tmp_path: Path) -> None:
    source = tmp_path / "r.json"
    source.write_text(gpu_report("n1", [800.0]).model_dump_json())
    before = _digest(source)
    _refused(["report", str(source), "--markdown", str(source)], "is also the input SOURCE")
    assert _digest(source) == before
    out = tmp_path / "o"
    _refused(
        ["report", str(source), "--html", str(out), "--markdown", str(out)],
        "--markdown",
    )
    assert not out.exists()
    # a link to the source is the source
    link = tmp_path / "link.md"
    link.symlink_to(source)
    _refused(["report", str(source), "--markdown", str(link)], "SOURCE")
    assert _digest(source) == before


def test_two_streams_are_not_a_collision(tmp_path: Path) -> None:
    source = tmp_path / "r.json"
    source.write_text(gpu_report("n1", [800.0]).model_dump_json())
    result = runner.invoke(
        app, ["report", str(source), "--markdown", "/dev/null", "--prometheus", "/dev/null"]
    )
    assert result.exit_code == 0, result.output


def test_bench_outputs_never_replace_the_history_or_each_other(history: Path) -> None:
    before = _digest(history)
    _refused(
        ["bench", "matmul", "--device", "cpu", "--json", str(history), "--history", str(history)],
        "is also the output --history",
    )
    out = history.parent / "b.out"
    _refused(
        [
            "bench",
            "membw",
            "--device",
            "cpu",
            "--no-history",
            "--json",
            str(out),
            "--csv",
            str(out),
        ],
        "--csv",
    )
    assert _digest(history) == before


def test_accept_junit_never_replaces_the_history(history: Path) -> None:
    before = _digest(history)
    _refused(
        ["accept", "--device", "cpu", "--junit", str(history), "--history", str(history)],
        "--junit",
    )
    assert _digest(history) == before


def test_training_never_writes_over_its_data_or_its_own_checkpoint(tmp_path: Path) -> None:
    data = tmp_path / "data"
    (data / "MNIST" / "raw").mkdir(parents=True)
    images = data / "MNIST" / "raw" / "train-images-idx3-ubyte"
    images.write_bytes(b"\x00\x00\x08\x03" + b"\x00" * 12)
    before = _digest(images)
    base = ["train", "mnist", "--device", "cpu", "--data", str(data), "--no-history"]
    _refused([*base, "--save-model", str(images)], "is also the input --data")
    assert _digest(images) == before
    same = tmp_path / "same.pt"
    _refused([*base, "--checkpoint", str(same), "--save-model", str(same)], "--checkpoint")
    assert not same.exists()


@pytest.mark.parametrize(
    ("env", "args", "fragment"),
    [
        ({"CUDA_VISIBLE_DEVICES": "abc,def"}, [], "'abc' is neither a GPU index"),
        ({"GPUACCEPT_NVML_MODULE": "..x"}, [], "is not a Python module name"),
        ({"GPUACCEPT_NVML_INIT_TIMEOUT": "abc"}, [], "is not a number of seconds above 0"),
        ({"GPUACCEPT_NVML_INIT_TIMEOUT": "0"}, [], "is not a number of seconds above 0"),
        ({"GPUACCEPT_NVML_INIT_TIMEOUT": "-5"}, [], "is not a number of seconds above 0"),
        ({"GPUACCEPT_NVML_INIT_TIMEOUT": "nan"}, [], "is not a number of seconds above 0"),
        ({"GPUACCEPT_NVML_INIT_TIMEOUT": "inf"}, [], "is not a number of seconds above 0"),
        ({"GPUACCEPT_NVML_INIT_TIMEOUT": "3600"}, [], "is not a number of seconds above 0"),
        ({"GPUACCEPT_NVML_INIT_TIMEOUT": "1e309"}, [], "is not a number of seconds above 0"),
        ({"GPUACCEPT_KERNEL_LOG": "/dev/zero"}, [], "not a regular file"),
        ({}, ["--min-busbw", "inf"], "must be a finite number"),
        ({}, ["--min-allgather-busbw", "nan"], "Invalid value for '--min-allgather-busbw'"),
        ({}, ["--min-alltoall-busbw", "inf"], "must be a finite number"),
    ],
)
def test_accept_refuses_bad_settings_before_any_check(
    monkeypatch: pytest.MonkeyPatch, env: dict[str, str], args: list[str], fragment: str
) -> None:
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    result = runner.invoke(app, ["accept", "--device", "cpu", "--no-history", *args])
    assert result.exit_code == 2, result.output
    assert "[RUN]" not in result.stdout
    assert fragment in result.stderr


def test_a_fifo_as_the_kernel_log_is_refused_not_waited_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import os

    from gpuaccept.probe.kernel_log import read_kernel_log_file

    fifo = tmp_path / "log"
    os.mkfifo(fifo)
    assert read_kernel_log_file(str(fifo)) is None  # returns at once, no writer needed
    assert read_kernel_log_file("/dev/zero") is None
    monkeypatch.setenv("GPUACCEPT_KERNEL_LOG", str(fifo))
    _refused(["accept", "--device", "cpu", "--no-history"], "not a regular file")


def test_bench_refuses_an_infinite_floor_and_a_sweep_that_never_ends() -> None:
    result = runner.invoke(
        app, ["bench", "collectives", "--device", "cpu", "--no-history", "--min-busbw", "inf"]
    )
    assert result.exit_code == 2
    assert "finite" in result.stderr
    _refused(
        [
            "bench",
            "matmul",
            "--device",
            "cpu",
            "--no-history",
            "--m",
            "1:100000:1",
            "--n",
            "1:100:1",
        ],
        "at most 10,000",
    )
    _refused(
        ["bench", "matmul", "--device", "cpu", "--no-history", "--m", "1:10000000000:1"],
        "at most 100,000",
    )


def test_a_baseline_with_an_infinite_value_is_refused(tmp_path: Path) -> None:
    baseline = tmp_path / "b.toml"
    baseline.write_text('[models."NVIDIA H100"]\nmatmul_bf16_tflops = { value = inf }\n')
    _refused(["accept", "--device", "cpu", "--no-history", "--baseline", str(baseline)], "finite")


def test_history_refuses_an_unknown_command_and_an_absurd_limit(history: Path) -> None:
    _refused(["history", "list", "--history", str(history), "--command", "foo"], "--command")
    result = runner.invoke(app, ["history", "list", "--history", str(history), "--limit", "1e23"])
    assert result.exit_code == 2
    result = runner.invoke(
        app, ["history", "list", "--history", str(history), "--limit", str(10**23)]
    )
    assert result.exit_code == 2
    assert "Traceback" not in result.output


def _report_json(**changes: object) -> str:
    import json

    data = json.loads(gpu_report("n1", [800.0]).model_dump_json())
    data.update(changes)
    return json.dumps(data)


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        (_report_json(level="quick\ud800"), "not valid Unicode"),
        (_report_json(duration_seconds=float("nan")), "duration_seconds"),
        (_report_json(environment={"x": []}).replace("[]", "[" * 200_000 + "]" * 200_000), "deep"),
    ],
)
def test_hostile_reports_are_one_line_and_nothing_is_imported(
    tmp_path: Path, text: str, fragment: str
) -> None:
    report = tmp_path / "r.json"
    report.write_text(text)
    db = tmp_path / "h.sqlite"
    _refused(["history", "import", str(report), "--history", str(db)], fragment)
    _refused(["report", str(report), "--markdown", "-"], fragment)
    assert not db.exists()


@pytest.mark.slow
def test_a_reader_that_goes_away_does_not_lose_the_run(tmp_path: Path) -> None:
    """`gpuaccept accept | head -1`: the pipe closes after one line; the run still writes its
    report and exits with its verdict, saying once on stderr that output stopped."""
    import subprocess
    import sys

    reports = tmp_path / "reports"
    command = [sys.executable, "-m", "gpuaccept", "accept", "--device", "cpu", "--level", "quick"]
    command += ["--no-history", "--report-dir", str(reports)]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert process.stdout is not None
    first = process.stdout.readline()
    process.stdout.close()  # what head -1 does
    _, stderr = process.communicate(timeout=180)
    assert first.startswith("[ENV] ")
    assert process.returncode == 0, stderr
    assert "Traceback" not in stderr
    assert stderr.count("standard output closed (broken pipe)") == 1
    (report,) = reports.iterdir()
    from gpuaccept.report.reading import load_report

    assert load_report(report).verdict.passed


@pytest.mark.parametrize(
    ("env", "fragment"),
    [
        ({"WORLD_SIZE": "abc"}, "WORLD_SIZE='abc'"),
        ({"WORLD_SIZE": "2", "RANK": "5", "LOCAL_RANK": "0"}, "RANK=5: must be from 0 to 1"),
        ({"WORLD_SIZE": "2", "RANK": "0", "LOCAL_RANK": "0", "GROUP_RANK": "abc"}, "GROUP_RANK"),
        ({"WORLD_SIZE": "2", "RANK": "0", "LOCAL_RANK": "0"}, "MASTER_ADDR is not set"),
        (
            {
                "WORLD_SIZE": "2",
                "RANK": "0",
                "LOCAL_RANK": "0",
                "MASTER_ADDR": "127.0.0.1",
                "MASTER_PORT": "notaport",
            },
            "MASTER_PORT='notaport'",
        ),
    ],
)
@pytest.mark.parametrize(
    "command",
    [["accept", "--device", "cpu"], ["bench", "collectives", "--device", "cpu"]],
)
def test_bad_launcher_variables_are_refused_before_any_rank_waits(
    monkeypatch: pytest.MonkeyPatch, env: dict[str, str], fragment: str, command: list[str]
) -> None:
    for name in ("WORLD_SIZE", "RANK", "LOCAL_RANK", "GROUP_RANK", "MASTER_ADDR", "MASTER_PORT"):
        monkeypatch.delenv(name, raising=False)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    _refused([*command, "--no-history"], fragment)


def _with_compute_details(details: dict[str, object]) -> str:
    report = gpu_report("n1", [800.0])
    from tests.run_reports import rejudged

    compute = report.checks[0].model_copy(update={"details": details})
    return rejudged(report, checks=[compute, *report.checks[1:]]).model_dump_json()


@pytest.mark.parametrize(
    "samples",
    [
        [{"power_w": 500.0}],  # no seconds
        [{"seconds": "x", "power_w": 1.0}, {"seconds": 1.0, "power_w": "Infinity"}],
        [{"seconds": 1.0, "power_w": float("inf"), "reasons": "not a list"}],
    ],
)
def test_schema_valid_load_samples_never_crash_the_charts(
    tmp_path: Path, samples: list[dict[str, object]]
) -> None:
    source = tmp_path / "r.json"
    source.write_text(_with_compute_details({"load": {"gpu0": {"samples": samples}}}))
    page = tmp_path / "p.html"
    result = runner.invoke(
        app, ["report", str(source), "--html", str(page), "--history", str(tmp_path / "n.sqlite")]
    )
    assert result.exit_code == 0, result.output
    assert page.read_text().startswith("<!DOCTYPE html>")


@pytest.mark.parametrize("year", ["0001", "9999"])
def test_runs_dated_at_the_ends_of_time_never_crash_the_trend_charts(
    tmp_path: Path, year: str
) -> None:
    import json

    data = json.loads(gpu_report("n1", [800.0]).model_dump_json())
    data["started_at"] = f"{year}-01-01T00:00:00+00:00"
    data["finished_at"] = f"{year}-01-01T00:01:00+00:00"
    db = tmp_path / "h.sqlite"
    # recorded as a node whose clock is that far off would record it (an import refuses 9999)
    with History.open(db) as store:
        store.append([(RunReport.model_validate(data), "a clock far off")])
    page = tmp_path / "p.html"
    result = runner.invoke(app, ["report", "1", "--html", str(page), "--history", str(db)])
    assert result.exit_code == 0, result.output


def test_a_signal_during_the_environment_capture_still_leaves_a_report(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SIGTERM before the first check (the capture can take seconds on a busy node): the report
    says INTERRUPTED with every check not run, and the exit is 143."""
    import signal

    import gpuaccept.record.environment
    from gpuaccept.errors import Interrupted
    from gpuaccept.report.reading import load_report

    def interrupted() -> dict[str, object]:
        raise Interrupted(signal.SIGTERM)

    monkeypatch.setattr(gpuaccept.record.environment, "capture_environment", interrupted)
    reports = tmp_path / "reports"
    result = runner.invoke(
        app,
        [
            "accept",
            "--device",
            "cpu",
            "--level",
            "quick",
            "--report-dir",
            str(reports),
            "--history",
            str(tmp_path / "h.sqlite"),
        ],
    )
    assert result.exit_code == 143, result.output
    assert "stopped before the first check" in result.stdout
    (path,) = reports.iterdir()
    report = load_report(path)
    assert report.verdict.outcome == "interrupted"
    assert report.verdict.interrupted_check is None
    assert {check.status for check in report.checks} == {"skip"}


@pytest.mark.parametrize(
    ("profile", "says"),
    [
        ("nics = true\n", "nics: Input should be a valid integer"),
        ('nics = "8"\n', "nics: Input should be a valid integer"),
        ('scratch_dir = "/proc"\n', "scratch_dir /proc is on a kernel pseudo-filesystem"),
        ("# nothing\n", "names no expectation"),
        ('rails = "mlx5_ib0"\n', "rails: Input should be a valid list"),
        ('rails = ["mlx5 ib0"]\n', "rails.0: String should match pattern"),
        ("rails = []\n", "rails: List should have at least 1 item"),
        # issue #50 §7: a NUL byte reached Path.resolve() and gave a traceback; a path or name
        # longer than the kernel takes made Python 3.11's is_dir raise ENAMETOOLONG
        ('scratch_dir = "/tmp/a\\u0000b"\n', "scratch_dir: Value error, holds a NUL byte"),
        (f'scratch_dir = "/tmp/{"a" * 256}"\n', "longer than the kernel's NAME_MAX"),
        (f'scratch_dir = "/tmp/{"a/" * 2100}"\n', "longer than the kernel's PATH_MAX"),
    ],
)
def test_a_node_profile_is_read_strictly(tmp_path: Path, profile: str, says: str) -> None:
    path = tmp_path / "node.toml"
    path.write_text(profile)
    _refused(["accept", "--device", "cpu", "--no-history", "--node-profile", str(path)], says)


def _report_file(path: Path, report: object) -> Path:
    path.write_text(report.model_dump_json())  # type: ignore[attr-defined]
    return path


def test_a_report_dated_after_now_is_refused_at_import(tmp_path: Path) -> None:
    future = gpu_report("n1", [800.0], hours=24 * 365 * 73)  # 2099
    source = _report_file(tmp_path / "future.json", future)
    history = tmp_path / "h.sqlite"
    _refused(
        ["history", "import", str(source), "--history", str(history)],
        "after now: its clock is ahead; nothing was imported",
    )
    assert not history.exists()  # refused before the history is opened


def test_node_verdict_ignores_a_pass_from_the_future_and_a_tie_goes_to_the_failure(
    tmp_path: Path,
) -> None:
    failing = _report_file(tmp_path / "fail.json", gpu_report("n1", [100.0], passed=False))
    future = _report_file(tmp_path / "future.json", gpu_report("n1", [800.0], hours=24 * 365 * 73))
    result = runner.invoke(app, ["node-verdict", str(failing), str(future)])
    assert result.exit_code == 0, result.output
    assert f"# report {future}: dated 2099" in result.stderr
    assert "gpuaccept.io/verdict=fail" in result.stdout
    passing = _report_file(tmp_path / "pass.json", gpu_report("n1", [800.0]))
    for order in ([failing, passing], [passing, failing]):
        tie = runner.invoke(app, ["node-verdict", *map(str, order)])
        assert tie.exit_code == 0, tie.output
        assert "gpuaccept.io/verdict=fail" in tie.stdout
        assert "gpuaccept.io/verdict=pass" not in tie.stdout
        assert "the more cautious, fail, is applied" in tie.stderr


def test_an_infinite_figure_is_refused_where_a_nan_is_a_failed_measurement(
    tmp_path: Path,
) -> None:
    text = gpu_report("n1", [800.0]).model_dump_json().replace('"value":800.0', '"value":Infinity')
    assert "Infinity" in text
    source = tmp_path / "inf.json"
    source.write_text(text)
    _refused(
        ["history", "import", str(source), "--history", str(tmp_path / "h.sqlite")],
        "a figure is finite (or NaN for a failed measurement), not inf",
    )


def test_a_figure_measured_as_infinite_is_a_failed_measurement_not_a_crash() -> None:
    from gpuaccept.results import Measurement, nan_figure_failures

    figure = Measurement(name="loss_final_over_initial", value=float("inf"), unit="ratio")
    assert math.isnan(figure.value)
    assert nan_figure_failures([figure]) == [
        "cpu loss_final_over_initial: measured NaN (the measurement itself failed)"
    ]


def test_mathtext_in_a_name_is_drawn_literally_and_a_chart_that_fails_is_left_out(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.run_reports import rejudged

    report = gpu_report("n1", [800.0])
    samples = [{"seconds": float(t), "power_w": 600.0, "sm_clock_mhz": 1900.0} for t in range(5)]
    load = {"gpu0 $\\frac$": {"samples": samples}}
    compute = report.checks[0].model_copy(
        update={"name": "compute $x^$", "details": {"load": load}}
    )
    source = tmp_path / "r.json"
    source.write_text(rejudged(report, checks=[compute, *report.checks[1:]]).model_dump_json())
    page = tmp_path / "p.html"
    args = ["report", str(source), "--html", str(page), "--history", str(tmp_path / "n.sqlite")]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    assert "power and SM clock under load" in page.read_text()  # drawn, not left out

    def broken(*args: object, **kwargs: object) -> bytes:
        raise ValueError("a chart that cannot be drawn")

    monkeypatch.setattr("gpuaccept.report.html.load_chart_png", broken)
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    text = page.read_text()
    assert "is left out: it cannot be drawn (ValueError: a chart that cannot be drawn)" in text
    assert text.startswith("<!DOCTYPE html>")


def test_an_absurd_device_index_is_refused_not_an_overflow_in_the_history(tmp_path: Path) -> None:
    text = (
        gpu_report("n1", [800.0])
        .model_dump_json()
        .replace('"device_index":0', '"device_index":100000000000000000000')
    )
    assert "100000000000000000000" in text
    source = tmp_path / "r.json"
    source.write_text(text)
    _refused(
        ["history", "import", str(source), "--history", str(tmp_path / "h.sqlite")],
        "device_index: Input should be less than or equal to 65536",
    )
