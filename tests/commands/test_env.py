"""`env` called as a library (gpuaccept.commands.env.run), without Typer: the summary said, the
JSON said or written to a file, an --output that cannot be written refused before capturing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpuaccept.commands.env import EnvRequest, run
from gpuaccept.commands.output import Collected
from gpuaccept.errors import InputError


def test_output_writes_the_capture_and_says_where(tmp_path: Path) -> None:
    out = Collected()
    result = run(EnvRequest(output=tmp_path / "env.json"), out)
    assert result.exit_code == 0
    assert json.loads((tmp_path / "env.json").read_text()) == result.capture
    assert out.lines == [("out", f"[ENV] {tmp_path / 'env.json'}")]


def test_the_summary_and_the_json_say_the_same_capture() -> None:
    summary, as_json = Collected(), Collected()
    result = run(EnvRequest(), summary)
    run(EnvRequest(as_json=True), as_json)
    assert summary.text().startswith("host      ")
    assert f"gpus      {len(result.capture.get('gpus') or [])}\n" in summary.text()
    assert json.loads(as_json.text())["python"] == result.capture["python"]


def test_an_output_that_is_a_directory_is_refused_before_the_capture(tmp_path: Path) -> None:
    out = Collected()
    with pytest.raises(InputError, match=r"--output .*: is a directory, expected a file path"):
        run(EnvRequest(output=tmp_path), out)
    assert out.lines == []
