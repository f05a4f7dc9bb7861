"""`act` as library calls, without Typer (issue #51): commands.act.run_slurm over the Slurm
stand-ins (tests/fake_slurm's sinfo and scontrol over a state file), and a person's breaker and
regression commands over the records' file. What a caller gets back is asserted: the exit code,
the decision, the lines said and where, the node's state in Slurm, the records."""

from __future__ import annotations

import json
import os
from datetime import datetime
from pathlib import Path

import pytest

from gpuaccept.commands.act import (
    REFUSED_EXIT,
    BreakerResetRequest,
    BreakerStatusRequest,
    Guarding,
    RegressionClearRequest,
    SlurmRequest,
    run_breaker_reset,
    run_breaker_status,
    run_regression_clear,
    run_slurm,
)
from gpuaccept.commands.output import Collected
from gpuaccept.errors import InputError
from tests.run_reports import gpu_report, rejudged

FAKES = Path(__file__).resolve().parents[1] / "fake_slurm"


@pytest.fixture
def slurm(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Four idle nodes: the breaker's 2% of them is its floor, one node."""
    state = tmp_path / "slurm.json"
    state.write_text(json.dumps({"nodes": {f"gpu{i:02d}": {"state": "idle"} for i in range(4)}}))
    monkeypatch.setenv("FAKE_SLURM_STATE", str(state))
    monkeypatch.setenv("FAKE_SLURM_NOW", datetime.now().isoformat(timespec="seconds"))
    monkeypatch.setenv("PATH", f"{FAKES}{os.pathsep}{os.environ['PATH']}")
    return state


def _report(tmp_path: Path, node: str, passed: bool, torch: str = "2.13.0") -> Path:
    """A quick GPU accept report of `node` (a failure: compute, recommended: drain)."""
    base = gpu_report(node, [790.0], passed=passed, extra_environment={"torch": {"version": torch}})
    path = tmp_path / f"{node}-{'pass' if passed else 'fail'}-{torch}.json"
    path.write_text(rejudged(base, level="quick").model_dump_json())
    return path


def _state_of(slurm: Path, node: str) -> dict[str, str]:
    return dict(json.loads(slurm.read_text())["nodes"][node])


def test_a_failing_report_drains_its_node_in_enforce_mode(slurm: Path, tmp_path: Path) -> None:
    record = tmp_path / "out" / "record.json"
    request = SlurmRequest(
        report=_report(tmp_path, "gpu00", passed=False),
        guarding=Guarding(debounce=1, record=record),
    )
    out = Collected()
    result = run_slurm(request, out)
    assert (result.exit_code, result.node, result.verdict) == (1, "gpu00", "fail")
    assert result.decision.action == "drain"
    assert result.decision.reason.startswith("gpuaccept quick: drain: compute [stack ")
    assert _state_of(slurm, "gpu00")["state"] == "idle+drain"
    assert _state_of(slurm, "gpu00")["reason"] == result.decision.reason
    assert out.text() == f"[ACT] gpu00: {result.decision.why}\n"
    assert out.text("err") == ""
    [written] = json.loads(record.read_text())["decisions"]
    assert (written["node"], written["decision"]) == ("gpu00", "drain")


def test_a_pass_in_report_mode_says_so_and_asks_slurm_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # no Slurm client at all
    out = Collected()
    result = run_slurm(
        SlurmRequest(report=_report(tmp_path, "gpu00", passed=True), act="report"), out
    )
    assert (result.exit_code, result.verdict, result.decision.action) == (0, "pass", "none")
    assert out.lines == [
        ("out", "[ACT] report: gpu00: pass at quick, recommended action none (nothing acted on)")
    ]


def test_the_breakers_refusal_leaves_the_node_in_service_and_exits_4(
    slurm: Path, tmp_path: Path
) -> None:
    first = run_slurm(SlurmRequest(report=_report(tmp_path, "gpu00", passed=False)), Collected())
    assert first.exit_code == 1
    out = Collected()
    # another stack: the breaker alone refuses, not the regression rule
    second = _report(tmp_path, "gpu01", passed=False, torch="2.12.0")
    result = run_slurm(SlurmRequest(report=second), out)
    assert result.exit_code == REFUSED_EXIT == 4
    assert (result.decision.action, result.decision.guard) == ("refused", "breaker")
    assert _state_of(slurm, "gpu01")["state"] == "idle"
    [line] = [text for stream, text in out.lines if stream == "err"]
    assert line == f"act: gpu01: {result.decision.why}"
    assert "NOT drained: gpuaccept drained 1 of 4 node(s)" in line
    # the trip holds until a person resets it, and both are in the records
    status = Collected()
    assert run_breaker_status(BreakerStatusRequest(), status).ledger.tripped is not None
    assert status.text().startswith("breaker: TRIPPED at ")
    reset = Collected()
    done = run_breaker_reset(BreakerResetRequest(by=" ops ", why="driver rolled back"), reset)
    assert (done.exit_code, done.ledger.tripped) == (0, None)
    assert reset.text() == "breaker: reset by ops: driver rolled back\n"


def test_the_requests_are_checked_before_slurm_is_asked_anything(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # Slurm asked: FileNotFoundError, not InputError
    failing = _report(tmp_path, "gpu00", passed=False)
    gone = tmp_path / "none"
    refusals = [
        (
            SlurmRequest(report=failing, act="drain"),
            "--act 'drain': give one of report, shadow, enforce",
        ),
        (
            SlurmRequest(report=failing, guarding=Guarding(breaker_share=1.5)),
            "--breaker-share 1.5: give a fraction from 0 to 1",
        ),
        (
            SlurmRequest(report=failing, guarding=Guarding(debounce=0)),
            "--debounce 0: give runs from 1 to 20",
        ),
        (
            SlurmRequest(report=failing, earlier=gone),
            f"--earlier {gone}: not a directory of reports",
        ),
    ]
    for request, said in refusals:
        with pytest.raises(InputError) as refused:
            run_slurm(request, Collected())
        assert str(refused.value) == said
    with pytest.raises(InputError, match="STACK 'abc': give the 8 hex digits"):
        run_regression_clear(RegressionClearRequest(stack="abc", by="ops", why="why"), Collected())
    with pytest.raises(InputError, match=r"^--why: give a line of printable text"):
        run_breaker_reset(BreakerResetRequest(by="ops", why="  "), Collected())
