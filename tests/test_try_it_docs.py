"""docs/try-it-on-one-machine.md (issue #53 §5): each of its blocks runs as written, from the
repository's root with this venv's gpuaccept and torchrun on PATH, and says what the page says
it says."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from tests.pg_server import binaries, why_not
from tests.run_reports import gpu_report

# a long end-to-end run (processes across stand-in nodes, real services): CI runs it in a step
# of its own (pytest -m service); the everyday command leaves it out
pytestmark = pytest.mark.service

REPO = Path(__file__).resolve().parent.parent
PAGE = REPO / "docs" / "try-it-on-one-machine.md"


def block(name: str) -> str:
    """The page's ```bash NAME block."""
    [found] = re.findall(rf"```bash {name}\n(.*?)```", PAGE.read_text(), re.DOTALL)
    return str(found)


def _as_postgres(real: Path | None, shims: Path) -> Path:
    """A directory of initdb, pg_ctl and createdb that run the real ones as `postgres`, each
    given the directory it needs (the parent of -D's) as that user's."""
    assert real is not None
    shims.mkdir()
    for name in ("initdb", "pg_ctl", "createdb"):
        shim = shims / name
        shim.write_text(
            '#!/bin/bash\nset -eu\nargs=("$@")\n'
            'for i in "${!args[@]}"; do [[ ${args[$i]} == -D ]] && '
            'chown postgres "$(dirname "${args[$((i + 1))]}")"; done\n'
            f'exec setpriv --reuid postgres --regid postgres --clear-groups "{real}/{name}" "$@"\n'
        )
        shim.chmod(0o755)
    return shims


def _run(script: str, cwd: Path, scratch: Path, more: dict[str, str] | None = None) -> str:
    env = {
        "PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin",
        "HOME": str(scratch),
        "TMPDIR": str(scratch),  # mktemp -d here: short enough for a Unix socket's path
        "LC_ALL": "C.UTF-8",
        **{k: os.environ[k] for k in ("OMP_NUM_THREADS",) if k in os.environ},
        **(more or {}),
    }
    done = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", script],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


@pytest.mark.slow
def test_the_isolate_block_finds_the_slow_stand_in_node() -> None:
    with tempfile.TemporaryDirectory(prefix="try-") as where:
        said = _run(block("try-isolate"), REPO, Path(where))
    lines = said.splitlines()
    assert lines[0] == "[node-a] [RUN] isolation", said
    assert lines[1].startswith("[node-a] [COLLECTIVES] FAIL isolation ("), said
    assert re.search(r"\): suspect node\(s\): node-c \(\d+ rounds\)$", lines[1]), said
    assert re.match(r"\[node-a\] \| COLLECTIVES \| isolation +\| fail +\|", lines[2]), said
    assert lines[-1].startswith("[node-a] [RESULT] FAILURE: "), said
    assert len(lines) == 5, said  # the check is said once (issue #53 §5)


@pytest.mark.slow
@pytest.mark.skipif(why_not() is not None, reason=str(why_not()))
def test_the_postgresql_block_runs_a_server_of_ones_own(tmp_path: Path) -> None:
    assert binaries() is not None
    work = Path("/tmp") / f"try-pg-{os.getpid()}"  # a short path: the socket lives under it
    work.mkdir()
    env: dict[str, str] = {}
    try:
        (work / "results").mkdir()
        for node in ("gpu01", "gpu02"):
            report = gpu_report(node, [800.0])
            (work / "results" / f"{node}.json").write_text(report.model_dump_json())
        if os.geteuid() == 0:
            # the page is for a user who can run gpuaccept; under root here (CI, containers) no
            # other user can (this venv's python is under /root), so the block runs as root
            # and only the server's programs as `postgres`, through PGBIN, as the page allows
            env["PGBIN"] = str(_as_postgres(binaries(), work / "pgbin"))
        said = _run(block("try-postgresql"), work, work, env)
    finally:
        for data in work.glob("tmp.*/data"):  # a block that failed half-way leaves no server
            pg_ctl = Path(env.get("PGBIN") or str(binaries())) / "pg_ctl"
            subprocess.run(
                [pg_ctl, "-D", data, "-m", "immediate", "stop"], capture_output=True, check=False
            )
        shutil.rmtree(work, ignore_errors=True)
    assert "[HISTORY] imported 2 new run(s), 0 already recorded" in said, said
    lines = said.splitlines()
    listed = [line.split()[2] for line in lines if re.match(r"[12] +2026-", line)]
    assert sorted(listed) == ["gpu01", "gpu02"], said  # history list, by each report's node
    assert any(line.startswith("gpu02  2 ") for line in lines), said  # history fleet
    assert lines[-1] == "server stopped", said
