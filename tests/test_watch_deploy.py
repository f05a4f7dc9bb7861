"""The watch's systemd unit and DaemonSet: systemd's own verifier takes the unit without a word,
and the command line each starts is one `gpuaccept watch` accepts and runs (the DaemonSet is
validated against Kubernetes' schemas with the other manifests: tests/test_kubernetes.py)."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.checks.conftest import h100_sxm

REPO = Path(__file__).resolve().parent.parent
UNIT = REPO / "systemd" / "gpuaccept-watch.service"
DAEMONSET = REPO / "k8s" / "watch-daemonset.yaml"
INSTALLED = "/opt/gpuaccept/bin/gpuaccept"


def _exec_start() -> list[str]:
    [line] = [x for x in UNIT.read_text().splitlines() if x.startswith("ExecStart=")]
    return shlex.split(line.removeprefix("ExecStart="))


def _verify(unit_text: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    if shutil.which("systemd-analyze") is None:
        pytest.skip("no systemd-analyze here (Debian: apt-get install systemd)")
    gpuaccept = Path(sys.executable).with_name("gpuaccept")
    unit = tmp_path / UNIT.name
    unit.write_text(unit_text.replace(INSTALLED, str(gpuaccept)))
    return subprocess.run(
        ["systemd-analyze", "verify", str(unit)], capture_output=True, text=True, check=False
    )


def test_systemd_verifies_the_unit_without_a_word(tmp_path: Path) -> None:
    done = _verify(UNIT.read_text(), tmp_path)
    assert (done.returncode, done.stderr) == (0, "")


def test_the_verifier_speaks_up_on_a_key_systemd_does_not_know(tmp_path: Path) -> None:
    done = _verify(UNIT.read_text().replace("\nNice=", "\nNicety="), tmp_path)
    assert "Unknown key 'Nicety'" in done.stderr


def _runs(argv: list[str], tmp_path: Path) -> subprocess.CompletedProcess[str]:
    """`argv` (gpuaccept watch ...) once against a healthy fake GPU, recording into tmp_path."""
    scenario = tmp_path / "scenario.json"
    scenario.write_text(json.dumps({"gpus": [h100_sxm()]}))
    (tmp_path / "kern.log").write_text("")
    env = {
        **os.environ,
        "GPUACCEPT_NVML_MODULE": "tests.fake_nvml",
        "FAKE_NVML_SCENARIO": str(scenario),
        "GPUACCEPT_KERNEL_LOG": str(tmp_path / "kern.log"),
        "GPUACCEPT_ACT_STATE": str(tmp_path / "act.json"),
        "PYTHONPATH": str(REPO),
        "PATH": str(tmp_path),  # no sinfo: the unit's shadow mode says so and goes on
    }
    assert argv[:2] == [argv[0], "watch"]
    history = ["--history", str(tmp_path / "history.sqlite")]
    return subprocess.run(
        [sys.executable, "-m", "gpuaccept", *argv[1:], *history, "--once"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_the_units_command_line_is_one_watch_runs(tmp_path: Path) -> None:
    argv = _exec_start()
    assert argv[0] == INSTALLED
    done = _runs(argv, tmp_path)
    assert done.returncode == 0, done.stderr
    assert "action layer: shadow" in done.stdout


def test_the_daemonsets_command_line_is_one_watch_runs(tmp_path: Path) -> None:
    [pod] = [d["spec"]["template"]["spec"] for d in yaml.safe_load_all(DAEMONSET.read_text())]
    [container] = pod["containers"]
    assert container["resources"]["limits"]["nvidia.com/gpu"] == "0"  # claims no GPU
    args = container["args"]
    assert args[args.index("--metrics-port") + 1] == str(container["ports"][0]["containerPort"])
    done = _runs(args, tmp_path)
    assert done.returncode == 0, done.stderr
    assert "action layer: report" in done.stdout
