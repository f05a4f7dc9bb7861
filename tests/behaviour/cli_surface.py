"""Record the command line's surface, to prove a refactor of how options are declared changed it
not at all (or only where said): every command's --help, every option's parsed default, and what
the parser answers to a set of awkward values for each option (a word, a negative, zero, a
fraction, nan, inf, a large number, a device name, a model name), each beside what the command
requires ("x" for each required argument and option).

    python -m tests.behaviour.cli_surface record DIR   # before the change
    python -m tests.behaviour.cli_surface check DIR    # after it: exit 1, each difference shown

Nothing runs: each value is parsed with click's `make_context`, which converts and checks it
(ranges, choices, callbacks) without invoking the command. A choice's enum is compared by its
text, so the enum's own class name is not part of the surface.
"""

from __future__ import annotations

import difflib
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

_ROOT = Path(__file__).resolve().parents[2]
_AWKWARD = ("zz", "-5", "0", "1.5", "nan", "inf", "99999", "cpu", "fast")


def _walk(command: Any, path: list[str]) -> Iterator[tuple[list[str], Any]]:
    yield path, command
    for name, sub in getattr(command, "commands", {}).items():
        yield from _walk(sub, [*path, name])


def _plain(value: Any) -> Any:
    if isinstance(value, list):
        return [_plain(item) for item in value]
    return getattr(value, "value", value)


def _parse(command: Any, args: list[str]) -> str:
    import typer

    from gpuaccept.cli import _plain_range

    try:
        context = command.make_context("x", list(args), resilient_parsing=False)
    except typer.Exit as done:
        return f"exit {done.exit_code}"
    except Exception as error:  # the parser's refusal, as the edge words it
        said = error.format_message() if hasattr(error, "format_message") else str(error)
        return f"{type(error).__name__}: {_plain_range(error, said.replace('Value error, ', ''))}"
    return repr(sorted((name, repr(_plain(value))) for name, value in context.params.items()))


def surface() -> dict[str, str]:
    """File name -> text: `help_<command>` and `params_<command>` for every command."""
    os.environ["COLUMNS"] = "100"
    sys.path.insert(0, str(_ROOT / "src"))
    import typer
    from typer.testing import CliRunner

    from gpuaccept.cli import app

    runner, files = CliRunner(), {}
    for path, command in _walk(typer.main.get_command(app), []):
        name = "_".join(path or ["root"])
        shown = runner.invoke(app, [*path, "--help"], env={"COLUMNS": "100"})
        files[f"help_{name}"] = f"{shown.output}\n[exit {shown.exit_code}]\n"
        if getattr(command, "commands", None):
            continue
        # what the command requires, given, so each option's own answer is read (not the
        # missing argument's)
        given: list[str] = []
        for param in command.params:
            if param.required:
                given += ["x"] if param.param_type_name == "argument" else [param.opts[0], "x"]
        lines = [f"defaults {_parse(command, given)}"]
        for param in command.params:
            if param.param_type_name != "option" or param.name == "help":
                continue
            keys = ("name", "opts", "secondary_opts", "default", "multiple", "required")
            keys += ("hidden", "envvar", "show_default", "is_flag", "metavar", "count", "nargs")
            attrs = {key: _plain(getattr(param, key, None)) for key in keys}
            flag = param.opts[0]
            lines.append(f"{flag}: {attrs!r}")
            values = [[flag]] if getattr(param, "is_flag", False) else [[flag, v] for v in _AWKWARD]
            lines += [f"  {' '.join(a)} -> {_parse(command, [*given, *a])}" for a in values]
        files[f"params_{name}"] = "\n".join(lines) + "\n"
    return files


def main(argv: list[str]) -> int:
    if len(argv) != 2 or argv[0] not in ("record", "check"):
        print(__doc__, file=sys.stderr)
        return 2
    where, files = Path(argv[1]), surface()
    if argv[0] == "record":
        where.mkdir(parents=True, exist_ok=True)
        for name, text in files.items():
            (where / name).write_text(text)
        print(f"{len(files)} files recorded in {where}")
        return 0
    recorded = {path.name: path.read_text() for path in where.iterdir()}
    differ = sorted(set(recorded) ^ set(files))
    differ += sorted(name for name in set(recorded) & set(files) if recorded[name] != files[name])
    for name in differ:
        before = recorded.get(name, "").splitlines(keepends=True)
        after = files.get(name, "").splitlines(keepends=True)
        sys.stdout.writelines(difflib.unified_diff(before, after, f"recorded/{name}", name))
    print(f"{len(files)} files, {len(differ)} differ")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
