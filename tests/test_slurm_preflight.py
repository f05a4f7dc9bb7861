"""slurm/preflight-prolog.sh as the Prolog of a real one-node Slurm (tests/slurm/cluster.sh, with
PrologFlags=Alloc): a passing preflight lets the job run to its end; a failing one (the CPU twin
told to expect 64 GPUs) drains the node with gpuaccept's own reason, through `act slurm`'s round,
and requeues the job, not held, before its script ever runs.

Without the packages, or without root, every test here skips and says why."""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from gpuaccept.act.slurm import requeue
from tests.test_slurm import (
    CLUSTER,
    REPO,
    STEP_TIMEOUT,
    VENV_BIN,
    _node,
    _why_no_slurm,
    sbatch,
    wait_for,
)

pytestmark = [pytest.mark.timeout(300), pytest.mark.service]
# The CPU twins of two checks that judge no timing: seconds, on a loaded machine too
FAST = "--device cpu --only inventory --only stack --budget 60"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """A running one-node cluster whose Prolog is slurm/preflight-prolog.sh, reading its settings
    from STATE/prolog.env (each test writes its own); the environment jobs are submitted with."""
    why = _why_no_slurm()
    if why:
        pytest.skip(why)
    state = tmp_path_factory.mktemp("slurm-preflight")
    prolog = state / "prolog.sh"
    # slurmd gives a Prolog a bare environment: the test's settings come from a file, as a
    # site's come from /etc/default or the script's own defaults
    prolog.write_text(
        "#!/bin/bash\nset -a\nsource " + str(state / "prolog.env") + "\nset +a\n"
        f"exec {REPO / 'slurm' / 'preflight-prolog.sh'} >>{state / 'prolog.log'} 2>&1\n"
    )
    prolog.chmod(0o755)
    (state / "slurm.extra.conf").write_text(f"Prolog={prolog}\nPrologFlags=Alloc\n")
    try:
        started = subprocess.run(
            ["bash", str(CLUSTER), "start", str(state)],
            capture_output=True,
            text=True,
            check=False,
            timeout=STEP_TIMEOUT * 4,
        )
    except subprocess.TimeoutExpired:
        subprocess.run(["bash", str(CLUSTER), "stop", str(state)], check=False, timeout=60)
        pytest.skip(f"the one-node Slurm did not start within {STEP_TIMEOUT * 4} s")
    if started.returncode != 0:
        first = (started.stderr.strip().splitlines() or ["no output"])[-1]
        pytest.skip(f"the one-node Slurm did not start: {first}")
    (state / "results").mkdir()
    activate = state / "activate.sh"
    activate.write_text(f'export PATH="{VENV_BIN}:$PATH"\n')
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("SLURM_", "CUDA_VISIBLE", "_CONDOR", "WORLD_SIZE"))
    }
    env |= {
        "SLURM_CONF": started.stdout.strip().removeprefix("SLURM_CONF="),
        "GPUACCEPT_ACTIVATE": str(activate),
        "GPUACCEPT_RESULTS": str(state / "results"),
        "PATH": f"{VENV_BIN}{os.pathsep}{env['PATH']}",
    }
    try:
        yield env | {"STATE": str(state)}
    finally:
        subprocess.run(["bash", str(CLUSTER), "stop", str(state)], check=False, timeout=60)


def _prolog_reads(env: dict[str, str], args: str, tmp_path: Path) -> None:
    lines = {
        "PATH": f"{VENV_BIN}:/usr/sbin:/usr/bin:/sbin:/bin",
        "SLURM_CONF": env["SLURM_CONF"],
        "GPUACCEPT_ACTIVATE": env["GPUACCEPT_ACTIVATE"],
        "GPUACCEPT_RESULTS": env["GPUACCEPT_RESULTS"],
        "GPUACCEPT_ACT_STATE": str(tmp_path / "act-state.json"),  # this test's breaker alone
        "GPUACCEPT_PREFLIGHT_ARGS": args,
        # the job's first node by address: this machine's own name need not resolve
        "GPUACCEPT_GANG_LEADER": "127.0.0.1",
    }
    text = "".join(f"{name}='{value}'\n" for name, value in lines.items())
    (Path(env["STATE"]) / "prolog.env").write_text(text)


def _scontrol(env: dict[str, str], *args: str) -> str:
    return subprocess.run(
        ["scontrol", *args], capture_output=True, text=True, env=env, timeout=STEP_TIMEOUT
    ).stdout


def _fields(text: str) -> dict[str, str]:
    return dict(f.split("=", 1) for f in text.split() if "=" in f)


def _node_state(env: dict[str, str]) -> tuple[str, str]:
    shown = subprocess.run(
        ["sinfo", "-h", "-N", "-n", _node(), "-O", "StateComplete:64|,Reason:512"],
        capture_output=True,
        text=True,
        env=env,
        timeout=STEP_TIMEOUT,
    ).stdout
    state, _, reason = shown.partition("|")
    return state.strip(), reason.strip()


@pytest.fixture
def slurm(cluster: dict[str, str]) -> Iterator[dict[str, str]]:
    """The cluster, its node back in service after the test (a test drains it)."""
    yield cluster
    subprocess.run(["scancel", "--user", "root"], env=cluster, check=False, timeout=STEP_TIMEOUT)
    _scontrol(cluster, "update", f"NodeName={_node()}", "State=RESUME")


def test_a_passing_preflight_lets_the_job_run(slurm: dict[str, str], tmp_path: Path) -> None:
    # with the gang over the job's node list, as a Prolog is given it (SLURM_JOB_NODELIST)
    _prolog_reads(slurm, f"{FAST} --gang", tmp_path)
    marker = tmp_path / "ran"
    job = sbatch(slurm, f"--wrap=touch {marker}")
    assert wait_for(slurm, job) == ("COMPLETED", "0:0")
    assert marker.exists()
    assert _node_state(slurm) == ("idle", "none")
    said = (Path(slurm["STATE"]) / "prolog.log").read_text()
    assert f"[GANG] 1 node(s), all-reduce wrong 0: {_node()} not-judged\n" in said
    [report] = (Path(slurm["GPUACCEPT_RESULTS"]) / "preflight").glob("*.json")
    report.unlink()  # the next test's reports are its own


def test_a_failing_preflight_drains_by_gpuaccepts_reason_and_requeues_the_job(
    slurm: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _prolog_reads(slurm, f"{FAST} --expect-gpus 64", tmp_path)
    marker = tmp_path / "ran"
    job = sbatch(slurm, f"--wrap=touch {marker}")
    deadline = time.monotonic() + 120
    fields: dict[str, str] = {}
    while time.monotonic() < deadline:
        fields = _fields(_scontrol(slurm, "show", "job", job, "-o"))
        if fields.get("Restarts", "0") != "0" and fields.get("JobState") == "PENDING":
            break
        time.sleep(1)
    assert fields.get("JobState") == "PENDING", fields
    assert fields["Restarts"] == "1", fields
    # requeued by gpuaccept, not held as Slurm holds a job whose Prolog failed
    assert fields.get("Priority") != "0", fields
    assert "Held" not in fields.get("Reason", ""), fields
    state, reason = _node_state(slurm)
    assert state.split("+")[:2] == ["idle", "drain"], state
    assert reason.startswith("gpuaccept quick: reboot-node: inventory [stack "), reason
    assert not marker.exists()  # the batch script never ran on the failing node
    # a gang's second node requeues it too: slurmctld refuses, the job is pending: no error
    monkeypatch.setenv("SLURM_CONF", slurm["SLURM_CONF"])
    again = subprocess.run(
        ["scontrol", "requeue", job], capture_output=True, text=True, env=slurm, timeout=30
    )
    assert again.returncode != 0, again  # what act.slurm.requeue then reads the job's state for
    requeue(job)
    [report] = (Path(slurm["GPUACCEPT_RESULTS"]) / "preflight").glob("*.json")
    assert '"failed_checks": [\n      "inventory"\n    ]' in report.read_text()
    report.unlink()
