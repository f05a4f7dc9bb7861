"""`history import` at a fleet's scale (store/importing.py): directories of reports, stored in
batches that each are one transaction, memory that does not grow with the reports' number, and an
import stopped part-way finished by running it again."""

from __future__ import annotations

import json
import tracemalloc
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gpuaccept.cli import app
from gpuaccept.errors import InputError
from gpuaccept.store import importing
from gpuaccept.store.history import History
from tests.run_reports import gpu_report

runner = CliRunner()


def _results(directory: Path, count: int, start: int = 0) -> list[Path]:
    """A job's results directory: `count` accept reports, as HTCondor jobs leave them."""
    directory.mkdir(parents=True, exist_ok=True)
    paths = []
    for i in range(start, start + count):
        path = directory / f"accept-{i:05d}.json"
        path.write_text(gpu_report(f"node{i:05d}", [800.0, 801.0], hours=i).model_dump_json())
        paths.append(path)
    return paths


def test_a_directory_is_its_json_reports_in_name_order(tmp_path: Path) -> None:
    results = tmp_path / "results"
    paths = _results(results, 3)
    (results / "notes.txt").write_text("not a report")
    (results / ".partial.json").write_text("{")  # a file a job is still writing: hidden
    (results / "sub").mkdir()
    (results / "odd.json").mkdir()  # a directory, whatever its name: not a report, not searched
    _results(results / "sub", 1, start=9)  # not searched: only the directory given
    alone = _results(tmp_path / "other", 1, start=7)
    assert importing.report_files([alone[0], results]).reports == [alone[0], *paths]


def test_a_directory_without_reports_is_refused(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    with pytest.raises(InputError, match=r"holds no \*\.json report; nothing imported"):
        importing.report_files([tmp_path / "empty"])


def test_reports_are_stored_in_batches_and_a_stop_is_finished_by_running_again(
    tmp_path: Path,
) -> None:
    paths = _results(tmp_path / "results", 7)
    db = tmp_path / "h.sqlite"
    importing.check_reports(paths)
    appended: list[int] = []
    with History.open(db) as store:
        original = store.append

        def counted(reports):  # type: ignore[no-untyped-def]
            batch = list(reports)
            appended.append(len(batch))
            return original(batch)

        store.append = counted  # type: ignore[method-assign]
        done = list(importing.store_reports(store, paths, batch=3))
    assert appended == [3, 3, 1]  # three transactions, never more than a batch in memory
    assert [d.run_id for d in done] == [1, 2, 3, 4, 5, 6, 7]
    assert all(d.new for d in done)
    # report 5 changes after the check: its batch (4-6) stores nothing, the first stays stored
    paths[4].write_text("{broken")
    other = tmp_path / "h2.sqlite"
    with History.open(other) as store, pytest.raises(InputError) as stopped:
        list(importing.store_reports(store, paths, batch=3))
    assert "accept-00004.json: not JSON" in str(stopped.value)
    assert "3 report(s) before it are stored, run the same import again" in str(stopped.value)
    with History.open(other, create=False) as store:
        assert len(store.list_runs(limit=100)) == 3
    # mended, and run again: the rest is stored, nothing twice
    paths[4].write_text(gpu_report("node00004", [800.0, 801.0], hours=4).model_dump_json())
    with History.open(other) as store:
        again = list(importing.store_reports(store, paths, batch=3))
    assert [d.new for d in again] == [False] * 3 + [True] * 4
    with History.open(other, create=False) as store:
        assert len(store.list_runs(limit=100)) == 7


def test_memory_does_not_grow_with_the_number_of_reports(tmp_path: Path) -> None:
    """The reports are not all held at once, nor two batches of them: storing 8 batches peaks
    where storing 1 does (holding the last batch while reading the next peaked at twice)."""
    db = tmp_path / "h.sqlite"

    def peak(paths: list[Path]) -> int:
        with History.open(db) as store:
            tracemalloc.start()
            try:
                for _ in importing.store_reports(store, paths, batch=20):
                    pass
                return tracemalloc.get_traced_memory()[1]
            finally:
                tracemalloc.stop()

    one = peak(_results(tmp_path / "one", 20))
    eight = peak(_results(tmp_path / "eight", 160, start=100))
    assert eight < 1.25 * one, (one, eight)


def test_the_cli_imports_a_directory_and_refuses_a_bad_report_in_it_before_storing(
    tmp_path: Path,
) -> None:
    results = tmp_path / "results"
    _results(results, 4)
    db = tmp_path / "h.sqlite"
    done = runner.invoke(app, ["history", "import", str(results), "--history", str(db)])
    assert done.exit_code == 0, done.output
    assert "imported 4 new run(s), 0 already recorded" in done.stdout
    assert f"{results / 'accept-00002.json'}: run 3" in done.stdout
    (results / "accept-00009.json").write_text('{"tool": "other"}')
    refused = runner.invoke(app, ["history", "import", str(results), "--history", str(db)])
    assert refused.exit_code == 2
    assert "accept-00009.json: not a gpuaccept report" in refused.stderr
    assert "Traceback" not in refused.output
    with History.open(db, create=False) as store:
        assert len(store.list_runs(limit=100)) == 4


def test_the_environment_captures_beside_a_jobs_reports_are_skipped_and_said(
    tmp_path: Path,
) -> None:
    """Every job leaves env.json beside report.json (tasks/job-lib.sh), remapped to
    results/accept-CLUSTER.PROC.env.json: the README's `history import results/*.json` named
    them too, and the import refused the whole directory ("not a gpuaccept report")."""
    from gpuaccept.record.environment import capture_environment

    results = tmp_path / "results"
    reports = _results(results, 2)
    captures = []
    for report in reports:
        capture = report.with_name(report.name.replace(".json", ".env.json"))
        capture.write_text(json.dumps(capture_environment()))
        captures.append(capture)
    db = tmp_path / "h.sqlite"
    every_file = sorted(map(str, results.iterdir()))  # what the shell's results/*.json gives
    for given in (every_file, [str(results)]):
        done = runner.invoke(app, ["history", "import", *given, "--history", str(db)])
        assert done.exit_code == 0, done.output
        assert "skipped 2 environment capture(s) (*.env.json)" in done.stdout
    assert "imported 0 new run(s), 2 already recorded" in done.stdout
    with History.open(db, create=False) as store:
        assert len(store.list_runs(limit=100)) == 2
    only = runner.invoke(app, ["history", "import", str(captures[0]), "--history", str(db)])
    assert only.exit_code == 2
    assert "no report among the 1 file(s) given: only environment captures" in only.stderr
