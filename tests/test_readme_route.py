"""The README's no-pixi route is the one CI takes, and its task table says what pixi.toml runs."""

from __future__ import annotations

import re
import shlex
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def _block_after(text: str, marker: str) -> list[str]:
    """The lines of the first fenced block after `marker`."""
    rest = text[text.index(marker) :]
    body = rest.split("```bash\n", 1)[1].split("```", 1)[0]
    return [line.split("#", 1)[0].strip() for line in body.splitlines() if line.strip()]


def _installs(lines: list[str]) -> list[list[str]]:
    found = []
    for line in lines:
        words = shlex.split(line)
        if "install" in words:
            found.append(words[words.index("install") + 1 :])
    return found


def test_the_development_route_installs_what_ci_installs() -> None:
    readme = (REPO / "README.md").read_text()
    documented = _installs(_block_after(readme, "**To develop it**"))
    ci = (REPO / ".ci/run").read_text()
    run = _installs([line for line in ci.splitlines() if '"${pip[@]}" install' in line])
    assert documented == run == [["torch==2.13.0"], ["-e", ".[test,lint]"]]
    # and the test commands are the ones CI runs: the everyday suite, then the long runs it
    # leaves out (pyproject's addopts), so that no test is dropped from CI
    block = _block_after(readme, "**To develop it**")
    assert "python -m pytest" in block
    assert "python -m pytest -m service" in block
    steps = [line for line in ci.splitlines() if "-m pytest" in line and not line.startswith("#")]
    assert steps == ['"$venv/bin/python" -m pytest', '"$venv/bin/python" -m pytest -m service']


def test_the_use_route_pins_the_same_torch_and_needs_no_test_tools() -> None:
    lines = _block_after((REPO / "README.md").read_text(), "## Without pixi")
    installs = _installs(lines)
    assert ["torch==2.13.0", "--index-url", "https://download.pytorch.org/whl/cpu"] in installs
    assert ["torch==2.13.0"] in installs
    assert ["-e", "."] in installs
    assert ["-e", ".[gpu]"] in installs
    assert not any(".[test" in word for words in installs for word in words)
    assert lines[0] == "python3 -m venv .venv && . .venv/bin/activate"


def test_the_task_table_says_what_each_pixi_task_runs() -> None:
    readme = (REPO / "README.md").read_text()
    with (REPO / "pixi.toml").open("rb") as handle:
        tasks = tomllib.load(handle)["tasks"]
    rows = dict(re.findall(r"^\| `pixi run (\w+)` \| `([^`]+)` \|", readme, flags=re.MULTILINE))
    assert {name: rows[name] for name in tasks} == {
        name: task["cmd"] for name, task in tasks.items()
    }
