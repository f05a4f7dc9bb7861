"""A damaged row is said in one line with what is wrong (issue #51's operator review): pydantic's
own text is a count of errors, one per line, and a URL; the history says the first fault and
where it is, as every other input error does."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from typer.testing import CliRunner

from gpuaccept.cli import app
from gpuaccept.store.history import History
from tests.run_reports import gpu_report


def _history_with_one_run(tmp_path: Path) -> Path:
    path = tmp_path / "h.sqlite"
    with History.open(path) as history:
        history.append([(gpu_report("n1", [100.0]), "run")])
    return path


def test_a_damaged_stored_verdict_is_one_line_naming_the_fault(tmp_path: Path) -> None:
    path = _history_with_one_run(tmp_path)
    with sqlite3.connect(path) as db:
        db.execute("UPDATE runs SET verdict_json = '{\"outcome\": '")
    done = CliRunner().invoke(app, ["history", "list", "--history", str(path)])
    assert done.exit_code == 2
    [line] = done.stderr.splitlines()
    assert line.startswith(f"gpuaccept history list: error: history {path}: run 1's stored ")
    assert "verdict is damaged (top level: Invalid JSON: EOF while parsing" in line
    assert line.endswith("; restore the database from a copy")


def test_a_damaged_stored_report_says_its_first_fault(tmp_path: Path) -> None:
    path = _history_with_one_run(tmp_path)
    with sqlite3.connect(path) as db:
        db.execute("UPDATE runs SET report_json = replace(report_json, '\"level\"', '\"lvl\"')")
    done = CliRunner().invoke(app, ["history", "show", "1", "--history", str(path)])
    assert done.exit_code == 2
    [line] = done.stderr.splitlines()
    assert "run 1's stored report is damaged (level: Field required)" in line, line
