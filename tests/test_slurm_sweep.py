"""`sweep` against the real one-node Slurm (tests/slurm/cluster.sh, started by tests/test_slurm.py's
fixture, one cluster for this module): the cap holds with the node due, a busy node is skipped, an
idle one gets an exclusive low-priority accept job, which the next round finds under test, and
once it ends its report in the history makes the node not due.

One node only (one slurmd here): more due nodes than the cap allows is held here with a cap of
0, and for many nodes by tests/act/test_sweep_machine.py."""

from __future__ import annotations

import dataclasses
import subprocess
import time
from pathlib import Path

import pytest

from gpuaccept.commands.output import Collected
from gpuaccept.commands.sweep import SweepRequest, run
from tests.test_slurm import (  # noqa: F401  (the fixtures, imported to be used here)
    REPO,
    STEP_TIMEOUT,
    _node,
    cluster,
    sbatch,
    slurm,
    wait_for,
)

pytestmark = [pytest.mark.timeout(300), pytest.mark.service]


def _state(env: dict[str, str]) -> str:
    return subprocess.run(
        ["sinfo", "-h", "-N", "-n", _node(), "-o", "%T"],
        capture_output=True,
        text=True,
        env=env,
        timeout=STEP_TIMEOUT,
    ).stdout.strip()


def _wait_state(env: dict[str, str], wanted: set[str]) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if _state(env) in wanted:
            return
        time.sleep(0.5)
    raise AssertionError(f"the node stayed {_state(env)}, not {wanted}")


def _job_field(env: dict[str, str], job: str, field: str) -> str:
    shown = subprocess.run(
        ["scontrol", "show", "job", job, "-o"],
        capture_output=True,
        text=True,
        env=env,
        timeout=STEP_TIMEOUT,
    ).stdout
    return dict(f.split("=", 1) for f in shown.split() if "=" in f).get(field, "")


def test_the_cap_holds_a_busy_node_is_skipped_and_an_idle_one_is_tested(
    slurm: dict[str, str],  # noqa: F811
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name in ("SLURM_CONF", "PATH", "GPUACCEPT_ACTIVATE"):
        monkeypatch.setenv(name, slurm[name])  # the sweep's jobs get its environment (ALL)
    node = _node()
    request = SweepRequest(
        results=tmp_path / "results",
        script=REPO / "slurm" / "accept-node.sbatch",
        history=str(tmp_path / "history.sqlite"),
        max_nodes=0,
    )
    # the node is due (never tested) and the cap is 0: nothing is submitted
    out = Collected()
    assert run(request, out).submitted == {}
    assert f"[SWEEP] {node}: skip: due, but the fleet's cap holds: 0 of 0 under test" in out.text()

    # a user's job on one CPU: the node is busy, skipped
    users = sbatch(slurm, "--ntasks=1", "--cpus-per-task=1", "--wrap=sleep 300")
    _wait_state(slurm, {"mixed", "allocated"})
    request = dataclasses.replace(request, max_nodes=1)
    out = Collected()
    assert run(request, out).submitted == {}
    assert f"[SWEEP] {node}: skip: busy: jobs run on it" in out.text()
    subprocess.run(["scancel", users], env=slurm, check=True, timeout=STEP_TIMEOUT)
    _wait_state(slurm, {"idle"})

    # idle: one exclusive, low-priority accept job, found under test by the next round
    out = Collected()
    submitted = run(request, out).submitted
    assert list(submitted) == [node], out.text()
    job = submitted[node]
    assert _job_field(slurm, job, "JobName") == f"gpuaccept-sweep:{node}"
    assert _job_field(slurm, job, "Nice") == "10000"
    assert _job_field(slurm, job, "OverSubscribe") == "NO"  # --exclusive
    out = Collected()
    assert run(request, out).submitted == {}
    assert f"[SWEEP] {node}: skip: under test" in out.text()

    # it ends: its report, imported into the history, makes the node not due
    assert wait_for(slurm, job) == ("COMPLETED", "0:0")
    out = Collected()
    assert run(request, out).submitted == {}
    said = out.text()
    assert "[SWEEP] imported 1 new report(s) into the history" in said
    assert f"[SWEEP] {node}: skip: tested 0.0 h ago (cadence 24 h)" in said
