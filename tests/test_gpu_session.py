"""benchmarks/gpu_session.py, the one command for the next GPU run, driven on its CPU twin: the
steps run as processes, their figures and the environment capture land in OUT.md and OUT.json."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO


@pytest.mark.slow
def test_the_session_runs_its_steps_and_writes_the_record(tmp_path: Path) -> None:
    out = tmp_path / "session"
    steps = ["--only", "env,bench-membw", "--out", str(out)]
    done = subprocess.run(
        [sys.executable, "benchmarks/gpu_session.py", "--device", "cpu", *steps],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    record = json.loads(out.with_suffix(".json").read_text())
    assert [step["name"] for step in record["steps"]] == ["env", "bench-membw"]
    assert all(step["exit_code"] == 0 for step in record["steps"])
    bench = record["steps"][1]["figures"]
    assert bench["verdict"] == "pass"
    assert bench["within_60_s"] is True
    assert any(key.startswith("membw/") for key in bench)
    assert record["environment"]["torch"]["version"].startswith("2.")
    table = out.with_suffix(".md").read_text()
    assert "| bench-membw | ok |" in table


def test_an_unknown_step_is_refused(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "benchmarks/gpu_session.py", "--only", "env,nonsense"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode != 0
    assert "unknown step(s) nonsense" in done.stderr


def test_a_spent_budget_records_the_steps_as_not_run_in_the_order_given(tmp_path: Path) -> None:
    out = tmp_path / "session"
    done = subprocess.run(
        [
            sys.executable,
            "benchmarks/gpu_session.py",
            "--device",
            "cpu",
            "--only",
            "bench-membw,env",
            "--budget",
            "1",
            "--out",
            str(out),
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    record = json.loads(out.with_suffix(".json").read_text())
    assert [step["name"] for step in record["steps"]] == ["bench-membw", "env"]
    assert all(step["exit_code"] is None for step in record["steps"])
    assert all("--budget spent" in step["not_run"] for step in record["steps"])
    assert "| env | not run: 1 s --budget spent |" in out.with_suffix(".md").read_text()
