"""tasks/ job scripts: strict bash that always leaves a report and exits with gpuaccept's code."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gpuaccept.cli import app
from gpuaccept.report.reading import load_report
from gpuaccept.results import Status
from tests.job_scripts import REPO, activation_hook, run_job, sandbox, suite_settings

# a long end-to-end run (processes across stand-in nodes, real services): CI runs it in a step
# of its own (pytest -m service); the everyday command leaves it out
pytestmark = pytest.mark.service


def _multinode_step(
    tmp_path: Path, job_id: str, env: dict[str, str]
) -> subprocess.CompletedProcess[str]:
    """slurm-multinode.sh in a sandbox, as Slurm starts it on node n2 with the rendezvous that
    accept-multinode.sbatch sets, `env` over it; its reports under tmp_path/results."""
    box = sandbox(tmp_path, "slurm-multinode.sh")
    return run_job(
        box,
        "slurm-multinode.sh",
        env={
            "GPUACCEPT_RESULTS": str(tmp_path / "results"),
            "SLURM_JOB_ID": job_id,
            "SLURMD_NODENAME": "n2",
            "GPUACCEPT_RDZV_ENDPOINT": "127.0.0.1:29400",
            **env,
        },
    )


def test_scripts_are_strict_bash() -> None:
    for script in (REPO / "tasks").glob("*.sh"):
        text = script.read_text()
        if script.name == "job-lib.sh":
            assert "# shellcheck shell=bash" in text  # sourced, never run
            continue
        assert text.startswith("#!/usr/bin/env bash\n"), script.name
        assert "set -euo pipefail" in text, script.name


def test_accept_job_on_cpu_writes_report_and_environment(tmp_path: Path) -> None:
    box = sandbox(tmp_path, "accept.sh")
    done = run_job(box, "accept.sh", "quick")
    assert done.returncode == 0, done.stderr
    report = load_report(box / "report.json")
    assert report.command == "accept"
    assert report.level == "quick"
    env = json.loads((box / "env.json").read_text())
    assert env["torch"]["version"].startswith("2.")


def test_accept_job_that_fails_exits_1_with_the_report(tmp_path: Path) -> None:
    box = sandbox(tmp_path, "accept.sh")
    # HTCondor assigned a GPU this machine does not have: the inventory check must fail.
    done = run_job(box, "accept.sh", "quick", env={"_CONDOR_AssignedGPUs": "GPU-0badc0de"})
    assert done.returncode == 1, done.stdout + done.stderr
    report = load_report(box / "report.json")
    assert "inventory" in report.verdict.failed_checks


def test_job_without_gpuaccept_exits_3_and_still_reports(tmp_path: Path) -> None:
    box = sandbox(tmp_path, "accept.sh")
    done = run_job(box, "accept.sh", activate=False)
    assert done.returncode == 3
    assert "gpuaccept not found" in done.stderr
    report = load_report(box / "report.json")  # a valid report, not a gap in the results
    [check] = report.checks
    assert check.status is Status.ERROR
    assert "exited 3" in check.message
    assert "error" in json.loads((box / "env.json").read_text())
    # and it goes into the history like any other run
    history = tmp_path / "h.sqlite"
    result = CliRunner().invoke(
        app, ["history", "import", str(box / "report.json"), "--history", str(history)]
    )
    assert result.exit_code == 0, result.output


def test_bench_job_with_bad_input_exits_2_with_a_report(tmp_path: Path) -> None:
    box = sandbox(tmp_path, "bench.sh")
    done = run_job(box, "bench.sh", "no-such-benchmark")
    assert done.returncode == 2
    [check] = load_report(box / "report.json").checks
    assert "gpuaccept bench exited 2" in check.message


def test_train_job_without_data_exits_2_with_a_report(tmp_path: Path) -> None:
    box = sandbox(tmp_path, "train-mnist.sh")
    done = run_job(box, "train-mnist.sh", "MNIST_data.tar.gz", "1")
    assert done.returncode == 2
    assert "MNIST_data.tar.gz" in done.stderr
    assert load_report(box / "report.json").checks[0].status is Status.ERROR
    assert not (box / "mnist_cnn.pt").exists()


def test_vanilla_job_without_its_pack_exits_3(tmp_path: Path) -> None:
    box = sandbox(tmp_path, "accept-vanilla.sh")
    # transferred without its executable bit, as file transfer may leave it
    (box / "accept.sh").write_text((REPO / "tasks/accept.sh").read_text())
    done = run_job(box, "accept-vanilla.sh", "gpuaccept-cuda12.sh", activate=False)
    assert done.returncode == 3
    assert "was not transferred" in done.stderr
    assert load_report(box / "report.json").checks[0].status is Status.ERROR


def _start_job(box: Path, script: str, *args: str, env: dict[str, str]) -> subprocess.Popen[str]:
    environ = {
        "PATH": "/usr/bin:/bin",
        "HOME": str(box),
        "GPUACCEPT_ACTIVATE": str(activation_hook(box)),
        "PYTHONUNBUFFERED": "1",  # each line as it is printed: the signal comes mid-check
        **env,
        **suite_settings(),
    }
    return subprocess.Popen(
        ["bash", str(box / script), *args],
        cwd=box,
        env=environ,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


@pytest.mark.slow
def test_a_slurm_step_cancelled_mid_run_still_leaves_its_report(tmp_path: Path) -> None:
    """scancel, a time limit or preemption send SIGTERM to the job script: the script waits for
    gpuaccept to write its report (interrupted) and moves it into the results directory."""
    box = sandbox(tmp_path, "slurm-accept.sh")
    results = tmp_path / "results"
    # NVML that hangs in nvmlInit: once the workers are ready, the first worker reads the start
    # counters through it for 10 s, however late the test reads the line on a loaded machine
    scenario = tmp_path / "nvml.json"
    scenario.write_text(json.dumps({"init": "hang", "gpus": []}))
    process = _start_job(
        box,
        "slurm-accept.sh",
        "quick",
        env={
            "GPUACCEPT_RESULTS": str(results),
            "SLURM_JOB_ID": "77",
            "SLURMD_NODENAME": "n1",
            "PYTHONPATH": str(REPO),
            "GPUACCEPT_NVML_MODULE": "tests.fake_nvml",
            "FAKE_NVML_SCENARIO": str(scenario),
            # the worker stays in the hung nvmlInit this long: ample for a late read
            "GPUACCEPT_NVML_INIT_TIMEOUT": "10",
        },
    )
    assert process.stdout is not None
    started, seen = time.monotonic(), []
    for line in process.stdout:
        seen.append(f"{time.monotonic() - started:6.1f} {line}")
        if "warm worker(s) ready" in line:  # the start counters follow, stuck in the hung NVML
            process.send_signal(signal.SIGTERM)
            break
    stdout, stderr = process.communicate(timeout=120)
    assert process.returncode == 143, (
        "".join(seen) + f"{time.monotonic() - started:6.1f}\n" + stdout + stderr
    )
    report = load_report(results / "accept-77-n1.json")
    assert report.verdict.outcome == "interrupted"
    assert report.verdict.interrupted_by == "SIGTERM"


def test_a_multinode_step_without_its_rendezvous_writes_a_report_saying_so(
    tmp_path: Path,
) -> None:
    box = sandbox(tmp_path, "slurm-multinode.sh")
    results = tmp_path / "results"
    done = run_job(
        box,
        "slurm-multinode.sh",
        env={"GPUACCEPT_RESULTS": str(results), "SLURM_JOB_ID": "78", "SLURMD_NODENAME": "n2"},
    )
    assert done.returncode == 2
    assert "GPUACCEPT_RDZV_ENDPOINT is not set" in done.stderr
    report = load_report(results / "accept-78-n2.json")
    assert report.verdict.outcome == "fail"
    assert "GPUACCEPT_RDZV_ENDPOINT was not set" in report.checks[0].message


@pytest.mark.parametrize(
    "endpoint", ["n1", "n1:", "n1:0", "n1:70000", "n 1:29400", "n1:29400x", "n1:29400\n"]
)
def test_a_malformed_rendezvous_is_refused_before_torchrun_with_a_report(
    tmp_path: Path, endpoint: str
) -> None:
    results = tmp_path / "results"
    done = _multinode_step(tmp_path, "78", {"GPUACCEPT_RDZV_ENDPOINT": endpoint})
    assert done.returncode == 2, done.stdout + done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith("slurm-multinode: GPUACCEPT_RDZV_ENDPOINT="), done.stderr
    assert line.endswith("is not HOST:PORT (a port 1 to 65535)"), done.stderr
    report = load_report(results / "accept-78-n2.json")
    assert report.verdict.outcome == "fail"
    assert "GPUACCEPT_RDZV_ENDPOINT is not HOST:PORT" in report.checks[0].message


def test_burn_in_job_exits_85_at_each_checkpoint_and_resumes_until_its_report(
    tmp_path: Path,
) -> None:
    # HTCondor's self-checkpointing as the submit file sets it up: exit 85 means "save
    # burnin.ckpt and run me again"; the job is run again in the same sandbox until it ends
    box = sandbox(tmp_path, "burnin.sh")
    runs = []
    for _ in range(4):
        done = run_job(box, "burnin.sh", "4s", "1s", "2")
        runs.append(done.returncode)
        if done.returncode != 85:
            break
        assert not (box / "report.json").exists()  # a checkpoint, not an outcome
    assert runs == [85, 0], done.stdout + done.stderr
    assert "[BURNIN] resuming at window 3 of 4" in done.stdout
    report = load_report(box / "report.json")
    assert report.command == "burnin"
    assert report.verdict.passed
    throughput = next(c for c in report.checks if c.name == "burnin-throughput")
    assert [w["window"] for w in throughput.details["series"]] == [0, 1, 2, 3]


@pytest.mark.parametrize("nproc", ["abc", "0", "-1", "1e3", "2 3"])
def test_a_bad_process_count_is_refused_in_one_line_before_torchrun(
    tmp_path: Path, nproc: str
) -> None:
    done = _multinode_step(tmp_path, "79", {"GPUACCEPT_NPROC": nproc})
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr.strip().splitlines() == [
        f"slurm-multinode.sh: error: GPUACCEPT_NPROC={nproc}: expected the processes per node, "
        "1 to 9999"
    ]


@pytest.mark.parametrize("address", ["gpu 7", "a\nb", "x" * 254, "tab\there"])
def test_a_bad_local_address_is_refused_in_one_line_before_torchrun(
    tmp_path: Path, address: str
) -> None:
    done = _multinode_step(tmp_path, "79", {"GPUACCEPT_LOCAL_ADDR": address})
    assert done.returncode == 2, done.stdout + done.stderr
    (line,) = done.stderr.strip().splitlines()  # one line, the value quoted
    assert line.startswith("slurm-multinode.sh: error: GPUACCEPT_LOCAL_ADDR="), done.stderr
    assert line.endswith(": expected a host name or address"), done.stderr


@pytest.mark.parametrize(
    ("env", "said"),
    [
        ({"GPUACCEPT_ISOLATE_MIN_BUSBW": "fast"}, "GPUACCEPT_ISOLATE_MIN_BUSBW=fast: expected"),
        ({"GPUACCEPT_ISOLATE_MIN_BUSBW": "-3"}, "GPUACCEPT_ISOLATE_MIN_BUSBW=-3: expected"),
        ({"GPUACCEPT_ISOLATE_MIN_BUSBW": "1e3"}, "GPUACCEPT_ISOLATE_MIN_BUSBW=1e3: expected"),
        ({"GPUACCEPT_TOPOLOGY": "/etc/topology.conf"}, "GPUACCEPT_TOPOLOGY guides"),
        ({"GPUACCEPT_MIN_ALLGATHER_BUSBW": "fast"}, "GPUACCEPT_MIN_ALLGATHER_BUSBW=fast: expected"),
        ({"GPUACCEPT_MIN_ALLTOALL_BUSBW": "-1"}, "GPUACCEPT_MIN_ALLTOALL_BUSBW=-1: expected"),
        ({"GPUACCEPT_MIN_ALLTOALL_BUSBW": "nan"}, "GPUACCEPT_MIN_ALLTOALL_BUSBW=nan: expected"),
        ({"GPUACCEPT_RAILS": "yes"}, "GPUACCEPT_RAILS=yes: expected 1 (rails) or 0"),
        ({"GPUACCEPT_RAILS": "2"}, "GPUACCEPT_RAILS=2: expected"),
        ({"GPUACCEPT_PAIRWISE": "yes"}, "GPUACCEPT_PAIRWISE=yes: expected 1 (pair-wise) or 0"),
        ({"GPUACCEPT_PAIRWISE": "true"}, "GPUACCEPT_PAIRWISE=true: expected"),
    ],
)
def test_a_bad_isolation_setting_is_refused_in_one_line_before_torchrun(
    tmp_path: Path, env: dict[str, str], said: str
) -> None:
    done = _multinode_step(tmp_path, "80", env)
    assert done.returncode == 2, done.stdout + done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith("slurm-multinode.sh: error: ")
    assert said in line


def test_the_collectives_floors_reach_accept_on_every_node(tmp_path: Path) -> None:
    """GPUACCEPT_MIN_ALLGATHER_BUSBW and GPUACCEPT_MIN_ALLTOALL_BUSBW become accept's options
    (a torchrun stand-in records what it was asked to start)."""
    box = sandbox(tmp_path, "slurm-multinode.sh")
    fake = tmp_path / "fake-bin"
    fake.mkdir()
    asked = tmp_path / "torchrun-args"
    (fake / "torchrun").write_text(f'#!/bin/sh\nprintf "%s\\n" "$@" > {asked}\n')
    (fake / "torchrun").chmod(0o755)
    hook = activation_hook(box)
    hook.write_text(hook.read_text() + f'export PATH="{fake}:$PATH"\n')
    run_job(
        box,
        "slurm-multinode.sh",
        "quick",
        activate=False,
        env={
            "GPUACCEPT_ACTIVATE": str(hook),
            "GPUACCEPT_RESULTS": str(tmp_path / "results"),
            "SLURM_JOB_ID": "81",
            "SLURMD_NODENAME": "n2",
            "GPUACCEPT_RDZV_ENDPOINT": "127.0.0.1:29400",
            "GPUACCEPT_ISOLATE_MIN_BUSBW": "400",
            "GPUACCEPT_MIN_ALLGATHER_BUSBW": "300.5",
            "GPUACCEPT_MIN_ALLTOALL_BUSBW": "70",
        },
    )
    args = asked.read_text().splitlines()
    accept = args[args.index("accept") :]
    for option, value in (
        ("--min-busbw", "400"),
        ("--min-allgather-busbw", "300.5"),
        ("--min-alltoall-busbw", "70"),
    ):
        assert accept[accept.index(option) + 1] == value, accept
    assert "--isolate" in accept


def test_the_health_check_with_its_results_under_a_file_does_not_judge_or_drain(
    tmp_path: Path,
) -> None:
    """Issue #30 §7: a bare `mkdir` error exited 1, which the script's own header reads as
    "failed, and drained"."""
    import subprocess

    blocker = tmp_path / "a-file"
    blocker.write_text("")
    done = subprocess.run(
        [str(REPO / "slurm" / "healthcheck.sh")],
        capture_output=True,
        text=True,
        check=False,
        env={
            "PATH": "/usr/bin:/bin",
            "GPUACCEPT_RESULTS": str(blocker / "reports"),
            "SLURMD_NODENAME": "gpu-17",
        },
        timeout=60,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stderr.strip().splitlines() == [
        f"healthcheck: GPUACCEPT_RESULTS={blocker / 'reports'} is not a directory this user can "
        "write; gpu-17 not judged, not drained"
    ]


def _health_check(tmp_path: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """slurm/healthcheck.sh as slurmd runs it on node gpu-17, with this venv's gpuaccept and no
    Slurm to reach (an `sinfo` that fails: no drain reason), `env` over that."""
    stubs = tmp_path / "bin"
    stubs.mkdir(exist_ok=True)
    (stubs / "sinfo").write_text("#!/bin/sh\nexit 1\n")
    (stubs / "sinfo").chmod(0o755)
    environ = {
        "PATH": f"{stubs}:/usr/bin:/bin",
        "HOME": str(tmp_path),
        "SLURMD_NODENAME": "gpu-17",
        "GPUACCEPT_RESULTS": str(tmp_path / "reports"),
        "GPUACCEPT_ACTIVATE": str(activation_hook(tmp_path)),
        "GPUACCEPT_HEALTHCHECK_ARGS": "--device cpu --only stack",
        **suite_settings(),
    }
    return subprocess.run(
        [str(REPO / "slurm" / "healthcheck.sh")],
        capture_output=True,
        text=True,
        check=False,
        cwd=tmp_path,
        env=environ | env,
        timeout=300,
    )


@pytest.mark.parametrize(
    ("env", "said"),
    [
        (
            {"GPUACCEPT_ACT": "enforced"},
            "GPUACCEPT_ACT=enforced is not one of enforce, shadow, report",
        ),
        ({"GPUACCEPT_ACT": "--help"}, "GPUACCEPT_ACT=--help is not one of"),
        ({"GPUACCEPT_RESUME_LEVEL": "burnin"}, "GPUACCEPT_RESUME_LEVEL=burnin is not one of quick"),
        (
            {"GPUACCEPT_HEALTHCHECK_TIMEOUT": "0"},
            "GPUACCEPT_HEALTHCHECK_TIMEOUT=0 is not a time above",
        ),
        (
            {"GPUACCEPT_HEALTHCHECK_TIMEOUT": "0.0s"},
            "GPUACCEPT_HEALTHCHECK_TIMEOUT=0.0s is not a time",
        ),
        (
            {"GPUACCEPT_HEALTHCHECK_TIMEOUT": "ten"},
            "GPUACCEPT_HEALTHCHECK_TIMEOUT=ten is not a time",
        ),
        (
            {"GPUACCEPT_HEALTHCHECK_TIMEOUT": "10x"},
            "GPUACCEPT_HEALTHCHECK_TIMEOUT=10x is not a time",
        ),
        ({"GPUACCEPT_HEALTHCHECK_TIMEOUT": "-5"}, "GPUACCEPT_HEALTHCHECK_TIMEOUT=-5 is not a time"),
    ],
)
def test_a_bad_health_check_setting_is_refused_before_the_run_and_drains_nothing(
    tmp_path: Path, env: dict[str, str], said: str
) -> None:
    """Issue #30 §9. Read after the run, a bad act mode or resume level cost the run and left a
    failed node undrained; `timeout 0` never ends the run. Refused first, in one line, exit 0
    (a Prolog's non-zero exit drains the node): nothing run, nothing written."""
    done = _health_check(tmp_path, env)
    assert done.returncode == 0, done.stdout + done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith(f"healthcheck: {said}"), line
    assert line.endswith("; gpu-17 not judged, not drained"), line
    assert done.stdout == ""
    assert list((tmp_path / "reports").iterdir()) == []


@pytest.mark.parametrize("form", ["missing", "directory", "fifo", "dev-zero"])
def test_an_activation_hook_that_is_not_a_file_is_said_and_no_other_gpuaccept_runs(
    tmp_path: Path, form: str
) -> None:
    """GPUACCEPT_ACTIVATE (issue #30 §9) naming what is not a file was passed over in silence, and
    the image's gpuaccept (or one unpacked beside a job) ran in its place."""
    hook = tmp_path / "hook"
    if form == "directory":
        hook.mkdir()
    elif form == "fifo":
        os.mkfifo(hook)
    elif form == "dev-zero":
        hook.symlink_to("/dev/zero")
    box = sandbox(tmp_path, "accept.sh")
    planted = tmp_path / "planted"
    (box / "activate.sh").write_text(f"touch {planted}\n")  # the pack's hook beside the job
    done = run_job(box, "accept.sh", activate=False, env={"GPUACCEPT_ACTIVATE": str(hook)})
    assert done.returncode == 3, done.stdout + done.stderr
    assert (
        f"job: GPUACCEPT_ACTIVATE={hook} is not a file this user can read; gpuaccept not found"
        in done.stderr
    )
    assert not planted.exists()
    [check] = load_report(box / "report.json").checks
    assert "exited 3" in check.message
    checked = _health_check(tmp_path, {"GPUACCEPT_ACTIVATE": str(hook)})
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert checked.stderr.strip().splitlines() == [
        f"job: GPUACCEPT_ACTIVATE={hook} is not a file this user can read; gpuaccept not found",
        "healthcheck: gpuaccept not found; gpu-17 not judged",
    ]


def test_bad_accept_or_act_options_in_the_health_check_are_said_and_drain_nothing(
    tmp_path: Path,
) -> None:
    """GPUACCEPT_HEALTHCHECK_ARGS and GPUACCEPT_ACT_ARGS (issue #30 §9) are options of accept and
    act, refused by them in one line (exit 2): the node is not judged, or its verdict stands
    unacted on, and the log says which."""
    bad_accept = _health_check(tmp_path, {"GPUACCEPT_HEALTHCHECK_ARGS": "--levle quick"})
    assert bad_accept.returncode == 0, bad_accept.stdout + bad_accept.stderr
    assert "No such option: --levle" in bad_accept.stdout
    assert bad_accept.stderr.strip().splitlines()[-1] == (
        "healthcheck: gpu-17 not judged (gpuaccept exited 2); not drained"
    )
    failed = _health_check(
        tmp_path,
        {
            "GPUACCEPT_HEALTHCHECK_ARGS": "--device cpu --only inventory --expect-gpus 1",
            "GPUACCEPT_ACT_ARGS": "--breaker-share lots",
        },
    )
    assert failed.returncode == 1, failed.stdout + failed.stderr
    (line,) = failed.stderr.strip().splitlines()
    assert line.startswith(
        "healthcheck: gpu-17 failed (gpuaccept quick: inventory) but could not be drained: "
    ), line
    assert "--breaker-share" in line


@pytest.mark.parametrize("script", ["slurm-accept.sh", "slurm-burnin.sh", "slurm-multinode.sh"])
def test_a_slurm_job_whose_results_cannot_be_written_says_so_as_an_input_error(
    tmp_path: Path, script: str
) -> None:
    """GPUACCEPT_RESULTS (issue #30 §9) under a file: set -e stopped the job with mkdir's own
    words and exit 1, which a job's caller reads as "not accepted"."""
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    box = sandbox(tmp_path, script)
    done = run_job(
        box,
        script,
        env={
            "GPUACCEPT_RESULTS": str(blocker / "results"),
            "SLURM_JOB_ID": "81",
            "SLURMD_NODENAME": "n2",
            "GPUACCEPT_RDZV_ENDPOINT": "127.0.0.1:29400",
        },
    )
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr.strip().splitlines() == [
        f"job: GPUACCEPT_RESULTS={blocker / 'results'} is not a directory this user can write"
    ]


@pytest.mark.parametrize(
    "source", ["GPUACCEPT_NODE_NAME", "SLURMD_NODENAME", "GPUACCEPT_K8S_NODE_NAME", "hostname"]
)
def test_a_placeholder_report_names_the_node_as_gpuaccept_would(
    tmp_path: Path, source: str
) -> None:
    """Issue #53 §5: the placeholder named the node `vm_` (hostname's newline turned into `_`),
    which node-verdict refused and `history import` filed under a node that does not exist."""
    import socket

    from gpuaccept.record.identity import node_name_of, resolve_node_name
    from gpuaccept.report.node_verdict import node_verdict

    env = {} if source == "hostname" else {source: "gpu-17"}
    report_file = tmp_path / "report.json"
    done = subprocess.run(
        [
            "bash",
            "-c",
            'set -euo pipefail; source "$1"; gpuaccept_ensure_report "$2" accept 3',
            "-",
            str(REPO / "tasks" / "job-lib.sh"),
            str(report_file),
        ],
        env={"PATH": "/usr/bin:/bin", **env},
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    report = load_report(report_file)
    host = socket.gethostname()
    assert report.hostname == host  # no `_` where the newline was
    assert report.environment["node"] == resolve_node_name(env, host)
    assert node_verdict(report).node == node_name_of(report) == env.get(source, host)
    history = tmp_path / "h.sqlite"
    result = CliRunner().invoke(
        app, ["history", "import", str(report_file), "--history", str(history)]
    )
    assert result.exit_code == 0, result.output
    listed = CliRunner().invoke(app, ["history", "list", "--history", str(history), "--json"])
    assert [run["node"] for run in json.loads(listed.stdout)] == [env.get(source, host)]
