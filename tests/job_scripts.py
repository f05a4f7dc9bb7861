"""Running the job scripts of tasks/ as HTCondor would: in an empty sandbox directory."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def sandbox(tmp_path: Path, script: str) -> Path:
    """A job sandbox holding the script and job-lib.sh, as transfer_input_files leaves it."""
    box = tmp_path / "sandbox"
    box.mkdir()
    for name in (script, "job-lib.sh"):
        shutil.copy2(REPO / "tasks" / name, box / name)
    return box


def activation_hook(directory: Path) -> Path:
    """An activation hook in `directory` that puts this venv's gpuaccept on PATH."""
    hook = directory / "activate-test.sh"
    hook.write_text(f'export PATH="{Path(sys.executable).parent}:$PATH"\n')
    return hook


def suite_settings() -> dict[str, str]:
    """The suite's own settings a job inherits: a temporary history, no pool, one torch thread
    (conftest.py)."""
    return {
        name: os.environ[name]
        for name in ("GPUACCEPT_HISTORY", "CONDOR_CONFIG", "OMP_NUM_THREADS")
        if name in os.environ
    }


def run_job(
    box: Path,
    script: str,
    *args: str,
    activate: bool = True,
    env: dict[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run the script; with `activate`, an activation hook puts this venv's gpuaccept on PATH."""
    environ = {
        "PATH": "/usr/bin:/bin",
        "HOME": str(box),
        "_CONDOR_SCRATCH_DIR": str(box),
        **(env or {}),
    }
    if activate:
        environ["GPUACCEPT_ACTIVATE"] = str(activation_hook(box))
    environ.update(suite_settings())
    return subprocess.run(
        ["bash", str(box / script), *args],
        cwd=box,
        env=environ,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
