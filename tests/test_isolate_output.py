"""What a node's log says under torchrun with `accept --isolate` (issue #53 §5): each check
once, with its `[RUN]` line before it, and the node's table of checks before its verdict, every
line under the node's name, as a node's own run says them (docs/try-it-on-one-machine.md)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.test_multinode import run_nodes

# processes across stand-in nodes: CI runs it in its own step (pytest -m service)
pytestmark = [pytest.mark.service, pytest.mark.slow]


def test_each_node_says_each_check_once_what_runs_and_its_table(tmp_path: Path) -> None:
    names = ["node-a", "node-b"]
    args = ["--only", "collectives", "--isolate", "--min-busbw", "0.02"]
    results = run_nodes(tmp_path, names, 1, args)
    for name, (code, output, report) in results.items():
        assert code == 0, output
        lines = output.splitlines()
        assert [c.name for c in report.checks] == ["collectives", "isolation"]
        for check in ("collectives", "isolation"):
            said = [
                i
                for i, line in enumerate(lines)
                if re.match(rf"\[{name}\] \[\w+\] \w+ {check} ", line)
            ]
            assert len(said) == 1, f"{check} said {len(said)} times:\n{output}"
            running = lines.index(f"[{name}] [RUN] {check}")
            assert running < said[0], output
        table = [line for line in lines if line.startswith(f"[{name}] |")]
        assert any(re.search(r"\| isolation +\| pass +\|", line) for line in table), output
        assert any("collectives" in line for line in table), output
        result = next(i for i, line in enumerate(lines) if line.startswith(f"[{name}] [RESULT] "))
        assert table, output
        assert all(lines.index(line) < result for line in table), output
        other = next(n for n in names if n != name)
        assert f"[{other}]" not in output, "a node's log holds only its own lines"
