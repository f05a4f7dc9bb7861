"""Environment capture: complete, null for unknowns, valid JSON whatever the host throws at it."""

from __future__ import annotations

import json
import socket
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from gpuaccept.cli import app
from gpuaccept.record import environment
from gpuaccept.results import RunReport
from tests.run_reports import judged_report

SECTIONS = {
    "git", "cuda", "gpus", "python", "torch", "system", "pixi", "packages", "container",
    "scheduler", "nccl_env", "node",
}  # fmt: skip
PLACEHOLDERS = {"", "unknown", "n/a", "na", "none", "null", "?", "-", "undefined"}
HOSTILE = 'n"o\\de\n\t☃ Ünïcødé <b>&</b> \udcff'


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for k, v in value.items() for s in (*_strings(k), *_strings(v))]
    if isinstance(value, list):
        return [s for item in value for s in _strings(item)]
    return []


def test_capture_on_this_machine_is_complete_and_has_no_placeholders() -> None:
    capture = environment.capture_environment()
    assert set(capture) == SECTIONS
    assert capture["python"]["version"]
    assert capture["torch"]["version"].startswith("2.")
    assert capture["system"]["cores"] >= 1
    assert capture["system"]["memory_bytes"] > 2**28
    assert capture["system"]["hostname"] == socket.gethostname()
    assert any(p["name"] == "torch" for p in capture["packages"])
    placeholders = [s for s in _strings(capture) if s.strip().lower() in PLACEHOLDERS]
    assert placeholders == []
    assert json.loads(json.dumps(capture)) == capture


def test_this_checkout_is_identified_by_git() -> None:
    git = environment.capture_environment()["git"]
    head = subprocess.run(
        ["git", "rev-parse", "HEAD"],
        capture_output=True,
        text=True,
        check=True,
        cwd=Path(__file__).parent,
    ).stdout.strip()
    assert git["sha"] == head
    assert isinstance(git["dirty"], bool)


def _job_ad(path: Path) -> Path:
    path.write_text(
        "ClusterId = 4711\n"
        "ProcId = 3\n"
        'GlobalJobId = "submit.example.org#4711.3#1790000000"\n'
        'Owner = "o\\"brien"\n'
        'ContainerImage = "docker://ghcr.io/acme/gpuaccept@sha256:' + "ab" * 32 + '"\n'
        "RequestGpus = 1\n",
        encoding="utf-8",
    )
    return path


def test_hostile_values_stay_valid_json(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    project = tmp_path / 'pro"ject\nΩ'
    project.mkdir()
    (project / "pixi.toml").write_text("[workspace]\n")
    (project / "pixi.lock").write_bytes(b"version: 6\n")
    monkeypatch.setattr(socket, "gethostname", lambda: HOSTILE)
    monkeypatch.setenv("PIXI_PROJECT_MANIFEST", str(project / "pixi.toml"))
    monkeypatch.setenv("PIXI_ENVIRONMENT_NAME", "cuda12")
    monkeypatch.setenv("_CONDOR_JOB_AD", str(_job_ad(tmp_path / ".job.ad")))
    monkeypatch.setenv("SLURM_JOB_ID", "991")
    capture = environment.capture_environment()

    text = json.dumps(capture, ensure_ascii=False)
    text.encode("utf-8")  # no lone surrogates survive
    back = json.loads(text)
    assert back["system"]["hostname"] == HOSTILE.replace("\udcff", "\ufffd")
    assert back["pixi"]["manifest"] == str(project / "pixi.toml")
    assert back["pixi"]["lock_sha256"] is not None
    condor = back["scheduler"]["htcondor"]
    assert (condor["cluster_id"], condor["proc_id"], condor["owner"]) == (4711, 3, 'o"brien')
    assert back["container"]["digest"] == "sha256:" + "ab" * 32
    assert back["scheduler"]["slurm"]["job_id"] == "991"
    # the report that embeds it serialises and reads back too
    report = judged_report(
        tool_version="0",
        command="accept",
        level="quick",
        device_mode="cpu",
        started_at="2026-11-21T00:00:00+00:00",
        finished_at="2026-11-21T00:00:01+00:00",
        duration_seconds=1.0,
        checks=[],
        environment=capture,
    )
    assert RunReport.model_validate_json(report.model_dump_json()) == report


def test_a_failing_probe_leaves_its_field_null(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken() -> None:
        raise RuntimeError("NVML exploded")

    monkeypatch.setattr("gpuaccept.probe.hardware.list_cuda_gpus", broken)
    monkeypatch.setattr(socket, "gethostname", broken)
    capture = environment.capture_environment()
    assert capture["gpus"] is None
    assert capture["system"]["hostname"] is None
    assert capture["torch"]["version"]


def test_job_and_machine_ads_give_full_ids(tmp_path: Path) -> None:
    machine = tmp_path / ".machine.ad"
    machine.write_text('Machine = "gpu-node-17.example.org"\nGPUs_Capability = 9.0\n')
    ids = environment.scheduler_ids(
        {
            "_CONDOR_JOB_AD": str(_job_ad(tmp_path / ".job.ad")),
            "_CONDOR_MACHINE_AD": str(machine),
            "_CONDOR_AssignedGPUs": "GPU-aa11",
        }
    )
    assert ids["htcondor"]["global_job_id"] == "submit.example.org#4711.3#1790000000"
    assert ids["htcondor"]["machine"] == "gpu-node-17.example.org"
    assert ids["htcondor"]["assigned_gpus"] == "GPU-aa11"
    assert ids["slurm"] is None


def test_slurm_ids_and_blank_values(tmp_path: Path) -> None:
    ids = environment.scheduler_ids(
        {"SLURM_JOB_ID": "77", "SLURM_ARRAY_TASK_ID": "", "SLURM_CLUSTER_NAME": "big"}
    )
    assert ids["slurm"]["job_id"] == "77"
    assert ids["slurm"]["array_task_id"] is None  # blank is unknown, not ""
    assert ids["slurm"]["cluster"] == "big"
    assert ids["htcondor"] is None


@pytest.mark.parametrize(
    ("text", "value"),
    [('"a\\"b"', 'a"b'), ("42", 42), ("-1.5", -1.5), ("true", True), ("Foo + 1", "Foo + 1")],
)
def test_classad_literals(text: str, value: Any) -> None:
    assert environment.parse_classad_value(text) == value


def test_remote_credentials_are_never_recorded(tmp_path: Path) -> None:
    assert (
        environment.strip_credentials("https://user:ghp_secret@github.com/acme/gpuaccept.git")
        == "https://github.com/acme/gpuaccept.git"
    )
    assert environment.strip_credentials("git@github.com:acme/x.git") == "git@github.com:acme/x.git"
    for leaky, clean in [
        ("https://alice:s3cr@t@host/r.git", "https://host/r.git"),
        ("https://alice:pa/ss@host/r.git", "https://host/r.git"),
        ("https://host/r.git?access_token=abc", "https://host/r.git"),
        ("https://host/r.git#token=abc", "https://host/r.git"),
        ("alice:pw@host:repo.git", "host:repo.git"),
        (
            "docker://bot:hunter2@ghcr.io/acme/img@sha256:" + "0" * 64,
            "docker://ghcr.io/acme/img@sha256:" + "0" * 64,
        ),
        ("bot:hunter2@ghcr.io/acme/img:1", "ghcr.io/acme/img:1"),
    ]:
        scrubbed = environment.strip_credentials(leaky)
        assert scrubbed == clean, leaky
        for secret in ("s3cr", "pa/ss", "abc", ":pw", "hunter2"):
            assert secret not in scrubbed
    repo = tmp_path / "repo"
    repo.mkdir()
    run = lambda *a: subprocess.run(["git", "-C", str(repo), *a], check=True, capture_output=True)  # noqa: E731
    run("init", "-q", "-b", "work")
    run("-c", "user.email=a@b", "-c", "user.name=a", "commit", "-q", "--allow-empty", "-m", "x")
    run("remote", "add", "origin", "https://bot:tok3n@example.org/r.git")
    state = environment.git_state(repo)
    assert state is not None
    assert state["branch"] == "work"
    assert state["dirty"] is False
    assert state["remote"] == "https://example.org/r.git"
    (repo / "f").write_text("x")
    run("add", "f")
    assert environment.git_state(repo)["dirty"] is True  # type: ignore[index]
    assert environment.git_state(tmp_path / "nowhere") is None


def test_conda_meta_wins_and_packages_are_deduplicated(tmp_path: Path) -> None:
    meta = tmp_path / "conda-meta"
    meta.mkdir()
    (meta / "pytorch-2.10.0-cuda129.json").write_text(
        json.dumps({"name": "pytorch", "version": "2.10.0", "build": "cuda129_h1", "channel": "cf"})
    )
    (meta / "numpy-2.3.json").write_text(json.dumps({"name": "numpy", "version": "2.3.0"}))
    (meta / "history").write_text("not json")
    (meta / "broken.json").write_text("{")
    conda = environment.conda_packages(tmp_path)
    pypi = [
        {"name": "NumPy", "version": "2.3.0", "build": None, "channel": None, "source": "pypi"},
        {"name": "typer", "version": "0.29", "build": None, "channel": None, "source": "pypi"},
        {"name": "typer", "version": "0.15", "build": None, "channel": None, "source": "pypi"},
    ]
    merged = environment.merge_packages(conda, pypi)
    assert [(p["name"], p["version"], p["source"]) for p in merged] == [
        ("numpy", "2.3.0", "conda"),
        ("pytorch", "2.10.0", "conda"),
        ("typer", "0.29", "pypi"),
    ]


def test_container_runtime_markers(tmp_path: Path) -> None:
    assert environment.container_runtime({}, tmp_path) is None
    assert environment.container_runtime({"APPTAINER_CONTAINER": "/x.sif"}, tmp_path) == "apptainer"
    (tmp_path / ".dockerenv").touch()
    assert environment.container_runtime({}, tmp_path) == "docker"


def test_image_labels_read_back(tmp_path: Path) -> None:
    labels = tmp_path / "image-labels.json"
    labels.write_text(
        json.dumps(
            {
                "org.opencontainers.image.source": "https://github.com/acme/gpuaccept",
                "org.opencontainers.image.revision": "abc123",
                "org.opencontainers.image.version": "0.1.0",
                "io.gpuaccept.environment": "cuda12",
                "io.gpuaccept.pixi-lock-sha256": "f" * 64,
            }
        )
    )
    container = environment.container_from_labels(environment.image_labels((labels,)), None)
    assert container is not None
    assert (container["revision"], container["environment"]) == ("abc123", "cuda12")
    assert container["created"] is None
    assert container["digest"] is None
    assert environment.container_from_labels({}, None) is None


def test_cli_env_json_and_output_file(tmp_path: Path) -> None:
    runner = CliRunner()
    result = runner.invoke(app, ["env", "--json"])
    assert result.exit_code == 0, result.output
    assert set(json.loads(result.stdout)) == SECTIONS
    out = tmp_path / "env.json"
    result = runner.invoke(app, ["env", "--output", str(out)])
    assert result.exit_code == 0, result.output
    assert set(json.loads(out.read_text())) == SECTIONS
    result = runner.invoke(app, ["env", "--output", str(tmp_path)])
    assert result.exit_code == 2
    assert result.stderr.strip().splitlines() == [
        f"gpuaccept env: error: --output {tmp_path}: is a directory, expected a file path"
    ]


def test_a_hostile_checkout_runs_nothing_while_its_state_is_read(tmp_path: Path) -> None:
    """core.fsmonitor and filter drivers are commands a repository names; reading its state
    (gpuaccept env, accept) must never run them."""
    repo = tmp_path / "repo"
    repo.mkdir()
    run = lambda *a: subprocess.run(["git", "-C", str(repo), *a], check=True, capture_output=True)  # noqa: E731
    run("init", "-q", "-b", "work")
    (repo / "f.txt").write_text("x\n")
    run("add", "f.txt")
    run("-c", "user.email=a@b", "-c", "user.name=a", "commit", "-q", "-m", "x")
    pwned = tmp_path / "pwned"
    run("config", "core.fsmonitor", f"touch {pwned}-fsmonitor; false")
    state = environment.git_state(repo)
    assert state is not None
    assert state["dirty"] is False
    assert not list(tmp_path.glob("pwned*"))
    run("config", "filter.evil.clean", f"touch {pwned}-filter; cat")
    (repo / ".gitattributes").write_text("*.txt filter=evil\n")
    (repo / "f.txt").write_text("changed\n")
    state = environment.git_state(repo)
    assert state is not None
    assert state["sha"]
    assert state["dirty"] is None  # not asked: status could run the filter
    assert not list(tmp_path.glob("pwned*"))


def test_a_signal_inside_a_probe_stops_the_capture_instead_of_reading_as_unknown(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A probe turns any failure into "unknown". A SIGTERM that came while one waited (nvmlInit
    on a hung driver, 20 s) was such a failure: swallowed, and the run went on to SUCCESS."""
    import os
    import signal

    import gpuaccept.probe.hardware
    from gpuaccept.cli.signals import interrupts_as_exceptions
    from gpuaccept.errors import Interrupted
    from gpuaccept.record.environment import capture_environment

    def terminated_while_waiting() -> tuple[str, str]:
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(5)  # the handler raises here, as it did in the thread join of nvmlInit
        return "570.00", "12.8"

    monkeypatch.setattr(gpuaccept.probe.hardware, "driver_versions", terminated_while_waiting)
    with pytest.raises(Interrupted) as stopped, interrupts_as_exceptions():
        capture_environment()
    assert stopped.value.signum == signal.SIGTERM
    assert stopped.value.exit_code == 143


def test_the_text_summary_says_what_the_json_says() -> None:
    """`container none` while the JSON said docker; CPU, memory and kernel only in the JSON."""
    from gpuaccept.commands.env import _summary_lines

    system = {
        "hostname": "n1",
        "os": "Ubuntu 24.04",
        "architecture": "x86_64",
        "cores": 224,
        "cpu_model": "Intel Xeon Platinum 8480+",
        "memory_bytes": 2 * 1024**4,
        "kernel": "6.8.0-45-generic",
        "container_runtime": "docker",
    }
    lines = _summary_lines({"system": system})
    assert (
        "cpu       Intel Xeon Platinum 8480+, memory 2048.0 GiB, kernel 6.8.0-45-generic" in lines
    )
    assert "container docker (not a gpuaccept image)" in lines
    ours = {"image": "ghcr.io/o/gpuaccept", "revision": "abc"}
    assert "container ghcr.io/o/gpuaccept revision abc" in _summary_lines(
        {"system": system, "container": ours}
    )
    bare = _summary_lines({"system": {**system, "container_runtime": None}})
    assert "container none" in bare
    assert "cpu       Intel Xeon Platinum 8480+, memory 2048.0 GiB, kernel 6.8.0-45-generic" in bare


def test_nccls_settings_are_captured_and_make_another_stack() -> None:
    from gpuaccept.record.environment import nccl_settings, stack_sha256

    assert nccl_settings(
        {"NCCL_P2P_DISABLE": "1", "NCCL_SHM_DISABLE": "1", "PATH": "/bin", "XNCCL_X": "0"}
    ) == {"NCCL_P2P_DISABLE": "1", "NCCL_SHM_DISABLE": "1"}
    plain = {"python": {"version": "3.11"}, "gpus": [{"name": "H100"}]}
    assert stack_sha256({**plain, "nccl_env": {}}) == stack_sha256(plain)
    assert stack_sha256({**plain, "nccl_env": {"NCCL_P2P_DISABLE": "1"}}) != stack_sha256(plain)


def test_python_distributions_lists_each_installed_one_with_its_version() -> None:
    from importlib import metadata

    from gpuaccept.record.environment import python_distributions

    found = {package["name"].lower(): package for package in python_distributions()}
    for name in ("pydantic", "typer", "torch"):
        assert found[name]["version"] == metadata.version(name)
        assert found[name]["source"] == "pypi"
    named = {d.metadata["Name"] for d in metadata.distributions() if d.metadata}
    assert set(found) == {name.lower() for name in named if name}
