"""`burnin` called as a library (`gpuaccept.commands.burnin.run`), without Typer: a short burn-in
on the CPU twin is judged, written and recorded; the scheduler's checkpoint stops it with its
exit code; bad requests are refused in one line before any work."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpuaccept.burnin.checkpoint import CheckpointFile
from gpuaccept.commands.burnin import BurnInRequest, run
from gpuaccept.commands.output import Collected
from gpuaccept.errors import InputError
from tests.cpu_turns import cpu_turn


def test_a_short_burn_in_passes_is_written_and_recorded(tmp_path: Path) -> None:
    reports = tmp_path / "reports"
    reports.mkdir()
    out = Collected()
    request = BurnInRequest(
        duration="2s",
        window="1s",
        device="cpu",
        cpu_devices=2,
        report_dir=reports,
        history=str(tmp_path / "history.sqlite"),
    )
    with cpu_turn():  # judged on timing: not beside another CPU twin
        result = run(request, out)
    said = out.text()
    assert result.exit_code == 0, said
    assert result.report is not None
    assert result.report.verdict.outcome == "pass"  # warnings (a straggler under load) allowed
    assert "[BURNIN] window 1/2: gemm-bf16 for 1s" in said
    assert "[BURNIN] window 2/2 gemm-fp32: " in said
    # the report file is the report returned, the line says where it is
    [written] = reports.iterdir()
    assert result.report_path == written
    assert f"[REPORT] {written}\n" in said
    assert json.loads(written.read_text())["verdict"]["outcome"] == "pass"
    assert f"[HISTORY] run 1 recorded in {tmp_path / 'history.sqlite'}" in said
    assert said.splitlines()[-1].startswith("[RESULT] SUCCESS"), said
    [summary] = [text for kind, text in out.lines if kind == "summary"]
    assert "burnin-throughput" in summary
    assert out.text("err") == ""


def test_the_schedulers_checkpoint_stops_with_its_exit_code_and_no_report(
    tmp_path: Path,
) -> None:
    checkpoint = tmp_path / "burnin.json"
    out = Collected()
    request = BurnInRequest(
        duration="2s",
        window="1s",
        device="cpu",
        cpu_devices=2,
        checkpoint=checkpoint,
        checkpoint_every=1,
        checkpoint_exit_code=85,
        no_history=True,
    )
    with cpu_turn():
        result = run(request, out)
    assert result.exit_code == 85, out.text()
    assert result.report is None
    assert result.report_path is None
    assert out.text().splitlines()[-1] == (
        "[BURNIN] checkpoint after window 1 written; exiting 85 so the scheduler saves it and "
        "restarts the job"
    )
    kept = CheckpointFile.model_validate_json(checkpoint.read_text())
    assert [w.window for w in kept.windows] == [0]


@pytest.mark.parametrize(
    ("request_", "says"),
    [
        (
            BurnInRequest(duration="soon", device="cpu"),
            "--duration 'soon': expected a duration such as 90, 30s, 5m, 24h or 1h30m",
        ),
        (
            BurnInRequest(duration="1m", device="cpu", checkpoint_exit_code=85),
            "--checkpoint-exit-code needs --checkpoint",
        ),
        (
            BurnInRequest(duration="1m", device="cpu", straggler_tolerance=100.0),
            "--straggler-tolerance 100: give a percentage above 0 and below 100",
        ),
        # a library caller is held to the ranges the CLI's options enforce
        (
            BurnInRequest(duration="1m", device="cpu", cpu_devices=1),
            "--cpu-devices 1: give 2 to 64 workers",
        ),
        (
            BurnInRequest(duration="1m", device="gpu"),
            "--device must be one of auto, cpu, cuda (got 'gpu')",
        ),
    ],
)
def test_a_bad_request_is_refused_in_one_line_before_any_work(
    request_: BurnInRequest, says: str
) -> None:
    out = Collected()
    with pytest.raises(InputError) as refused:
        run(request_, out)
    assert str(refused.value) == says
    assert out.lines == []  # nothing ran, nothing said
