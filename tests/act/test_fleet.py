"""`gpuaccept act slurm` over a simulated fleet of 50 nodes (issue #31 §6): Slurm's sinfo and
scontrol stand-ins (tests/fake_slurm) over a state file, accept reports as runs store them. A
fault that fails every node at once drains one node and stops; shadow mode changes nothing and
says what it would do; only gpuaccept's own drains are lifted, and only after a standard pass."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gpuaccept.cli import app
from tests.run_reports import gpu_report, rejudged


def _report(
    tmp_path: Path, node: str, passed: bool, level: str = "quick", torch: str = "2.13.0"
) -> Path:
    """A GPU accept report of `node`; `torch` picks its software stack."""
    torch_info = {"torch": {"version": torch}}
    base = gpu_report(node, [790.0], passed=passed, extra_environment=torch_info)
    report = rejudged(base, level=level)
    path = tmp_path / f"{node}-{level}-{'pass' if passed else 'fail'}-{torch}.json"
    path.write_text(report.model_dump_json())
    return path


def _stack(torch: str = "2.13.0") -> str:
    from gpuaccept.record.environment import stack_sha256

    report = gpu_report("any", [790.0], extra_environment={"torch": {"version": torch}})
    return stack_sha256(report.environment)[:8]


def _act(report: Path, node: str, *more: str) -> object:
    return CliRunner().invoke(app, ["act", "slurm", str(report), "--node", node, *more])


def _nodes(state: Path) -> dict[str, dict[str, str]]:
    return dict(json.loads(state.read_text())["nodes"])


def test_a_fault_on_every_node_at_once_drains_one_and_stops(fleet: Path, tmp_path: Path) -> None:
    """A driver update that fails `stack` on all 50 nodes in one round of the health check:
    without the breaker, 50 drains; with it, 1 (2% of 50, at least one), 49 loud refusals."""
    codes = []
    for i in range(50):
        node = f"gpu{i:02d}"
        result = _act(_report(tmp_path, node, passed=False), node)
        codes.append(result.exit_code)
        if result.exit_code == 4:
            assert "failed, NOT drained: gpuaccept drained 1 of 50 node(s)" in result.stderr
    drained = [name for name, n in _nodes(fleet).items() if "drain" in n["state"].split("+")]
    assert drained == ["gpu00"]
    assert codes == [1] + [4] * 49
    assert _nodes(fleet)["gpu00"]["reason"] == f"gpuaccept quick: drain: compute [stack {_stack()}]"


def test_a_site_with_a_wider_breaker_drains_up_to_its_share(fleet: Path, tmp_path: Path) -> None:
    for i in range(10):  # each on a stack of its own: no regression, the breaker alone
        node = f"gpu{i:02d}"
        _act(_report(tmp_path, node, passed=False, torch=f"2.{i}"), node, "--breaker-share", "0.1")
    assert sum("drain" in n["state"].split("+") for n in _nodes(fleet).values()) == 5


def test_a_stack_regression_drains_two_nodes_then_names_the_stack(
    fleet: Path, tmp_path: Path
) -> None:
    """Issue #31 §2: a library update fails `compute` on every node of one stack. With a breaker
    wide enough not to stop it (50%), the third node on that stack is not drained: the refusal
    names the stack; a node on another stack, or failing another check, is still drained."""
    codes = {}
    for i in range(6):
        node = f"gpu{i:02d}"
        result = _act(_report(tmp_path, node, passed=False), node, "--breaker-share", "0.5")
        codes[node] = result.exit_code
    assert codes == {"gpu00": 1, "gpu01": 1, "gpu02": 4, "gpu03": 4, "gpu04": 4, "gpu05": 4}
    refused = _act(_report(tmp_path, "gpu09", passed=False), "gpu09", "--breaker-share", "0.5")
    # the third node's refusal held the stack as regressed (issue #49 §3): later failures alike
    # on it are refused whatever the window, until a person clears it
    assert refused.stderr.strip() == (
        f"act: gpu09: failed compute, NOT drained: the software stack {_stack()} is held as a "
        f"regression of compute until a person clears it (gpuaccept act regression clear "
        f"{_stack()} --by NAME --why TEXT) or the node runs another stack"
    )
    other = _act(
        _report(tmp_path, "gpu10", passed=False, torch="2.12.0"), "gpu10", "--breaker-share", "0.5"
    )
    assert other.exit_code == 1
    assert (
        _nodes(fleet)["gpu10"]["reason"]
        == f"gpuaccept quick: drain: compute [stack {_stack('2.12.0')}]"
    )


def test_shadow_mode_changes_nothing_and_says_what_it_would_do(fleet: Path, tmp_path: Path) -> None:
    before = fleet.read_text()
    result = _act(_report(tmp_path, "gpu07", passed=False), "gpu07", "--act", "shadow")
    assert result.exit_code == 1
    assert result.stdout.strip() == (
        "[ACT] shadow: gpu07: would drain: failed: drained (gpuaccept quick: drain: compute "
        f"[stack {_stack()}]) (nothing changed: --act shadow)"
    )
    assert fleet.read_text() == before
    report = _act(_report(tmp_path, "gpu07", passed=False), "gpu07", "--act", "report")
    assert report.exit_code == 1
    assert (
        report.stdout.strip()
        == "[ACT] report: gpu07: fail at quick (compute), recommended action drain "
        "(nothing acted on)"
    )
    assert fleet.read_text() == before


def test_report_mode_asks_slurm_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # no Slurm client at all
    passed = _act(_report(tmp_path, "gpu00", passed=True), "gpu00", "--act", "report")
    assert passed.exit_code == 0
    assert (
        passed.stdout.strip()
        == "[ACT] report: gpu00: pass at quick, recommended action none (nothing acted on)"
    )


def test_only_gpuaccepts_drain_is_lifted_and_only_after_a_standard_pass(
    fleet: Path, tmp_path: Path
) -> None:
    state = json.loads(fleet.read_text())
    state["nodes"]["gpu01"] = {"state": "idle+drain", "reason": "admin: DIMM swap", "since": ""}
    fleet.write_text(json.dumps(state))
    assert _act(_report(tmp_path, "gpu00", passed=False), "gpu00").exit_code == 1
    assert _nodes(fleet)["gpu00"]["state"] == "idle+drain"
    # the quick health check passes: not enough to return it
    quick = _act(_report(tmp_path, "gpu00", passed=True), "gpu00")
    assert quick.exit_code == 0
    assert _nodes(fleet)["gpu00"]["state"] == "idle+drain"
    assert "returns after a passing standard run" in quick.stdout
    back = _act(_report(tmp_path, "gpu00", passed=True, level="standard"), "gpu00")
    assert back.exit_code == 0, back.output
    assert _nodes(fleet)["gpu00"] == {"state": "idle", "reason": "", "since": ""}
    theirs = _act(_report(tmp_path, "gpu01", passed=True, level="full"), "gpu01")
    assert theirs.exit_code == 0
    assert "drained by someone else (admin: DIMM swap)" in theirs.stdout
    assert _nodes(fleet)["gpu01"]["reason"] == "admin: DIMM swap"


@pytest.mark.parametrize(
    ("flags", "says"),
    [
        (["--act", "yes"], "--act 'yes': give one of report, shadow, enforce"),
        (["--resume-level", "max"], "--resume-level 'max': give one of quick, standard, full"),
        (["--breaker-share", "1.5"], "--breaker-share 1.5: give a fraction from 0 to 1"),
        (["--breaker-share", "nan"], "--breaker-share nan: give a fraction from 0 to 1"),
        (["--breaker-minutes", "0"], "--breaker-minutes 0: give minutes above 0, a week at most"),
        (["--node", "gpu99"], "node gpu99 is not among Slurm's nodes: give --node"),
    ],
)
def test_a_wrong_input_is_one_line_and_exit_2_before_anything_changes(
    fleet: Path, tmp_path: Path, flags: list[str], says: str
) -> None:
    before = fleet.read_text()
    report = _report(tmp_path, "gpu00", passed=False)
    result = CliRunner().invoke(app, ["act", "slurm", str(report), "--node", "gpu00", *flags])
    assert result.exit_code == 2, result.output
    (line,) = result.stderr.strip().splitlines()
    assert line == f"gpuaccept act slurm: error: {says}"
    assert fleet.read_text() == before


def test_a_cpu_or_benchmark_report_acts_on_nothing(fleet: Path, tmp_path: Path) -> None:
    cpu = rejudged(gpu_report("gpu03", [790.0], passed=True), device_mode="cpu")
    path = tmp_path / "cpu.json"
    path.write_text(cpu.model_dump_json())
    result = _act(path, "gpu03")
    assert result.exit_code == 0
    assert "the run judged nothing: nothing is changed" in result.stdout
    bench = rejudged(gpu_report("gpu03", [790.0]), command="bench matmul")
    path.write_text(bench.model_dump_json())
    refused = _act(path, "gpu03")
    assert refused.exit_code == 2
    assert "not a `gpuaccept accept` report" in refused.stderr


def test_without_slurm_the_command_says_so(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # no sinfo anywhere
    result = _act(_report(tmp_path, "gpu00", passed=False), "gpu00")
    assert result.exit_code == 3
    assert "sinfo not found: acting on Slurm needs its client commands" in result.stderr
