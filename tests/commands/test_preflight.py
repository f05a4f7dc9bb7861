"""`preflight` as library calls, without Typer (issue #54 §2): the quick level's CPU twins inside a
budget, a failing node acted on through `act slurm`'s round over tests/fake_slurm's sinfo and
scontrol, its job requeued, and the gang of two processes meeting over loopback. What a caller
gets back is asserted: the exit code, the node's state in Slurm, the jobs requeued, the report."""

from __future__ import annotations

import dataclasses
import json
import os
import socket
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from gpuaccept.commands.act import Guarding
from gpuaccept.commands.output import Collected
from gpuaccept.commands.preflight import PreflightRequest, run
from gpuaccept.errors import InputError

FAKES = Path(__file__).resolve().parents[1] / "fake_slurm"
REPO = Path(__file__).resolve().parents[2]
# two checks that judge no timing: seconds, whatever else the machine runs
FAST = ("inventory", "stack")


@pytest.fixture
def slurm(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Four idle nodes (the breaker's 2% of them is its floor, one node)."""
    state = tmp_path / "slurm.json"
    state.write_text(json.dumps({"nodes": {f"gpu{i:02d}": {"state": "idle"} for i in range(4)}}))
    monkeypatch.setenv("FAKE_SLURM_STATE", str(state))
    monkeypatch.setenv("FAKE_SLURM_NOW", datetime.now().isoformat(timespec="seconds"))
    monkeypatch.setenv("PATH", f"{FAKES}{os.pathsep}{os.environ['PATH']}")
    return state


def _request(tmp_path: Path, **changes: Any) -> PreflightRequest:
    values: dict[str, Any] = {
        "device": "cpu",
        "only": FAST,
        "report_dir": tmp_path / "reports",
        "act": "enforce",
        "node": "gpu00",
        "job": "41",
        "guarding": Guarding(state=tmp_path / "act-state.json"),
    }
    return PreflightRequest(**(values | changes))


def _slurm(state: Path) -> dict[str, Any]:
    return dict(json.loads(state.read_text()))


@pytest.mark.parametrize(
    ("changes", "said"),
    [
        ({"budget": 4}, "--budget 4: give 5 to 3600 seconds"),
        ({"budget": float("nan")}, "--budget nan: give 5 to 3600 seconds"),
        ({"budget": "30"}, "--budget: a number of seconds, not '30'"),
        ({"act": "drain"}, "--act 'drain': give one of report, shadow, enforce"),
        ({"job": "41; scancel 7"}, "--job '41; scancel 7': give a Slurm job id"),
        ({"gang_port": 80}, "--gang-port 80: give 1024 to 65535"),
        ({"only": "inventory"}, "--only: give a list of check names, not one string"),
        ({"report_dir": None}, "--act enforce needs --report-dir"),
    ],
)
def test_a_request_out_of_its_bounds_is_refused_in_one_line(
    tmp_path: Path, changes: dict[str, Any], said: str
) -> None:
    with pytest.raises(InputError) as refused:
        _request(tmp_path, **changes)
    assert str(refused.value).startswith(said)
    assert "\n" not in str(refused.value)


def test_a_passing_node_lets_its_job_start(slurm: Path, tmp_path: Path) -> None:
    out = Collected()
    result = run(_request(tmp_path), out)
    assert (result.exit_code, result.fit, result.requeued, result.drained) == (
        0,
        True,
        False,
        False,
    )
    assert result.path is not None
    assert result.path.parent == tmp_path / "reports"
    assert json.loads(result.path.read_text())["level"] == "quick"
    assert _slurm(slurm)["nodes"]["gpu00"] == {"state": "idle"}
    assert "requeued" not in _slurm(slurm)
    assert (
        out.text()
        .splitlines()[-1]
        .startswith("[PREFLIGHT] PASS on the CPU twins (no GPU verdict) in ")
    )


def test_a_failing_node_is_drained_by_gpuaccepts_reason_and_its_job_requeued(
    slurm: Path, tmp_path: Path
) -> None:
    out = Collected()
    result = run(_request(tmp_path, expect_gpus=64), out)
    said = out.text()
    # exit 0: Slurm must neither drain it again ("Prolog error") nor requeue the job held
    assert (result.exit_code, result.verdict, result.fit) == (0, "fail", False), said
    assert (result.drained, result.requeued) == (True, True)
    node = _slurm(slurm)["nodes"]["gpu00"]
    assert node["state"] == "idle+drain"
    assert node["reason"].startswith("gpuaccept quick: reboot-node: inventory [stack ")
    assert _slurm(slurm)["requeued"] == ["41"]
    assert "[PREFLIGHT] not fit for the job: this node failed\n" in said
    assert said.splitlines()[-1].startswith("[PREFLIGHT] requeued job 41")


def test_without_a_job_the_exit_is_the_verdict(slurm: Path, tmp_path: Path) -> None:
    result = run(_request(tmp_path, expect_gpus=64, job=None), Collected())
    assert (result.exit_code, result.drained, result.requeued) == (1, True, False)
    assert "requeued" not in _slurm(slurm)


def test_a_job_that_cannot_be_requeued_leaves_the_prolog_failing(
    slurm: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Exit 1: Slurm's own Prolog failure then requeues the job (held): it never starts here."""
    monkeypatch.setenv("FAKE_SLURM_GONE_JOBS", "41")
    out = Collected()
    result = run(_request(tmp_path, expect_gpus=64), out)
    assert (result.exit_code, result.drained, result.requeued) == (1, True, False)
    assert "preflight: job 41 not requeued: scontrol requeue failed: Requeue job failed" in (
        out.text("err")
    )


def test_a_job_another_node_requeued_first_is_requeued_all_the_same(
    slurm: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A gang's second requeue is refused by Slurm; the job is pending again: exit 0, so Slurm
    never reads a Prolog failure (nor drains as "Prolog error" a node a guard kept in service)."""
    monkeypatch.setenv("FAKE_SLURM_GONE_JOBS", "41")
    monkeypatch.setenv("FAKE_SLURM_PENDING_JOBS", "41")
    result = run(_request(tmp_path, expect_gpus=64), Collected())
    assert (result.exit_code, result.drained, result.requeued) == (0, True, True)


def test_a_node_someone_else_holds_is_never_touched_but_its_job_is_requeued(
    slurm: Path, tmp_path: Path
) -> None:
    state = _slurm(slurm)
    state["nodes"]["gpu00"] = {"state": "idle+drain", "reason": "admin: bad DIMM", "since": ""}
    slurm.write_text(json.dumps(state))
    result = run(_request(tmp_path, expect_gpus=64), Collected())
    assert (result.exit_code, result.drained, result.requeued) == (0, False, True)
    assert _slurm(slurm)["nodes"]["gpu00"]["reason"] == "admin: bad DIMM"


def test_the_breaker_refuses_the_drain_and_the_job_still_does_not_start_here(
    slurm: Path, tmp_path: Path
) -> None:
    state = _slurm(slurm)
    now = datetime.now().isoformat(timespec="seconds")
    # gpuaccept drained one of the four within the hour: the breaker's floor of one node is used
    state["nodes"]["gpu01"] = {"state": "idle+drain", "reason": "gpuaccept quick: drain: compute"}
    state["nodes"]["gpu01"]["since"] = now
    slurm.write_text(json.dumps(state))
    out = Collected()
    result = run(_request(tmp_path, expect_gpus=64), out)
    assert (result.exit_code, result.drained, result.requeued) == (0, False, True), out.text()
    assert _slurm(slurm)["nodes"]["gpu00"] == {"state": "idle"}
    refused = run(_request(tmp_path, expect_gpus=64, job=None), Collected())
    assert refused.exit_code == 4  # no job to requeue: the guard's refusal is the exit


def test_shadow_mode_changes_nothing_and_says_what_it_would_do(slurm: Path, tmp_path: Path) -> None:
    out = Collected()
    result = run(_request(tmp_path, expect_gpus=64, act="shadow"), out)
    assert (result.exit_code, result.drained, result.requeued) == (0, False, False)
    assert _slurm(slurm)["nodes"]["gpu00"] == {"state": "idle"}
    assert "[PREFLIGHT] would requeue job 41 (nothing changed: --act shadow)" in out.text()


def test_a_check_the_budget_cuts_is_not_judged_never_failed(
    slurm: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """compute hangs: at the budget's end it is named as not judged (a check's own timeout would
    have made it an ERROR, a failure), the checks before it judge the node, which is not
    drained, and the job starts."""
    from gpuaccept.suite import selection

    hanging = [
        dataclasses.replace(spec, target="tests.faults:check_hangs", scope="node")
        if spec.name == "compute"
        else spec
        for spec in selection.CHECKS
    ]
    monkeypatch.setattr(selection, "CHECKS", tuple(hanging))
    out = Collected()
    began = time.monotonic()
    result = run(_request(tmp_path, only=("inventory", "stack", "compute"), budget=8), out)
    took = time.monotonic() - began
    assert (result.exit_code, result.fit, result.drained) == (0, True, False), out.text()
    assert result.not_judged == ("compute",), out.text()
    assert result.report is not None
    statuses = {c.name: (c.status, c.message) for c in result.report.checks}
    assert statuses["compute"] == ("skip", "not judged: the preflight's budget of 8 s ran out")
    assert statuses["inventory"][0] == statuses["stack"][0] == "pass"
    assert result.report.verdict.outcome == "pass"
    assert _slurm(slurm)["nodes"]["gpu00"] == {"state": "idle"}
    assert out.text().splitlines()[-1].endswith("; not judged: compute")
    # the budget is raised into the suite as SIGTERM's Interrupted, but no signal was sent
    assert "[RUN] the budget of 8 s ran out: stopped the checks, writing what finished" in (
        out.text()
    )
    assert "SIGTERM" not in out.text()
    assert took < 8 + 10, took  # the budget held (plus the workers' teardown)


def test_a_budget_that_ends_before_the_first_check_judges_nothing(
    slurm: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """NVML hangs (as on a GPU fallen off the bus) in the run's first step, the environment
    capture: every check is named as not judged, the node is not drained, the job starts."""
    scenario = tmp_path / "nvml.json"
    scenario.write_text(json.dumps({"init": "hang", "gpus": []}))
    monkeypatch.setenv("GPUACCEPT_NVML_MODULE", "tests.fake_nvml")
    monkeypatch.setenv("FAKE_NVML_SCENARIO", str(scenario))
    monkeypatch.setenv("GPUACCEPT_NVML_INIT_TIMEOUT", "60")
    out = Collected()
    began = time.monotonic()
    result = run(_request(tmp_path, only=("inventory", "compute"), budget=8), out)
    took = time.monotonic() - began
    assert (result.exit_code, result.fit, result.drained) == (0, True, False), out.text()
    assert result.not_judged == ("inventory", "compute"), out.text()
    assert result.report is not None
    assert {c.status for c in result.report.checks} == {"skip"}
    assert all("budget of 8 s ran out" in c.message for c in result.report.checks)
    assert _slurm(slurm)["nodes"]["gpu00"] == {"state": "idle"}
    assert "; not judged: inventory, compute" in out.text().splitlines()[-1]
    assert took < 8 + 10, took  # the budget held (plus the workers' teardown)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


_GANG_MEMBER = """
import sys
from gpuaccept.commands.output import Collected
from gpuaccept.commands.preflight import PreflightRequest, run
out = Collected()
extra = {"expect_gpus": 64} if sys.argv[2] == "fail" else {}
if sys.argv[2] == "wrong":  # a broken all-reduce: MAX for SUM
    import gpuaccept.measure.collectives
    from tests.faults import max_instead_of_sum_rank
    gpuaccept.measure.collectives.all_reduce_rank = max_instead_of_sum_rank
request = PreflightRequest(device="cpu", only=("inventory", "stack"), budget=float(sys.argv[3]),
                           gang=True, gang_port=int(sys.argv[1]), **extra)
result = run(request, out)
print(out.text())
sys.exit(result.exit_code)
"""


def _gang(
    tmp_path: Path, verdicts: list[str], size: int, budget: float = 40
) -> list[tuple[int, str]]:
    """Indexed Job pods 0..len(verdicts)-1 of a Job of `size`, over loopback."""
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "WORLD_SIZE"))}
    members = [
        subprocess.Popen(
            [sys.executable, "-c", _GANG_MEMBER, str(port), verdict, str(budget)],
            cwd=REPO,
            env=env
            | {
                "JOB_COMPLETION_INDEX": str(index),
                "GPUACCEPT_GANG_SIZE": str(size),
                "GPUACCEPT_GANG_LEADER": "127.0.0.1",
            },
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for index, verdict in enumerate(verdicts)
    ]
    return [(m.wait(timeout=120), m.communicate()[0]) for m in members]


@pytest.mark.slow
def test_a_gang_with_a_failing_node_keeps_every_node_from_the_job(tmp_path: Path) -> None:
    (first, said_first), (second, said_second) = _gang(tmp_path, ["pass", "fail"], 2)
    assert "[GANG] 2 node(s), all-reduce wrong 0: index-0 not-judged, index-1 fail" in said_first
    assert "[PREFLIGHT] not fit for the job: a node of the job failed: index-1" in said_first
    assert (first, second) == (1, 1), said_first + said_second


# two gangs of processes over loopback, one waiting out its budget (~20 s): the long runs' step
# of CI; the gang's verdicts stay everyday in the two tests beside it
@pytest.mark.service
def test_a_gang_of_fit_nodes_starts_and_a_missing_peer_breaks_it(tmp_path: Path) -> None:
    both = _gang(tmp_path, ["pass", "pass"], 2)
    assert [code for code, _ in both] == [0, 0], both
    assert "[GANG] 2 node(s), all-reduce wrong 0" in both[0][1]
    [(alone, said)] = _gang(tmp_path, ["pass"], 2, budget=10)
    assert alone == 1, said
    assert "[GANG] the gang did not meet within" in said


@pytest.mark.slow
def test_a_gang_whose_all_reduce_sums_wrong_keeps_every_node_from_the_job(tmp_path: Path) -> None:
    both = _gang(tmp_path, ["wrong", "wrong"], 2)
    assert [code for code, _ in both] == [1, 1], both
    for _, said in both:
        assert "[PREFLIGHT] not fit for the job: the gang's all-reduce summed " in said
