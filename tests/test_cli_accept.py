"""`gpuaccept accept` end to end, as an operator runs it on this GPU-less machine."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from gpuaccept.results import RunReport
from gpuaccept.verdict import Status
from tests.processes import gone, workers_of

QUICK_CPU_COMPUTE = ("--level", "quick", "--device", "cpu", "--only", "compute")
# A child that sees no GPU on any machine (torch lists none, NVML is absent), for the tests of
# what `accept` says when GPUs are missing: they judge the same on a GPU node as on CI.
NO_GPU_ENV = {"CUDA_VISIBLE_DEVICES": "", "GPUACCEPT_NVML_MODULE": "tests.no_nvml_here"}


def accept(
    *args: str, cwd: Path | None = None, extra_env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    env_free = {"CUDA_VISIBLE_DEVICES", "SLURM_GPUS_ON_NODE", "_CONDOR_AssignedGPUs"}
    env = {k: v for k, v in os.environ.items() if k not in env_free} | (extra_env or {})
    return subprocess.run(
        [sys.executable, "-m", "gpuaccept", "accept", *args],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        env=env,
        cwd=cwd,
    )


@pytest.fixture(scope="module")
def quick_run(
    tmp_path_factory: pytest.TempPathFactory,
) -> tuple[subprocess.CompletedProcess[str], Path]:
    out = tmp_path_factory.mktemp("quick")
    return accept(
        "--level",
        "quick",
        "--device",
        "cpu",
        "--report-dir",
        str(out / "reports"),
        "--junit",
        str(out / "junit.xml"),
        "--history",
        str(out / "history.sqlite"),  # its own: the node's first run, whatever ran before
    ), out


def test_quick_cpu_run_passes_and_says_it_is_cpu_mode(
    quick_run: tuple[subprocess.CompletedProcess[str], Path],
) -> None:
    done, _ = quick_run
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert any(
        line.startswith("[ENV] CPU mode") and "NOT a GPU acceptance" in line for line in lines
    )
    for area in ("[INVENTORY]", "[STACK]", "[HEALTH]", "[COMPUTE]", "[TRAIN]", "[COLLECTIVES]"):
        assert any(line.startswith(area) for line in lines), area
    # a CPU pass is never the plain SUCCESS of a GPU acceptance
    assert lines[-1] == (
        "[RESULT] SUCCESS in CPU mode: the CPU twins ran; this exercised the code, "
        "it is NOT a GPU acceptance"
    )
    assert done.stderr.count("Traceback") == 0


def test_quick_cpu_run_writes_a_valid_report_and_junit(
    quick_run: tuple[subprocess.CompletedProcess[str], Path],
) -> None:
    _, out = quick_run
    (report_path,) = (out / "reports").iterdir()
    report = RunReport.model_validate_json(report_path.read_text())
    assert report.device_mode == "cpu"
    assert report.verdict.passed
    assert report.verdict.mode == "cpu"
    assert not report.verdict.is_node_acceptance
    assert report.environment["torch"]["version"].startswith("2.")
    assert [c.name for c in report.checks] == [
        "inventory",
        "stack",
        "fabric",  # no InfiniBand here: skipped, and it says so
        "health",
        "compute",
        "train",
        "collectives",
        "fabric-errors",
        "events",
        "history",  # this node's first quick run: nothing to compare with, and it says so
    ]
    assert report.checks[-1].status is Status.SKIP
    suite = ET.parse(out / "junit.xml").getroot().find("testsuite")
    assert suite is not None
    assert suite.get("tests") == "10"


def test_expecting_a_gpu_here_fails_with_a_one_line_reason() -> None:
    done = accept("--level", "quick", "--expect-gpus", "1", extra_env=NO_GPU_ENV)
    assert done.returncode == 1
    assert "[INVENTORY] FAIL inventory" in done.stdout
    assert "expected 1 GPU(s) (--expect-gpus) but torch can use 0" in done.stdout
    assert done.stdout.splitlines()[-1] == "[RESULT] FAILURE: inventory"


def test_scheduler_assignment_is_expected_without_a_flag() -> None:
    done = accept(
        "--level",
        "quick",
        "--only",
        "inventory",
        extra_env={"_CONDOR_AssignedGPUs": "CUDA0,CUDA1", **NO_GPU_ENV},
    )
    assert done.returncode == 1
    assert "expected 2 GPU(s) (HTCondor _CONDOR_AssignedGPUs)" in done.stdout


def _filled(args: list[str], tmp_path: Path) -> list[str]:
    bad = tmp_path / "bad.toml"
    bad.write_text("[models.cpu\n")
    a_file = tmp_path / "plain-file"
    a_file.write_text("")
    return [
        arg.format(bad=bad, missing=tmp_path / "absent.toml", file=a_file, tmp=tmp_path)
        for arg in args
    ]


@pytest.mark.parametrize(
    ("args", "code", "text"),
    [
        (["--baseline", "{bad}"], 2, "not valid TOML"),
        (["--baseline", "{missing}"], 2, "no such file"),
        (["--only", "inventory", "--skip", "inventory"], 2, "no check left to run"),
        (["--junit", "{file}/sub.xml"], 2, "a parent of it is a file"),
        (["--record-baseline", "{tmp}"], 2, "is a directory"),
        (["--only", "gemm"], 2, "--only: unknown check gemm"),
        (["--report-dir", "{file}/sub"], 2, "--report-dir"),
    ],
)
def test_bad_input_exits_with_one_line_and_no_traceback(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, args: list[str], code: int, text: str
) -> None:
    # in this process: these refusals need no fresh interpreter (7 of them would cost about
    # 15 s of start-up), and the error edge is the same root group as the console script's
    from typer.testing import CliRunner

    from gpuaccept.cli import app

    for name in ("CUDA_VISIBLE_DEVICES", "SLURM_GPUS_ON_NODE", "_CONDOR_AssignedGPUs"):
        monkeypatch.delenv(name, raising=False)
    done = CliRunner().invoke(app, ["accept", *_filled(args, tmp_path)])
    assert done.exit_code == code, done.output
    assert done.stdout == ""  # refused before any check ran
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("gpuaccept accept: error: ")
    assert text in lines[0]


@pytest.mark.parametrize(
    ("args", "code", "text"),
    [
        (["--level", "medium"], 2, "Invalid value for '--level': 'medium' is not one of"),
        (["--check-timeout", "inf"], 2, "must be a finite number of seconds"),
        (["--dcgm", "7"], 2, "Invalid value for '--dcgm'"),
        (["--min-busbw", "-5"], 2, "Invalid value for '--min-busbw'"),
        (["--min-allgather-busbw", "-1"], 2, "Invalid value for '--min-allgather-busbw'"),
        (["--min-alltoall-busbw", "x"], 2, "Invalid value for '--min-alltoall-busbw'"),
        (["--device", "cuda"], 3, "--device cuda asked for"),
    ],
)
def test_bad_option_values_exit_with_one_line_and_no_traceback(
    tmp_path: Path, args: list[str], code: int, text: str
) -> None:
    # the console script: click's own refusals are turned into one line by its entry point; a
    # fresh interpreter is what sees no GPU on any machine (NO_GPU_ENV)
    done = accept(*_filled(args, tmp_path), extra_env=NO_GPU_ENV)
    assert done.returncode == code, done.stdout + done.stderr
    assert done.stdout == ""
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1
    assert text in lines[0]
    assert "Traceback" not in done.stderr


def test_record_baseline_then_judge_against_it(tmp_path: Path) -> None:
    baseline = tmp_path / "known-good.toml"
    done = accept(
        *QUICK_CPU_COMPUTE,
        "--record-baseline",
        str(baseline),
        "--baseline-runs",
        "2",
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.count("[COMPUTE]") == 2
    text = baseline.read_text()
    assert '[models."cpu"]' in text
    assert "matmul_fp32_tflops" in text
    judged = accept(
        *QUICK_CPU_COMPUTE,
        "--baseline",
        str(baseline),
        "--report-dir",
        str(tmp_path),
    )
    assert judged.returncode in (0, 1)  # a 10% slower second run may fail: that is the point
    (report_path,) = tmp_path.glob("gpuaccept-accept-*.json")
    report = json.loads(report_path.read_text())
    sources = {
        m["reference"]["source"]
        for m in report["checks"][0]["measurements"]
        if m["name"] == "matmul_fp32_tflops"
    }
    assert sources == {"median of 2 run(s), level quick"}


def test_a_launch_that_does_not_say_the_local_rank_is_refused_in_one_line() -> None:
    done = accept("--level", "quick", extra_env={"WORLD_SIZE": "8", "RANK": "3"})
    assert done.returncode == 2
    assert "LOCAL_RANK=None: a multi-rank launch needs it" in done.stderr
    assert done.stdout == ""


def test_nothing_judged_is_not_a_pass() -> None:
    done = accept("--level", "quick", "--device", "cpu", "--only", "health")
    assert done.returncode == 1
    assert "[HEALTH] SKIP health" in done.stdout
    assert done.stdout.splitlines()[-1].startswith("[RESULT] NOT JUDGED")


def _hung_nvml(tmp_path: Path) -> dict[str, str]:
    """NVML that hangs in nvmlInit, as it does on a node whose GPU fell off the bus."""
    scenario = tmp_path / "nvml.json"
    scenario.write_text(json.dumps({"init": "hang", "gpus": []}))
    return {
        "GPUACCEPT_NVML_MODULE": "tests.fake_nvml",
        "FAKE_NVML_SCENARIO": str(scenario),
        # longer than the check timeouts below, short enough that the main process's own
        # environment capture gives up on NVML quickly
        "GPUACCEPT_NVML_INIT_TIMEOUT": "3",
    }


def _start_accept(tmp_path: Path, *args: str) -> subprocess.Popen[str]:
    env_free = {"CUDA_VISIBLE_DEVICES", "SLURM_GPUS_ON_NODE", "_CONDOR_AssignedGPUs"}
    env = {k: v for k, v in os.environ.items() if k not in env_free} | _hung_nvml(tmp_path)
    return subprocess.Popen(
        [sys.executable, "-m", "gpuaccept", "accept", "--device", "cpu", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )


def _wait_for_line(
    process: subprocess.Popen[str], prefix: str, timeout_seconds: float = 90.0
) -> list[str]:
    """Read lines until one starts with `prefix`; a process that never prints it is killed."""
    assert process.stdout is not None
    seen = []
    watchdog = threading.Timer(timeout_seconds, process.kill)
    watchdog.start()
    try:
        for line in process.stdout:
            seen.append(line.rstrip("\n"))
            if line.startswith(prefix):
                return seen
    finally:
        watchdog.cancel()
    raise AssertionError(f"never printed {prefix!r} within {timeout_seconds:g} s: {seen}")


@pytest.mark.parametrize(("signum", "code"), [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_a_signal_mid_check_writes_the_report_and_leaves_no_process(
    tmp_path: Path, signum: int, code: int
) -> None:
    process = _start_accept(tmp_path, "--level", "quick", "--report-dir", str(tmp_path / "out"))
    _wait_for_line(process, "[RUN] inventory")  # inventory is stuck in the hung NVML
    workers = workers_of(process.pid)
    assert workers
    process.send_signal(signum)
    if signum == signal.SIGINT:
        time.sleep(0.3)
        process.send_signal(signum)  # a second Ctrl-C while it stops must not break anything
    stdout, stderr = process.communicate(timeout=60)
    assert process.returncode == code, stdout + stderr
    assert "Traceback" not in stderr
    name = signal.Signals(signum).name
    assert f"[RESULT] INTERRUPTED by {name} during inventory; no verdict on the rest" in stdout
    (report_path,) = (tmp_path / "out").iterdir()
    report = RunReport.model_validate_json(report_path.read_text())
    # the report says interrupted, and the check under way is not called failed
    assert report.verdict.outcome == "interrupted"
    assert (report.verdict.interrupted_by, report.verdict.interrupted_check) == (name, "inventory")
    assert report.verdict.failed_checks == []
    assert report.verdict.exit_code == code
    statuses = {check.name: (check.status.value, check.message) for check in report.checks}
    assert statuses["inventory"] == ("error", f"interrupted by {name}")
    assert statuses["compute"] == ("skip", f"not run: the run was interrupted by {name}")
    time.sleep(0.2)
    assert all(gone(pid) for pid in workers)


def test_a_check_hung_in_nvml_times_out_and_the_rest_still_run(tmp_path: Path) -> None:
    # the two checks that show it: inventory stuck in NVML, and compute running after it
    process = _start_accept(
        tmp_path,
        "--level",
        "quick",
        "--only",
        "inventory",
        "--only",
        "compute",
        "--check-timeout",
        "2",
    )
    stdout, stderr = process.communicate(timeout=120)
    assert process.returncode == 1, stdout + stderr
    assert "[INVENTORY] ERROR inventory" in stdout
    assert "timed out after 2 s" in stdout
    assert "[COMPUTE] PASS compute" in stdout
    assert stdout.splitlines()[-1] == "[RESULT] FAILURE: inventory"


def test_json_puts_the_report_alone_on_stdout_pass_or_fail(tmp_path: Path) -> None:
    done = accept(*QUICK_CPU_COMPUTE, "--no-history", "--json")
    assert done.returncode == 0, done.stderr
    report = RunReport.model_validate_json(done.stdout)  # nothing else on stdout
    assert [c.name for c in report.checks] == ["compute"]
    assert "[RESULT] SUCCESS in CPU mode" in done.stderr  # the run's lines went to stderr
    failed = accept(
        "--level",
        "quick",
        "--only",
        "inventory",
        "--expect-gpus",
        "1",
        "--no-history",
        "--json",
        extra_env=NO_GPU_ENV,
    )
    assert failed.returncode == 1
    assert RunReport.model_validate_json(failed.stdout).verdict.failed_checks == ["inventory"]
    refused = accept("--level", "nope", "--json")
    assert refused.returncode == 2
    assert refused.stdout == ""


def test_json_keeps_what_a_library_writes_on_fd_1_off_the_report() -> None:
    done = accept(
        "--level",
        "quick",
        "--device",
        "cpu",
        "--only",
        "inventory",
        "--only",
        "health",
        "--no-history",
        "--json",
        extra_env={"GPUACCEPT_NVML_MODULE": "tests.noisy_nvml", "CUDA_VISIBLE_DEVICES": ""},
    )
    report = RunReport.model_validate_json(done.stdout)  # one document, nothing before it
    assert report.command == "accept"
    assert "noise from a library on fd 1" in done.stderr


def test_json_gives_an_interrupted_report_for_a_signal_before_the_run() -> None:
    """Issue #30 §5: a signal in the first seconds left stdout empty and wrote no report."""
    import signal
    import time

    from tests.signal_runs import start_cli

    process = start_cli("accept", "--device", "cpu", "--no-history", "--json")
    deadline = time.monotonic() + 60
    # as soon as gpuaccept catches SIGTERM (its handler is installed once --json is parsed)
    while time.monotonic() < deadline:
        status = Path(f"/proc/{process.pid}/status").read_text()
        caught = int(
            next(line for line in status.splitlines() if line.startswith("SigCgt:")).split()[1], 16
        )
        if caught & (1 << (signal.SIGTERM - 1)):
            break
        time.sleep(0.01)
    process.send_signal(signal.SIGTERM)
    stdout, stderr = process.communicate(timeout=120)
    assert process.returncode == 143, stderr
    report = RunReport.model_validate_json(stdout)
    assert report.verdict.outcome == "interrupted"
    assert report.verdict.interrupted_by == "SIGTERM"


@pytest.mark.parametrize("when", ["caught", 1.0, 2.0])
def test_report_dir_gets_an_interrupted_report_from_the_first_moment_it_can(
    tmp_path: Path, when: str | float
) -> None:
    """Issue #50 §7: SIGTERM one second after `accept --report-dir` started left no report (the
    handler came after the plan, and the suite's imports and workers were not covered)."""
    import signal
    import time

    from tests.signal_runs import start_cli

    started = time.monotonic()
    process = start_cli("accept", "--device", "cpu", "--no-history", "--report-dir", str(tmp_path))
    # once gpuaccept catches SIGTERM (before it, Python is still starting: the default action
    # ends it, as for any program), then `when` seconds after the start, where it has got to by
    # then (planning, importing the suite, starting its workers) on a machine under load
    deadline = started + 60
    while time.monotonic() < deadline:
        status = Path(f"/proc/{process.pid}/status").read_text()
        caught = int(
            next(line for line in status.splitlines() if line.startswith("SigCgt:")).split()[1],
            16,
        )
        if caught & (1 << (signal.SIGTERM - 1)):
            break
        time.sleep(0.01)
    if when != "caught":
        time.sleep(max(0.0, started + float(when) - time.monotonic()))
    process.send_signal(signal.SIGTERM)
    _, stderr = process.communicate(timeout=120)
    assert process.returncode == 143, stderr
    assert "Traceback" not in stderr
    (path,) = tmp_path.glob("gpuaccept-accept-*.json")
    report = RunReport.model_validate_json(path.read_text())
    assert report.verdict.outcome == "interrupted"
    assert report.verdict.interrupted_by == "SIGTERM"


def test_the_other_collectives_floors_reach_the_collectives_check(tmp_path: Path) -> None:
    """`accept --min-alltoall-busbw` (and all-gather's) judges the ranks' all-to-all: a floor no
    CPU reaches fails the run, naming the collective and the option, and the report keeps the
    floor for the charts."""
    done = accept(
        "--level", "quick", "--device", "cpu", "--only", "collectives", "--no-history",
        "--min-alltoall-busbw", "1000000", "--report-dir", str(tmp_path),
    )  # fmt: skip
    assert done.returncode == 1, done.stdout + done.stderr
    assert "below 0.9 x --min-alltoall-busbw 1e+06" in done.stdout
    assert "--min-allgather-busbw" not in done.stdout
    report = json.loads(next(tmp_path.glob("*.json")).read_text())
    check = next(c for c in report["checks"] if c["name"] == "collectives")
    assert check["details"]["floors"] == {"alltoall_busbw_gbps": 900000.0}
