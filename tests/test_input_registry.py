"""One attack suite over every input (issue #30 §9): every path option of the CLI and every
GPUACCEPT_* variable the code reads is registered (`tests/input_registry.py`), and every
registered input with a command line is refused in one line, exit 2, for each hostile form."""

from __future__ import annotations

import inspect
import os
import re
import signal
import typing
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from gpuaccept.cli import app
from tests.input_registry import REGISTRY, Input

ROOT = Path(__file__).resolve().parent.parent


def _commands(typer_app: Any, prefix: list[str]) -> Iterator[tuple[str, Any]]:
    for info in typer_app.registered_commands:
        name = info.name or info.callback.__name__.replace("_", "-")
        yield " ".join([*prefix, name]), info.callback
    for group in typer_app.registered_groups:
        yield from _commands(group.typer_instance, [*prefix, group.name])


def _path_inputs() -> set[tuple[str, str]]:
    """(command, option or ARGUMENT) for every parameter typed as a path."""
    found = set()
    for command, callback in _commands(app, []):
        hints = typing.get_type_hints(callback)
        for name, parameter in inspect.signature(callback).parameters.items():
            # --history is a file or a postgresql:// URI (a str), and a path all the same
            if "Path" not in str(hints.get(name)) and name != "history":
                continue
            decls = getattr(parameter.default, "param_decls", None) or ()
            long = [d for d in decls if d.startswith("--")]
            found.add((command, long[0] if long else name.upper()))
    return found


def _environment_inputs() -> set[str]:
    """Every GPUACCEPT_* name the package and the job scripts read."""
    files = [*(ROOT / "src" / "gpuaccept").rglob("*.py")]
    for folder in ("tasks", "slurm", "htcondor", "k8s", "containers"):
        files += [p for p in (ROOT / folder).rglob("*") if p.is_file()]
    text = "\n".join(p.read_text(errors="replace") for p in files)
    return set(re.findall(r"\bGPUACCEPT_[A-Z0-9_]+\b", text))


def test_every_path_option_and_environment_variable_is_registered() -> None:
    registered = {entry.key for entry in REGISTRY}
    unregistered = sorted(_path_inputs() - registered)
    assert not unregistered, f"register these inputs in tests/input_registry.py: {unregistered}"
    names = {entry.name for entry in REGISTRY if entry.role == "env"}
    assert _environment_inputs() - names == set(), "register the new environment variables"
    stale = {key for key in registered if key[1].startswith("--")}
    stale -= _path_inputs() | {(e.command, e.name) for e in REGISTRY if e.role == "env"}
    assert not stale, f"registered inputs no command has any more: {sorted(stale)}"


def test_every_entry_is_attacked_or_names_where_it_is_or_what_is_missing() -> None:
    for entry in REGISTRY:
        assert entry.argv or entry.covered_by or entry.gap, entry.key
        assert not (entry.argv and not entry.forms), entry.key
        for where in entry.covered_by:
            path, _, test = where.partition("::")
            assert (ROOT / path).exists(), where
            if test:
                assert f"def {test}(" in (ROOT / path).read_text(), where


def _make(form: str, scratch: Path) -> Path:
    """The hostile form at a fresh path."""
    path = scratch / f"hostile-{form}"
    if form == "empty":
        path.write_bytes(b"")
    elif form in ("directory", "no-sys"):
        path.mkdir()
    elif form == "fifo":
        os.mkfifo(path)
    elif form == "dev-zero":
        path.symlink_to("/dev/zero")
    elif form == "symlink-loop":
        path.symlink_to(path.name)
    elif form == "garbage":
        path.write_bytes(bytes(range(256)) * 16)
    elif form == "huge":
        with path.open("wb") as stream:
            stream.truncate(2 * 1024**3)  # sparse: a reader without a cap reads two gigabytes
    elif form == "under-a-file":
        path.write_text("a file")
        path = path / "out"
    elif form == "a-file":
        path.write_text("a file")
    return path


CASES = [
    pytest.param(entry, form, id=f"{entry.command} {entry.name} {form}")
    for entry in REGISTRY
    if entry.argv is not None
    for form in entry.forms
]


@pytest.mark.parametrize(("entry", "form"), CASES)
def test_each_hostile_form_is_refused_in_one_line(
    entry: Input, form: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert entry.argv is not None
    hostile = _make(form, tmp_path)
    if entry.role == "env":
        monkeypatch.setenv(entry.name, str(hostile))
    argv = entry.argv(str(hostile), tmp_path)

    def hung(signum: int, frame: object) -> None:
        raise TimeoutError(f"{entry.key} {form}: still reading after 60 s")

    previous = signal.signal(signal.SIGALRM, hung)
    signal.alarm(60)
    try:
        result = CliRunner().invoke(app, argv)
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
    assert result.exit_code == 2, f"{argv}: {result.output[-600:]}"
    assert "Traceback" not in result.output
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith(f"gpuaccept {entry.command}: error: "), line


def test_forms_accepted_by_design_say_why() -> None:
    for entry in REGISTRY:
        assert not set(entry.allowed) & set(entry.forms), entry.key
        assert all(why for why in entry.allowed.values()), entry.key
