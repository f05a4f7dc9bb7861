"""`gpuaccept burnin` as an operator runs it: on the CPU twin, evicted by a real SIGTERM and
resumed from its checkpoint with the load time still honest; bad inputs refused in one line."""

from __future__ import annotations

import json
import signal
from datetime import datetime
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gpuaccept.burnin.checkpoint import CheckpointFile, save_checkpoint
from gpuaccept.burnin.checks import CHECK_NAMES
from gpuaccept.burnin.plan import BurnInPlan, BurnInProgress
from gpuaccept.burnin.window import judge_record
from gpuaccept.cli import app
from gpuaccept.results import RunReport
from tests.burnin.records import as_run, binding, device, record
from tests.signal_runs import start_cli, stop_after

ARGS = ["burnin", "--duration", "6s", "--window", "1s", "--device", "cpu"]


def _report(directory: Path) -> RunReport:
    [path] = sorted(directory.glob("gpuaccept-burnin-*.json"))
    return RunReport.model_validate_json(path.read_text())


# a burn-in evicted and resumed through the CLI, end to end (~15 s): the long runs' step of
# CI; the checkpoint's resume is held in the everyday suite by tests/burnin/test_checkpoint.py
@pytest.mark.service
def test_an_evicted_burn_in_resumes_at_the_next_window_with_honest_load_time(
    tmp_path: Path,
) -> None:
    checkpoint = tmp_path / "burnin.json"
    first, second = tmp_path / "first", tmp_path / "second"
    history = ["--history", str(tmp_path / "history.sqlite")]
    evicted = start_cli(
        *ARGS, "--checkpoint", str(checkpoint), "--report-dir", str(first), *history
    )
    # the eviction lands while window 4 runs: windows 1-3 are in the checkpoint
    out, err = stop_after(evicted, "[BURNIN] window 4/6: ", signal.SIGTERM)
    assert evicted.returncode == 143, out + err
    assert "Traceback" not in err
    assert "[BURNIN] interrupted by SIGTERM in window 4: stopped, writing what finished;" in out
    kept = CheckpointFile.model_validate_json(checkpoint.read_text())
    assert [w.window for w in kept.windows] == [0, 1, 2]
    assert kept.devices == ["cpu0", "cpu1", "cpu2"]
    stopped = _report(first)
    assert stopped.verdict.outcome == "interrupted"
    assert stopped.verdict.interrupted_by == "SIGTERM"

    resumed = CliRunner().invoke(
        app, [*ARGS, "--checkpoint", str(checkpoint), "--report-dir", str(second), *history]
    )
    assert resumed.exit_code == 0, resumed.output
    resuming = "[BURNIN] resuming at window 4 of 6: 3s of load done before, its 3 window(s) judged"
    assert resuming in resumed.output
    assert "[BURNIN] window 1/6" not in resumed.output  # nothing ran twice
    report = _report(second)
    assert report.verdict.outcome == "pass"
    throughput = next(c for c in report.checks if c.name == "burnin-throughput")
    series = throughput.details["series"]
    assert [w["window"] for w in series] == list(range(6))
    # the windows run before the eviction are reported as they were measured
    assert [w["throughput"] for w in series[:3]] == [
        {device: work.throughput for device, work in w.devices.items()} for w in kept.windows
    ]
    # load time: six windows of a second, not the wall time since the first start
    assert throughput.details["load_seconds"] == pytest.approx(6.0)
    assert [w["start_seconds"] for w in series] == pytest.approx([0, 1, 2, 3, 4, 5])
    # one run: begun when the evicted process began, lasting both processes' time (the
    # resumed process alone ran three windows, the first process three more before it)
    assert report.started_at == stopped.started_at == kept.started_at.isoformat()
    assert report.duration_seconds >= kept.run_seconds + 3.0
    burnin_checks = [c for c in report.checks if c.name in CHECK_NAMES]
    assert len(burnin_checks) == 3
    assert min(check.duration_seconds for check in burnin_checks) >= kept.run_seconds + 3.0
    span = datetime.fromisoformat(report.finished_at) - datetime.fromisoformat(report.started_at)
    assert report.duration_seconds <= span.total_seconds() + 1.0


def test_a_bad_nvml_timeout_is_refused_before_the_burn_in(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GPUACCEPT_NVML_INIT_TIMEOUT", "soon")
    result = CliRunner().invoke(
        app, ["burnin", "--device", "cpu", "--no-history", "--duration", "1s"]
    )
    assert result.exit_code == 2, result.output
    assert "GPUACCEPT_NVML_INIT_TIMEOUT='soon' is not a number of seconds" in result.output
    assert "[BURNIN]" not in result.output


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--duration", "0"], "--duration '0': must be above 0 and at most 30 days"),
        (["--duration", "a day"], "--duration 'a day': expected a duration such as 90"),
        (["--duration", "1m", "--window", "2m"], "--window 120 s is longer than --duration 60 s"),
        (["--duration", "1m", "--schedule", "gemm,hbm"], "--schedule: unknown stressor 'gemm'"),
        (["--duration", "1m", "--schedule", "hbm,,hbm"], "--schedule 'hbm,,hbm': an empty"),
        (["--duration", "1m", "--straggler-tolerance", "100"], "--straggler-tolerance 100: give"),
        (["--duration", "1m", "--straggler-tolerance", "nan"], "--straggler-tolerance nan: give"),
    ],
)
def test_bad_inputs_are_refused_in_one_line(args: list[str], says: str) -> None:
    result = CliRunner().invoke(app, ["burnin", "--device", "cpu", "--no-history", *args])
    assert result.exit_code == 2, result.output
    assert says in result.output
    assert "Traceback" not in result.output


def test_a_checkpoint_of_another_plan_or_other_devices_or_damaged_is_refused(
    tmp_path: Path,
) -> None:
    checkpoint = tmp_path / "burnin.json"
    checkpoint.write_text("{not json")
    runner = CliRunner()
    base = ["burnin", "--device", "cpu", "--no-history", "--checkpoint", str(checkpoint)]
    damaged = runner.invoke(app, [*base, "--duration", "1m"])
    assert damaged.exit_code == 2
    assert f"--checkpoint {checkpoint}: not a burn-in checkpoint" in damaged.output
    plan = BurnInPlan.build(60, 60, 3, ["gemm-bf16"])
    cpus = ["cpu0", "cpu1", "cpu2"]
    written = record(plan, 0, {d: device() for d in cpus})
    progress = BurnInProgress(plan=plan.fingerprint(), devices=cpus)
    progress.record(judge_record(written), written)
    save_checkpoint(checkpoint, as_run(progress), binding(plan, cpus))
    other_plan = runner.invoke(app, [*base, "--duration", "2m", "--schedule", "gemm-bf16"])
    assert other_plan.exit_code == 2
    assert "was written by a burn-in planned as 60s/60s/gemm-bf16, not 120s/" in other_plan.output
    other_devices = runner.invoke(
        app,
        [
            *base,
            "--duration",
            "1m",
            "--window",
            "1m",
            "--schedule",
            "gemm-bf16",
            "--cpu-devices",
            "4",
        ],
    )
    assert other_devices.exit_code == 2
    assert "was written on cpu0, cpu1, cpu2, this burn-in runs on cpu0, cpu1, cpu2, cpu3" in (
        other_devices.output
    )
    assert json.loads(checkpoint.read_text())["windows"][0]["window"] == 0  # left as it was
