"""Containers and GitHub Actions, checked by the real linters and by our own invariants."""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.cli_paths import resolve_cli
from tests.pixi_invariants import environment_platforms, workspace_platforms

REPO = Path(__file__).resolve().parent.parent
DOCKERFILE = REPO / "containers" / "Dockerfile"
WORKFLOWS = REPO / ".github" / "workflows"
DOCKER_PLATFORM = {"linux-64": "linux/amd64", "linux-aarch64": "linux/arm64"}
CUDA_TARGETS = ("cuda12", "gb10")


def _tool(name: str) -> str:
    found = shutil.which(name) or str(Path(sys.executable).parent / name)
    assert Path(found).exists(), f"{name} is a test dependency (pyproject [test])"
    return found


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, capture_output=True, text=True, check=False, cwd=REPO)


def _hadolint(path: Path) -> subprocess.CompletedProcess[str]:
    return _run(_tool("hadolint"), "--failure-threshold", "style", str(path))


def _workflow(name: str) -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load((WORKFLOWS / name).read_text())
    return data


def test_dockerfile_has_no_hadolint_findings() -> None:
    done = _hadolint(DOCKERFILE)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.strip() == ""


def test_a_sloppy_dockerfile_fails_hadolint(tmp_path: Path) -> None:
    sloppy = tmp_path / "Dockerfile"
    sloppy.write_text(DOCKERFILE.read_text().replace("FROM ubuntu:24.04", "FROM ubuntu") +
                      "RUN apt-get update && apt-get install -y curl\n")  # fmt: skip
    done = _hadolint(sloppy)
    assert done.returncode != 0
    assert "DL3007" in done.stdout or "DL3006" in done.stdout


def test_workflows_validate_against_the_github_schema() -> None:
    files = sorted(str(p) for p in WORKFLOWS.glob("*.yml"))
    assert {Path(f).name for f in files} == {"ci.yml", "containers.yml", "lock.yml"}
    done = _run(_tool("check-jsonschema"), "--builtin-schema", "vendor.github-workflows", *files)
    assert done.returncode == 0, done.stdout + done.stderr


def test_a_broken_workflow_fails_the_schema(tmp_path: Path) -> None:
    broken = tmp_path / "broken.yml"
    broken.write_text((WORKFLOWS / "ci.yml").read_text().replace("runs-on:", "run-on:"))
    done = _run(
        _tool("check-jsonschema"), "--builtin-schema", "vendor.github-workflows", str(broken)
    )
    assert done.returncode != 0


def _zizmor(path: Path) -> subprocess.CompletedProcess[str]:
    return _run(
        _tool("zizmor"), "--offline", "--min-severity", "medium", "--format", "plain", str(path)
    )


def test_zizmor_reports_nothing_above_low() -> None:
    done = _zizmor(WORKFLOWS)
    assert done.returncode == 0, done.stdout + done.stderr


def test_zizmor_catches_untrusted_input_in_a_run_line(tmp_path: Path) -> None:
    folder = tmp_path / ".github" / "workflows"
    folder.mkdir(parents=True)
    text = (
        (WORKFLOWS / "ci.yml")
        .read_text()
        .replace("run: pixi lock --check", "run: echo ${{ github.event.pull_request.title }}")
    )
    (folder / "ci.yml").write_text(text)
    done = _zizmor(folder)
    assert done.returncode != 0
    assert "template-injection" in done.stdout + done.stderr


def _uses() -> list[tuple[str, str]]:
    found = []
    for path in WORKFLOWS.glob("*.yml"):
        for job in _workflow(path.name)["jobs"].values():
            for step in job.get("steps", []):
                if "uses" in step:
                    found.append((path.name, step["uses"]))
    return found


def test_every_action_is_pinned_by_commit_sha() -> None:
    uses = _uses()
    assert len(uses) >= 10
    for workflow, use in uses:
        assert re.fullmatch(r"[\w.-]+/[\w.-]+@[0-9a-f]{40}", use), (workflow, use)
    lines = [line for p in WORKFLOWS.glob("*.yml") for line in p.read_text().splitlines()]
    for line in lines:
        if "uses:" in line:
            assert re.search(r"# v\d", line), line  # the version the SHA stands for


def test_permissions_are_least_privilege() -> None:
    for path in WORKFLOWS.glob("*.yml"):
        workflow = _workflow(path.name)
        assert workflow["permissions"] == {"contents": "read"}, path.name
    image = _workflow("containers.yml")["jobs"]["image"]["permissions"]
    assert image == {
        "contents": "read",
        "packages": "write",
        "id-token": "write",
        "attestations": "write",
    }
    for path in WORKFLOWS.glob("*.yml"):
        for step in (s for job in _workflow(path.name)["jobs"].values() for s in job["steps"]):
            if str(step.get("uses", "")).startswith("actions/checkout@"):
                assert step["with"]["persist-credentials"] is False


def test_no_expression_is_expanded_inside_a_run_line() -> None:
    for path in WORKFLOWS.glob("*.yml"):
        for job in _workflow(path.name)["jobs"].values():
            for step in job["steps"]:
                assert "${{" not in step.get("run", ""), (path.name, step.get("name"))


def test_every_cuda_target_has_an_image_build(pixi_manifest: dict[str, Any]) -> None:
    platforms = {p.name: p for p in workspace_platforms(pixi_manifest)}
    matrix = _workflow("containers.yml")["jobs"]["image"]["strategy"]["matrix"]["include"]
    by_target = {entry["target"]: entry for entry in matrix}
    dockerfile = DOCKERFILE.read_text()
    gpu_environments = {
        env
        for env in pixi_manifest["environments"]
        if any(platforms[p].cuda for p in environment_platforms(pixi_manifest, env))
    }
    assert gpu_environments == set(CUDA_TARGETS) == set(by_target)
    for target in CUDA_TARGETS:
        [name] = environment_platforms(pixi_manifest, target)
        platform = platforms[name]
        assert by_target[target]["platform"] == DOCKER_PLATFORM[platform.subdir]
        arm = platform.subdir == "linux-aarch64"
        assert by_target[target]["runner"].endswith("-arm") == arm  # native, not emulated
        assert f"{target}) export CONDA_OVERRIDE_CUDA={platform.cuda} ;;" in dockerfile
        assert "tini" in pixi_manifest["target"][name]["dependencies"]


def test_image_default_command_is_a_real_cli_command() -> None:
    cmd = re.search(r"^CMD (\[.*\])$", DOCKERFILE.read_text(), re.MULTILINE)
    assert cmd is not None
    argv = yaml.safe_load(cmd.group(1))
    assert argv[0] == "gpuaccept"
    path, params = resolve_cli(argv[1:])
    assert path == ["gpuaccept", "accept"]
    assert params["level"] == "quick"


def test_image_is_safe_to_run_on_shared_clusters() -> None:
    text = DOCKERFILE.read_text()
    assert re.search(r"^USER 10001$", text, re.MULTILINE)
    assert "NVIDIA_DRIVER_CAPABILITIES=compute,utility" in text
    assert re.search(r'^ENTRYPOINT \["/opt/gpuaccept/env/bin/tini", "--"', text, re.MULTILINE)
    assert not re.search(r"(?i)(secret|token|password|id_rsa|\.pem)", text)
    stages = re.findall(r"^FROM (\S+)", text, re.MULTILINE)
    assert len(stages) == 2  # build with pixi, run without it
    assert stages[0].startswith("ghcr.io/prefix-dev/pixi:${PIXI_VERSION}")
    assert re.search(r"^ARG PIXI_VERSION=\d+\.\d+\.\d+$", text, re.MULTILINE)
    assert "pixi install --locked" in text


def test_labels_are_the_ones_gpuaccept_env_reads(tmp_path: Path) -> None:
    from gpuaccept.record import environment

    text = DOCKERFILE.read_text()
    labels = set(re.findall(r"^\s*(?:LABEL )?([a-z][\w.-]+)=\"\$\{", text, re.MULTILINE))
    for key in ("source", "revision", "created", "version"):
        assert f"org.opencontainers.image.{key}" in labels
    assert {"io.gpuaccept.environment", "io.gpuaccept.pixi-lock-sha256"} <= labels
    # the label file the image writes, filled as the build would, is read back by the capture
    printf = re.search(r"printf '(\{.*\})\\n'", text)
    assert printf is not None
    values = ["https://github.com/acme/gpuaccept", "abc123", "2026-11-21T00:00:00Z", "1.0.0",
              "gb10", "f" * 64]  # fmt: skip
    label_file = tmp_path / "image-labels.json"
    filled = printf.group(1)
    for value in values:
        filled = filled.replace("%s", value, 1)
    label_file.write_text(filled)
    container = environment.container_from_labels(environment.image_labels((label_file,)), None)
    assert container is not None
    assert (container["environment"], container["lock_sha256"]) == ("gb10", "f" * 64)
    assert f"> {environment.IMAGE_LABEL_FILES[0]}" in text


def test_dockerignore_keeps_the_context_small() -> None:
    lines = [
        line
        for line in (REPO / ".dockerignore").read_text().splitlines()
        if line and not line.startswith("#")
    ]
    assert lines[0] == "*"
    copied = {line.removeprefix("!").rstrip("/") for line in lines if line.startswith("!")}
    for source in re.findall(r"^COPY (?!--from)(.+) \S+$", DOCKERFILE.read_text(), re.MULTILINE):
        for item in shlex.split(source):
            assert item.rstrip("/") in copied, item


def test_apptainer_definition_tests_cpu_mode_acceptance() -> None:
    text = (REPO / "containers" / "apptainer.def").read_text()
    assert re.search(r"^Bootstrap: docker$", text, re.MULTILINE)
    assert "From: {{ IMAGE }}" in text
    test_section = text.split("%test", 1)[1].split("\n%", 1)[0]
    command = next(
        line.strip()
        for line in test_section.splitlines()
        if line.strip().startswith("gpuaccept accept")
    )
    path, params = resolve_cli(shlex.split(command)[1:])
    assert path == ["gpuaccept", "accept"]
    assert (params["device"], params["level"], params["no_history"]) == ("cpu", "quick", True)


@pytest.mark.parametrize("workflow", ["ci.yml"])
def test_ci_checks_the_lock_and_runs_the_no_pixi_route(workflow: str) -> None:
    jobs = _workflow(workflow)["jobs"]
    runs = [s.get("run", "") for s in jobs["pixi"]["steps"]]
    assert "pixi lock --check" in runs
    setup = next(s for s in jobs["pixi"]["steps"] if "setup-pixi" in s.get("uses", ""))
    assert setup["with"]["locked"] is True
    assert setup["with"]["cache"] is True
    assert re.fullmatch(r"v\d+\.\d+\.\d+", setup["with"]["pixi-version"])
    assert any("bash .ci/run" in s.get("run", "") for s in jobs["no-pixi"]["steps"])


def test_lock_workflow_runs_on_schedule_and_opens_a_pull_request() -> None:
    workflow = _workflow("lock.yml")
    triggers = workflow[True]  # YAML 1.1 reads the key `on` as a boolean
    assert "schedule" in triggers
    assert "workflow_dispatch" in triggers
    steps = workflow["jobs"]["refresh"]["steps"]
    script = next(s["run"] for s in steps if "run" in s)
    assert "pixi update --json | pixi exec pixi-diff-to-markdown" in script
    assert "pixi lock\n" in script  # creates the lock when missing
    assert any("create-pull-request" in s.get("uses", "") for s in steps)
