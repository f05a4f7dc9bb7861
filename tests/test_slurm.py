"""The Slurm scripts against a real one-node Slurm (Debian's slurmctld, slurmd and munge, started
by tests/slurm/cluster.sh): jobs are submitted with sbatch, waited for, and their reports and
exit states checked; the health check drains this node with its reason and it is resumed after.

Without the packages, or without root, every test here skips and says why."""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from gpuaccept.results import RunReport, Status

REPO = Path(__file__).resolve().parent.parent
CLUSTER = REPO / "tests" / "slurm" / "cluster.sh"
VENV_BIN = Path(sys.executable).parent
# Every Slurm command is bounded: one that cannot reach its controller retries for seconds, and
# unbounded waits once ran CI past its limit instead of failing.
STEP_TIMEOUT = 30
# One cluster, started by this module's fixture: pytest-xdist's `--dist loadfile` (pyproject's
# addopts) runs every test of this file in the same worker.
# A job here takes 10-20 s; a test that waits longer than this has found a fault, not a slow job.
# A real Slurm is a long end-to-end run: CI runs it in a step of its own (pytest -m service).
pytestmark = [pytest.mark.timeout(240), pytest.mark.service]


def _why_no_slurm() -> str | None:
    missing = [t for t in ("slurmctld", "slurmd", "munged", "sbatch") if not shutil.which(t)]
    if missing:
        return (
            f"Slurm is not installed here ({', '.join(missing)} missing): "
            "apt-get install slurmctld slurmd slurm-client munge"
        )
    if os.geteuid() != 0:
        return "a one-node Slurm needs root (slurmd runs jobs as their users)"
    return None


@pytest.fixture
def slurm(cluster: dict[str, str], tmp_path: Path) -> dict[str, str]:
    """The cluster's environment with gpuaccept's act records of this test alone: a breaker one
    test tripped (it holds until a person resets it) must not hold in the next."""
    return cluster | {"GPUACCEPT_ACT_STATE": str(tmp_path / "act-state.json")}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """A running one-node cluster; the environment jobs are submitted with."""
    why = _why_no_slurm()
    if why:
        pytest.skip(why)
    state = tmp_path_factory.mktemp("slurm")
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
        _a_trivial_job_runs(env, state)
        yield env
    finally:
        subprocess.run(["bash", str(CLUSTER), "stop", str(state)], check=False, timeout=60)


def _a_trivial_job_runs(env: dict[str, str], state: Path) -> None:
    """Skip, with slurmd's last words, where this Slurm cannot run even `true`: that is the
    machine, not gpuaccept, and every test below would otherwise wait out its own timeout."""
    job = sbatch(env, "--wrap=true")
    try:
        outcome = wait_for(env, job, timeout=60)
    except AssertionError:
        outcome = ("not finished in 60 s", "")
    if outcome != ("COMPLETED", "0:0"):
        log = (state / "slurmd.log").read_text(errors="replace").strip().splitlines()
        pytest.skip(f"this Slurm cannot run a trivial job ({outcome[0]}): {log[-1:] or 'no log'}")


def _node() -> str:
    return socket.gethostname().split(".")[0]


def sbatch(env: dict[str, str], *args: str, extra: dict[str, str] | None = None) -> str:
    done = subprocess.run(
        [
            "sbatch",
            "--parsable",
            f"--chdir={REPO}",
            f"--output={env['GPUACCEPT_RESULTS']}/%j.out",
            *args,
        ],
        capture_output=True,
        text=True,
        check=True,
        env=env | (extra or {}),
        timeout=STEP_TIMEOUT,
    )
    return done.stdout.strip().split(";")[0]


def wait_for(env: dict[str, str], job: str, timeout: float = 180) -> tuple[str, str]:
    """(final state, exit code 'N:S') of a job, polled through scontrol."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        shown = subprocess.run(
            ["scontrol", "show", "job", job, "-o"],
            capture_output=True,
            text=True,
            env=env,
            timeout=STEP_TIMEOUT,
        ).stdout
        fields = dict(f.split("=", 1) for f in shown.split() if "=" in f)
        state = fields.get("JobState", "")
        if state in ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY"):
            return state, fields.get("ExitCode", "")
        time.sleep(1)
    subprocess.run(["scancel", job], env=env, check=False, timeout=STEP_TIMEOUT)
    raise AssertionError(f"job {job} did not finish within {timeout:g} s")


def _report(env: dict[str, str], job: str) -> RunReport:
    path = Path(env["GPUACCEPT_RESULTS"]) / f"accept-{job}-{_node()}.json"
    assert path.exists(), sorted(Path(env["GPUACCEPT_RESULTS"]).iterdir())
    return RunReport.model_validate_json(path.read_text())


def _out(env: dict[str, str], job: str) -> str:
    return (Path(env["GPUACCEPT_RESULTS"]) / f"{job}.out").read_text()


def test_one_node_acceptance_job_and_history_import(slurm: dict[str, str], tmp_path: Path) -> None:
    job = sbatch(slurm, "slurm/accept-node.sbatch", "quick")
    assert wait_for(slurm, job) == ("COMPLETED", "0:0"), _out(slurm, job)
    report = _report(slurm, job)
    assert report.verdict.passed
    assert report.environment["scheduler"]["slurm"]["job_id"] == job
    imported = subprocess.run(
        [
            str(VENV_BIN / "gpuaccept"),
            "history",
            "import",
            "--history",
            str(tmp_path / "h.sqlite"),
            str(Path(slurm["GPUACCEPT_RESULTS"]) / f"accept-{job}-{_node()}.json"),
        ],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert imported.returncode == 0, imported.stderr
    assert "imported 1 new run(s)" in imported.stdout


def test_a_failing_node_fails_its_job_with_the_report(slurm: dict[str, str]) -> None:
    # the job promises one GPU: this CPU machine has none, so inventory fails
    job = sbatch(slurm, "slurm/accept-node.sbatch", "quick", extra={"SLURM_GPUS_ON_NODE": "1"})
    assert wait_for(slurm, job) == ("FAILED", "1:0")
    report = _report(slurm, job)
    assert report.verdict.failed_checks == ["inventory"]
    assert "expected 1 GPU(s) (Slurm SLURM_GPUS_ON_NODE)" in report.checks[0].message


def test_multinode_job_runs_torchrun_under_srun(slurm: dict[str, str]) -> None:
    # one node here: torchrun's c10d rendezvous on it, two CPU-twin ranks
    job = sbatch(
        slurm,
        "--nodes=1",
        "slurm/accept-multinode.sbatch",
        "quick",
        extra={
            "GPUACCEPT_NPROC": "2",
            "GPUACCEPT_RDZV_ENDPOINT": f"127.0.0.1:{_free_port()}",
            # this machine's hostname need not resolve (CI's does not)
            "GPUACCEPT_LOCAL_ADDR": "127.0.0.1",
        },
    )
    assert wait_for(slurm, job) == ("COMPLETED", "0:0"), _out(slurm, job)
    report = _report(slurm, job)
    assert report.environment["launch"]["ranks"] == 2
    collectives = next(c for c in report.checks if c.name == "collectives")
    assert collectives.status is Status.PASS
    assert "on 2 gloo rank(s)" in collectives.message


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_sweep_submits_one_job_per_node(slurm: dict[str, str], tmp_path: Path) -> None:
    done = subprocess.run(
        [
            "bash",
            str(REPO / "slurm" / "sweep.sh"),
            "debug",
            "quick",
            f"--output={slurm['GPUACCEPT_RESULTS']}/%j.out",
            f"--chdir={REPO}",
        ],
        capture_output=True,
        text=True,
        check=False,
        env=slurm,
        cwd=tmp_path,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    (line,) = done.stdout.splitlines()
    node, job = line.split()
    assert node == _node()
    assert wait_for(slurm, job) == ("COMPLETED", "0:0"), _out(slurm, job)
    assert _report(slurm, job).verdict.passed


def test_a_container_job_refuses_an_image_by_tag(slurm: dict[str, str]) -> None:
    job = sbatch(
        slurm, "slurm/accept-container.sbatch", extra={"IMAGE": "ghcr.io/o/gpuaccept:latest"}
    )
    assert wait_for(slurm, job) == ("FAILED", "2:0")
    assert "a digest, never a tag" in _out(slurm, job)


def _node_state(env: dict[str, str]) -> tuple[str, str]:
    shown = subprocess.run(
        ["sinfo", "-h", "-n", _node(), "-o", "%T|%E"],
        capture_output=True,
        text=True,
        env=env,
        timeout=STEP_TIMEOUT,
    ).stdout.strip()
    state, _, reason = shown.partition("|")
    return state, reason


def _resume_and_wait(env: dict[str, str]) -> None:
    """Resume this node and wait until slurmctld has heard from slurmd ("idle*" until then)."""
    subprocess.run(
        ["scontrol", "update", f"NodeName={_node()}", "State=RESUME"],
        env=env,
        check=False,
        timeout=STEP_TIMEOUT,
    )
    deadline = time.monotonic() + 60
    while _node_state(env)[0] != "idle" and time.monotonic() < deadline:
        time.sleep(1)
    assert _node_state(env) == ("idle", "none")


def test_the_health_check_drains_a_failing_node_with_its_reason(slurm: dict[str, str]) -> None:
    check = [str(REPO / "slurm" / "healthcheck.sh")]
    # two checks stand in for the quick level (the jobs above run all of it): the verdict path
    # is what is tested here
    brief = "--only inventory --only stack"
    passed = subprocess.run(
        check,
        capture_output=True,
        text=True,
        check=False,
        env=slurm | {"GPUACCEPT_HEALTHCHECK_ARGS": brief},
        timeout=300,
    )
    assert passed.returncode == 0, passed.stdout + passed.stderr
    assert _node_state(slurm)[0] == "idle"  # a node that passes is left alone
    try:
        failed = subprocess.run(
            check,
            capture_output=True,
            text=True,
            check=False,
            env=slurm | {"GPUACCEPT_HEALTHCHECK_ARGS": f"{brief} --expect-gpus 1"},
            timeout=300,
        )
        assert failed.returncode == 1, failed.stdout + failed.stderr
        state, reason = _node_state(slurm)
        assert state in ("drained", "draining")
        assert re.fullmatch(
            r"gpuaccept quick: reboot-node: inventory \[stack [0-9a-f]{8}\]", reason
        ), reason
    finally:
        _resume_and_wait(slurm)


def test_a_run_that_judged_nothing_does_not_drain(slurm: dict[str, str], tmp_path: Path) -> None:
    """accept exits 1 for NOT JUDGED too (the CPU twin of health skips); the health check drains
    on a FAILURE verdict only, and never sources ./activate.sh from where it runs (as root)."""
    planted = tmp_path / "planted"
    (tmp_path / "activate.sh").write_text(f"touch {planted}\n")
    done = subprocess.run(
        [str(REPO / "slurm" / "healthcheck.sh")],
        capture_output=True,
        text=True,
        check=False,
        cwd=tmp_path,
        env=slurm | {"GPUACCEPT_HEALTHCHECK_ARGS": "--device cpu --only health"},
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "[RESULT] NOT JUDGED" in done.stdout
    assert "not judged (gpuaccept exited 1); not drained" in done.stderr
    assert _node_state(slurm) == ("idle", "none")
    bare = {key: value for key, value in slurm.items() if key != "GPUACCEPT_ACTIVATE"}
    subprocess.run(
        [str(REPO / "slurm" / "healthcheck.sh")],
        capture_output=True,
        check=False,
        cwd=tmp_path,
        env=bare | {"GPUACCEPT_HEALTHCHECK_ARGS": "--device cpu --only stack"},
        timeout=300,
    )
    assert not planted.exists()


def test_a_drain_that_slurm_refuses_is_said_not_hidden(slurm: dict[str, str]) -> None:
    """A failing node whose drain Slurm refuses (here: a node name it does not know) still
    exits 1, and says the node failed but was not drained."""
    failed = subprocess.run(
        [str(REPO / "slurm" / "healthcheck.sh")],
        capture_output=True,
        text=True,
        check=False,
        env=slurm
        | {
            "GPUACCEPT_HEALTHCHECK_ARGS": "--only inventory --expect-gpus 1",
            "SLURMD_NODENAME": "no-such-node",
        },
        timeout=300,
    )
    assert failed.returncode == 1, failed.stdout + failed.stderr
    assert (
        "no-such-node failed (gpuaccept quick: inventory) but could not be drained" in failed.stderr
    )
    assert _node_state(slurm) == ("idle", "none")  # the real node was never touched


def test_a_burn_in_requeued_mid_run_resumes_at_its_next_window(slurm: dict[str, str]) -> None:
    # preemption as Slurm does it: `scontrol requeue` ends the running job (SIGTERM) and queues
    # it again under the same id; the checkpoint in results/ carries the finished windows over
    job = sbatch(slurm, "slurm/burnin.sbatch", "8s", "1s")
    checkpoint = Path(slurm["GPUACCEPT_RESULTS"]) / f"burnin-{job}-{_node()}.ckpt"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if checkpoint.exists() and '"window":2,' in checkpoint.read_text():
            break
        time.sleep(0.5)
    else:
        raise AssertionError(f"no third window checkpointed: {_out(slurm, job)}")
    subprocess.run(["scontrol", "requeue", job], env=slurm, check=True, timeout=STEP_TIMEOUT)
    # a requeued job is pending with a begin time Slurm sets minutes ahead: once it is pending
    # again, let it start now
    for _ in range(120):
        shown = subprocess.run(
            ["scontrol", "show", "job", job, "-o"],
            env=slurm,
            capture_output=True,
            text=True,
            timeout=STEP_TIMEOUT,
        ).stdout
        if "JobState=PENDING" in shown:
            subprocess.run(
                ["scontrol", "update", f"JobId={job}", "StartTime=now"],
                env=slurm,
                capture_output=True,
                timeout=STEP_TIMEOUT,
                check=False,
            )
            break
        time.sleep(0.5)
    assert wait_for(slurm, job, timeout=200) == ("COMPLETED", "0:0"), _out(slurm, job)
    out = _out(slurm, job)
    assert "[BURNIN] interrupted by SIGTERM" in out  # the first run, kept by --open-mode=append
    assert "[BURNIN] resuming at window " in out
    path = Path(slurm["GPUACCEPT_RESULTS"]) / f"burnin-{job}-{_node()}.json"
    report = RunReport.model_validate_json(path.read_text())
    assert report.verdict.passed, report.verdict
    throughput = next(c for c in report.checks if c.name == "burnin-throughput")
    assert [w["window"] for w in throughput.details["series"]] == list(range(8))
    assert throughput.details["load_seconds"] < 8.5  # the windows run, not the time away


def test_the_health_check_drains_a_node_whose_infiniband_port_is_down(
    slurm: dict[str, str], tmp_path: Path
) -> None:
    from tests.fabric_tree import hgx_tree, port_dir

    root = hgx_tree(tmp_path / "sysfs")
    (port_dir(root, 5) / "state").write_text("1: DOWN\n")
    quiet = tmp_path / "kernel.log"
    quiet.write_text("")
    profile = tmp_path / "hgx.toml"
    profile.write_text("nics = 8\nnic_rate_gbps = 400\n")
    try:
        failed = subprocess.run(
            [str(REPO / "slurm" / "healthcheck.sh")],
            capture_output=True,
            text=True,
            check=False,
            env=slurm
            | {
                "GPUACCEPT_HEALTHCHECK_ARGS": f"--only fabric --node-profile {profile}",
                "GPUACCEPT_SYSFS_ROOT": str(root),
                "GPUACCEPT_KERNEL_LOG": str(quiet),
            },
            timeout=300,
        )
        assert failed.returncode == 1, failed.stdout + failed.stderr
        assert "mlx5_5:1 is DOWN (LinkUp), expected ACTIVE (LinkUp)" in failed.stdout
        state, reason = _node_state(slurm)
        assert state in ("drained", "draining")
        assert re.fullmatch(r"gpuaccept quick: drain: fabric \[stack [0-9a-f]{8}\]", reason), reason
    finally:
        _resume_and_wait(slurm)


def _act(
    env: dict[str, str], tmp_path: Path, passed: bool, level: str
) -> subprocess.CompletedProcess:
    """`gpuaccept act slurm` on this node with a GPU report of `level` (no GPU here: the report
    is built as a GPU run stores it; the scheduler side is the real Slurm)."""
    from tests.run_reports import gpu_report, rejudged

    report = rejudged(gpu_report(_node(), [790.0], passed=passed), level=level)
    path = tmp_path / f"{level}-{passed}.json"
    path.write_text(report.model_dump_json())
    return subprocess.run(
        [str(VENV_BIN / "gpuaccept"), "act", "slurm", str(path), "--node", _node()],
        capture_output=True,
        text=True,
        check=False,
        env=env,
        timeout=120,
    )


def test_act_returns_only_its_own_drain_and_only_after_a_standard_pass(
    slurm: dict[str, str], tmp_path: Path
) -> None:
    """Issue #31 §3 on the real Slurm: drained by gpuaccept, a quick pass keeps it drained, a
    standard pass resumes it; drained by an administrator, a pass leaves it drained with the
    administrator's reason."""
    try:
        failed = _act(slurm, tmp_path, passed=False, level="quick")
        assert failed.returncode == 1, failed.stdout + failed.stderr
        state, reason = _node_state(slurm)
        assert state in ("drained", "draining")
        assert re.fullmatch(r"gpuaccept quick: drain: compute \[stack [0-9a-f]{8}\]", reason), (
            reason
        )
        again = _act(slurm, tmp_path, passed=False, level="quick")  # one cause, one drain
        assert f"failed; drained already ({reason})" in again.stdout
        quick = _act(slurm, tmp_path, passed=True, level="quick")
        assert quick.returncode == 0, quick.stdout + quick.stderr
        assert _node_state(slurm)[1] == reason
        standard = _act(slurm, tmp_path, passed=True, level="standard")
        assert standard.returncode == 0, standard.stdout + standard.stderr
        assert "passed standard: resumed" in standard.stdout
        deadline = time.monotonic() + 60
        while _node_state(slurm)[0] != "idle" and time.monotonic() < deadline:
            time.sleep(1)
        assert _node_state(slurm) == ("idle", "none")
        subprocess.run(
            ["scontrol", "update", f"NodeName={_node()}", "State=DRAIN", "Reason=admin: fan"],
            env=slurm,
            check=True,
            timeout=STEP_TIMEOUT,
        )
        theirs = _act(slurm, tmp_path, passed=True, level="full")
        assert theirs.returncode == 0, theirs.stdout + theirs.stderr
        assert "drained by someone else (admin: fan)" in theirs.stdout
        assert "not gpuaccept's to change" in theirs.stdout
        assert _node_state(slurm)[1] == "admin: fan"
        # failing, it is not drained over: the administrator's reason stays (issue #49 §1)
        failing = _act(slurm, tmp_path, passed=False, level="quick")
        assert failing.returncode == 1, failing.stdout + failing.stderr
        assert "drained by someone else (admin: fan)" in failing.stdout
        assert _node_state(slurm)[1] == "admin: fan"
    finally:
        _resume_and_wait(slurm)


def _scontrol(env: dict[str, str], *fields: str) -> None:
    subprocess.run(
        ["scontrol", "update", f"NodeName={_node()}", *fields],
        env=env,
        check=True,
        timeout=STEP_TIMEOUT,
    )


def _complete_state(env: dict[str, str]) -> tuple[str, str]:
    """(StateComplete, reason) as `act` reads them."""
    shown = subprocess.run(
        ["sinfo", "-h", "-N", "-n", _node(), "-O", "StateComplete:100|,Reason:200"],
        capture_output=True,
        text=True,
        env=env,
        timeout=STEP_TIMEOUT,
    ).stdout
    state, _, reason = shown.partition("|")
    return state.strip(), reason.strip()


def test_act_leaves_an_administrators_down_node_and_follows_their_resume(
    slurm: dict[str, str], tmp_path: Path
) -> None:
    """Issue #49 §1 on the real Slurm: a node an administrator took DOWN is neither drained over
    (its reason would have become gpuaccept's) nor returned to service by a passing run; once
    the administrator resumes it, gpuaccept drains it on a failure; DOWN set over gpuaccept's
    own drain holds it whole: a pass does not resume it (RESUME would have cleared DOWN too)."""
    try:
        _scontrol(slurm, "State=DOWN", "Reason=admin: bad PSU")
        failed = _act(slurm, tmp_path, passed=False, level="quick")
        assert failed.returncode == 1, failed.stdout + failed.stderr
        assert "Slurm shows it DOWN" in failed.stdout
        assert "not gpuaccept's to change, left as it is" in failed.stdout
        assert _complete_state(slurm) == ("down", "admin: bad PSU")
        passed = _act(slurm, tmp_path, passed=True, level="full")
        assert passed.returncode == 0, passed.stdout + passed.stderr
        assert _complete_state(slurm) == ("down", "admin: bad PSU")
        # the administrator resumes it between rounds: in service, gpuaccept's to drain
        _resume_and_wait(slurm)
        failed = _act(slurm, tmp_path, passed=False, level="quick")
        assert failed.returncode == 1, failed.stdout + failed.stderr
        state, reason = _complete_state(slurm)
        assert state == "idle+drain"
        assert reason.startswith("gpuaccept quick: drain: compute [stack ")
        # the administrator takes the drained node DOWN: it is theirs until they resume it
        _scontrol(slurm, "State=DOWN", "Reason=admin: reseat GPU")
        standard = _act(slurm, tmp_path, passed=True, level="standard")
        assert standard.returncode == 0, standard.stdout + standard.stderr
        assert "resumed" not in standard.stdout
        assert _complete_state(slurm)[0].startswith("down")
        assert _complete_state(slurm)[1] == "admin: reseat GPU"
    finally:
        _resume_and_wait(slurm)


def test_a_node_gpuaccept_drained_is_checked_at_the_level_that_can_return_it(
    slurm: dict[str, str],
) -> None:
    check = [str(REPO / "slurm" / "healthcheck.sh")]
    subprocess.run(
        ["scontrol", "update", f"NodeName={_node()}", "State=DRAIN", "Reason=gpuaccept quick: x"],
        env=slurm,
        check=True,
        timeout=STEP_TIMEOUT,
    )
    try:
        for extra, level in (({}, "standard"), ({"GPUACCEPT_RESUME_LEVEL": "full"}, "full")):
            done = subprocess.run(
                check,
                capture_output=True,
                text=True,
                check=False,
                env=slurm | {"GPUACCEPT_HEALTHCHECK_ARGS": "--device cpu --only stack"} | extra,
                timeout=300,
            )
            assert done.returncode == 0, done.stdout + done.stderr
            assert f"gpuaccept accept --level {level}" in done.stdout
            # the CPU twin judges no node: it stays drained, with gpuaccept's reason
            assert _node_state(slurm)[1] == "gpuaccept quick: x"
    finally:
        _resume_and_wait(slurm)


def test_the_health_check_in_shadow_mode_drains_nothing_and_says_so(
    slurm: dict[str, str],
) -> None:
    done = subprocess.run(
        [str(REPO / "slurm" / "healthcheck.sh")],
        capture_output=True,
        text=True,
        check=False,
        env=slurm
        | {
            "GPUACCEPT_HEALTHCHECK_ARGS": "--only inventory --expect-gpus 1",
            "GPUACCEPT_ACT": "shadow",
        },
        timeout=300,
    )
    try:
        assert done.returncode == 1, done.stdout + done.stderr
        assert (
            "would drain: failed: drained (gpuaccept quick: reboot-node: inventory [stack "
            in done.stdout
        )
        assert _node_state(slurm) == ("idle", "none")
    finally:
        _resume_and_wait(slurm)
