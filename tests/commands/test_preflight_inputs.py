"""preflight's inputs that are not paths (tests/input_registry.py names these tests): the gang's
settings from the environment, refused in one line before any check runs, and the Prolog's
settings, which are the site's to fix and never the node's fault: not judged, nothing drained,
the job goes on (exit 0: a Prolog's non-zero exit drains the node)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from gpuaccept.commands.output import Collected
from gpuaccept.commands.preflight import PreflightRequest, run
from gpuaccept.errors import InputError

REPO = Path(__file__).resolve().parents[2]
FAKES = REPO / "tests" / "fake_slurm"
PROLOG = REPO / "slurm" / "preflight-prolog.sh"


@pytest.mark.parametrize(
    ("env", "said"),
    [
        ({"GPUACCEPT_GANG_SIZE": "two"}, "GPUACCEPT_GANG_SIZE='two': give a whole number"),
        ({"GPUACCEPT_GANG_SIZE": "0"}, "GPUACCEPT_GANG_SIZE=0: give 1 to 65536"),
        ({"JOB_COMPLETION_INDEX": "2"}, "JOB_COMPLETION_INDEX=2: give 0 to 1"),
        ({"GPUACCEPT_GANG_LEADER": ""}, "--gang in an Indexed Job needs GPUACCEPT_GANG_LEADER"),
    ],
)
def test_a_gang_setting_that_is_not_one_is_refused_in_one_line_before_any_check(
    monkeypatch: pytest.MonkeyPatch, env: dict[str, str], said: str
) -> None:
    base = {
        "JOB_COMPLETION_INDEX": "0",
        "GPUACCEPT_GANG_SIZE": "2",
        "GPUACCEPT_GANG_LEADER": "127.0.0.1",
    }
    for name, value in (base | env).items():
        monkeypatch.setenv(name, value)
    out = Collected()
    with pytest.raises(InputError) as refused:
        run(PreflightRequest(device="cpu", only=("stack",), gang=True), out)
    assert str(refused.value).startswith(said)
    assert "\n" not in str(refused.value)
    assert out.lines == []  # refused before the run said anything


def test_a_slurm_gang_outside_a_job_is_refused_in_one_line(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name in ("JOB_COMPLETION_INDEX", "SLURM_JOB_NODELIST"):
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(InputError, match=r"^--gang under Slurm needs SLURM_JOB_NODELIST or --job"):
        run(PreflightRequest(device="cpu", only=("stack",), gang=True), Collected())


def test_record_without_a_drain_to_record_is_refused() -> None:
    from gpuaccept.commands.act import Guarding

    with pytest.raises(InputError, match=r"^--record holds a drain's decision: give it with --act"):
        PreflightRequest(guarding=Guarding(record=Path("decisions.json")))


@pytest.mark.parametrize(
    ("setting", "said"),
    [
        ({"GPUACCEPT_PREFLIGHT_ARGS": "--budget soon"}, "gpuaccept preflight exited 2"),
        ({"GPUACCEPT_PREFLIGHT_ARGS": "--no-such-option"}, "gpuaccept preflight exited 2"),
        ({"GPUACCEPT_ACT": "drain"}, "GPUACCEPT_ACT=drain is not one of enforce, shadow, report"),
        ({"SLURM_JOB_ID": "12;x"}, "SLURM_JOB_ID=12;x is not a job id"),
        ({"GPUACCEPT_ACTIVATE": "/nonexistent"}, "gpuaccept not found"),
    ],
)
def test_the_prolog_with_a_setting_that_is_not_one_judges_nothing_and_lets_the_job_go(
    tmp_path: Path, setting: dict[str, str], said: str
) -> None:
    state = tmp_path / "slurm.json"
    state.write_text(json.dumps({"nodes": {"gpu00": {"state": "idle"}}}))
    activate = tmp_path / "activate.sh"
    activate.write_text(f'export PATH="{Path(sys.executable).parent}:$PATH"\n')
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "GPUACCEPT_"))}
    env |= {
        "PATH": f"{FAKES}{os.pathsep}{env['PATH']}",
        "FAKE_SLURM_STATE": str(state),
        "FAKE_SLURM_NOW": "2026-11-29T00:00:00",
        "SLURM_JOB_ID": "41",
        "SLURMD_NODENAME": "gpu00",
        "GPUACCEPT_ACTIVATE": str(activate),
        "GPUACCEPT_RESULTS": str(tmp_path / "results"),
        "GPUACCEPT_ACT_STATE": str(tmp_path / "act-state.json"),
        # a failing node, were it judged: only the setting keeps it from being drained
        "GPUACCEPT_PREFLIGHT_ARGS": "--device cpu --only inventory --expect-gpus 64",
    }
    done = subprocess.run(
        ["bash", str(PROLOG)],
        env=env | setting,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert said in done.stderr
    assert "not judged, job " in done.stderr.splitlines()[-1]
    assert json.loads(state.read_text()) == {"nodes": {"gpu00": {"state": "idle"}}}
