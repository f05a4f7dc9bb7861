"""The CLI's shape: version, help, exit codes, and no torch import on the fast paths."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gpuaccept import __version__
from gpuaccept.cli import app

runner = CliRunner()

COMMAND_GROUPS = ["accept", "bench", "train", "env", "history", "report"]


def test_version_prints_package_version() -> None:
    result = runner.invoke(app, ["--version"])
    assert result.exit_code == 0
    assert result.stdout.strip() == f"gpuaccept {__version__}"


def test_help_lists_every_command_group() -> None:
    result = runner.invoke(app, ["--help"])
    assert result.exit_code == 0
    for group in COMMAND_GROUPS:
        assert group in result.stdout


@pytest.mark.parametrize("group", COMMAND_GROUPS)
def test_each_group_has_help(group: str) -> None:
    result = runner.invoke(app, [group, "--help"])
    assert result.exit_code == 0, result.output


def _command_paths() -> list[list[str]]:
    import typer.main

    paths: list[list[str]] = [[]]
    root = typer.main.get_command(app)
    for name, command in getattr(root, "commands", {}).items():
        paths.append([name])
        paths.extend([name, sub] for sub in getattr(command, "commands", {}))
    return paths


def test_help_reads_plainly_everywhere() -> None:
    """No `<bool>`, `<str>` or `<list[str]>` after a flag, whichever Typer renders the help; the
    choices are shown, and the root help names the checks and the exit codes."""
    for path in _command_paths():
        result = runner.invoke(app, [*path, "--help"])
        assert result.exit_code == 0, (path, result.output)
        assert not re.search(r"<[a-z][^>]*>", result.output), (path, result.output)
    accept_help = runner.invoke(app, ["accept", "--help"]).output
    assert "[quick|standard|full]" in accept_help
    assert "[auto|cuda|cpu]" in accept_help
    assert "[fast|lenet]" in runner.invoke(app, ["train", "mnist", "--help"]).output
    root = runner.invoke(app, ["--help"]).output
    for fragment in ("inventory", "collectives", "Exit codes", "130"):
        assert fragment in root


def test_unknown_command_is_a_usage_error() -> None:
    result = runner.invoke(app, ["no-such-command"])
    assert result.exit_code == 2


def _modules_loaded(argv: list[str], modules: tuple[str, ...]) -> list[str]:
    """Which of `modules` the CLI loads for `argv`, in a fresh interpreter (other tests in this
    process may already have imported them)."""
    probe = (
        "import sys\n"
        "from gpuaccept.cli import app\n"
        "try:\n"
        f"    app({argv!r}, prog_name='gpuaccept')\n"
        "except SystemExit as stop:\n"
        "    assert stop.code in (0, None), stop.code\n"
        f"print('loaded:' + ','.join(m for m in {modules!r} if m in sys.modules))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    said = done.stdout.strip().splitlines()[-1].removeprefix("loaded:")
    return [m for m in said.split(",") if m]


@pytest.mark.parametrize(
    "argv",
    [["--help"], ["--version"], *[[group, "--help"] for group in COMMAND_GROUPS]],
)
def test_fast_paths_do_not_import_torch(argv: list[str]) -> None:
    assert _modules_loaded(argv, ("torch", "numpy")) == []


@pytest.mark.parametrize("argv", [["--help"], ["--version"]])
def test_the_root_paths_do_not_import_the_report_models(argv: list[str]) -> None:
    """`gpuaccept --help` and `--version` start without pydantic (about 0.3 s of a 0.5 s
    start when the burn-in's CLI imported its plan's models at start-up)."""
    assert _modules_loaded(argv, ("pydantic",)) == []


def test_python_dash_m_runs_the_same_cli() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "gpuaccept", "--version"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0
    assert done.stdout.strip() == f"gpuaccept {__version__}"


def _gpuaccept(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gpuaccept", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )


@pytest.mark.parametrize(
    ("shell", "marker"),
    [
        ("bash", "complete -o default"),
        ("zsh", "#compdef gpuaccept"),
        ("fish", "complete --command gpuaccept"),
    ],
)
def test_the_shell_named_is_the_shell_served(shell: str, marker: str) -> None:
    """Issue #30 §6: `--show-completion zsh` printed bash's script."""
    import os

    done = _gpuaccept("--show-completion", shell, env=dict(os.environ))
    assert done.returncode == 0, done.stderr
    assert marker in done.stdout


@pytest.mark.parametrize(
    ("args", "home", "says"),
    [
        (
            ["--show-completion", "tcsh"],
            "dir",
            "--show-completion 'tcsh': completion is served for",
        ),
        (["--install-completion", "tcsh"], "dir", "--install-completion 'tcsh': completion is"),
        (["--install-completion", "bash"], "file", "is not a directory"),
        (["--install-completion", "bash"], None, "HOME is not set"),
    ],
)
def test_completion_that_cannot_be_served_is_one_line_and_exit_2(
    tmp_path: Path, args: list[str], home: str | None, says: str
) -> None:
    import os

    env = {k: v for k, v in os.environ.items() if k != "HOME"}
    if home == "dir":
        env["HOME"] = str(tmp_path)
    elif home == "file":
        (tmp_path / "home").write_text("")
        env["HOME"] = str(tmp_path / "home")
    done = _gpuaccept(*args, env=env)
    assert done.returncode == 2, done.stdout + done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith("gpuaccept: error: ")
    assert says in line
    assert list(tmp_path.iterdir()) in ([], [tmp_path / "home"])  # nothing installed


def test_installed_completion_completes(tmp_path: Path) -> None:
    import os

    env = dict(os.environ) | {"HOME": str(tmp_path)}
    installed = _gpuaccept("--install-completion", "bash", env=env)
    assert installed.returncode == 0, installed.stderr
    assert (tmp_path / ".bash_completions" / "gpuaccept.sh").is_file()
    words = {
        "_GPUACCEPT_COMPLETE": "complete_bash",
        "COMP_WORDS": "gpuaccept acc",
        "COMP_CWORD": "1",
    }
    completed = _gpuaccept(env=env | words)
    assert completed.stdout.split() == ["accept"]


def test_listing_runs_reads_their_verdicts_without_the_report_models(tmp_path: Path) -> None:
    """`history list` lists from the verdicts stored beside the reports: the report models'
    import (results.py, actions.py) was a tenth of its start-up (benchmarks/history_scale.py,
    issue #33 §2: under 100 ms)."""
    from gpuaccept.store.history import History
    from tests.run_reports import gpu_report

    path = tmp_path / "h.sqlite"
    with History.open(path) as history:
        history.append([(gpu_report("node-a", [800.0]), "test")])
    argv = ["history", "list", "--history", str(path), "--node", "node-a"]
    assert _modules_loaded(argv, ("gpuaccept.results", "gpuaccept.actions")) == []
    listed = runner.invoke(app, argv)
    assert listed.exit_code == 0
    assert "node-a" in listed.output


def test_a_signal_python_wrapped_is_still_one_line_and_its_exit_code(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A signal raised inside a class being built (a lazy import) comes out as a RuntimeError: it
    traced back with exit 1; the edge finds the signal behind it."""
    import signal

    from gpuaccept.commands import env
    from gpuaccept.errors import Interrupted

    def stopped(*_: object) -> None:
        raise RuntimeError("Error calling __set_name__") from Interrupted(signal.SIGTERM)

    monkeypatch.setattr(env, "run", stopped)
    result = CliRunner().invoke(app, ["env"])
    assert result.exit_code == 143
    assert result.stderr.strip() == "gpuaccept env: error: interrupted by SIGTERM"
    # a RuntimeError with no signal behind it is not turned into one
    monkeypatch.setattr(env, "run", lambda *_: (_ for _ in ()).throw(RuntimeError("a bug")))
    assert isinstance(CliRunner().invoke(app, ["env"]).exception, RuntimeError)
