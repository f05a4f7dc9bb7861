"""`gpuaccept history` and `gpuaccept report` at the CLI edge: output, exit codes, refusals."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families
from typer.testing import CliRunner

from gpuaccept.cli import app
from gpuaccept.store.history import History
from tests.run_reports import gpu_report, rejudged

runner = CliRunner()


def _write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def _reports(tmp_path: Path) -> list[Path]:
    reports = [gpu_report(f"node{i}", [800.0, 800.0], hours=i) for i in range(3)]
    reports.append(gpu_report("slow", [800.0, 690.0], hours=3))
    return [_write(tmp_path / f"r{i}.json", r.model_dump_json()) for i, r in enumerate(reports)]


def _one_error_line(result) -> str:  # type: ignore[no-untyped-def]
    assert "Traceback" not in result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    return lines[0]


def test_import_then_list_show_compare_trend_fleet(tmp_path: Path) -> None:
    db = tmp_path / "fleet.sqlite"
    files = _reports(tmp_path)
    result = runner.invoke(app, ["history", "import", *map(str, files), "--history", str(db)])
    assert result.exit_code == 0, result.output
    assert "imported 4 new run(s), 0 already recorded" in result.stdout
    again = runner.invoke(app, ["history", "import", str(files[0]), "--history", str(db)])
    assert "imported 0 new run(s), 1 already recorded" in again.stdout

    listed = runner.invoke(app, ["history", "list", "--history", str(db)])
    assert listed.exit_code == 0
    rows = listed.stdout.splitlines()[2:]
    assert [row.split()[2] for row in rows] == ["slow", "node2", "node1", "node0"]

    shown = runner.invoke(app, ["history", "show", "4", "--history", str(db)])
    assert "gpu1 matmul_bf16_tflops 690 TFLOPS" in shown.stdout
    as_json = runner.invoke(app, ["history", "show", "4", "--json", "--history", str(db)])
    assert json.loads(as_json.stdout)["environment"]["system"]["hostname"] == "slow"

    compared = runner.invoke(app, ["history", "compare", "1", "4", "--history", str(db)])
    line = next(x for x in compared.stdout.splitlines() if "matmul" in x and "gpu1" in x)
    assert "-13.8%" in line
    assert line.endswith("worse")

    trend = runner.invoke(
        app,
        ["history", "trend", "compute/matmul_bf16_tflops", "--node", "slow", "--history", str(db)],
    )
    assert trend.exit_code == 0
    assert len(trend.stdout.splitlines()) == 2 + 2  # header, rule, two GPUs

    fleet = runner.invoke(app, ["history", "fleet", "--history", str(db)])
    assert fleet.exit_code == 1  # a lagging GPU fails the fleet view, for cron and CI
    outliers = fleet.stdout.split("fleet median:")[1]
    assert "slow" in outliers
    assert "gpu1" in outliers
    assert "-13.8%" in outliers
    view = json.loads(
        runner.invoke(app, ["history", "fleet", "--json", "--history", str(db)]).stdout
    )
    assert [(o["node"], o["device_index"]) for o in view["outliers"]] == [("slow", 1)]
    relaxed = runner.invoke(app, ["history", "fleet", "--tolerance", "20", "--history", str(db)])
    assert relaxed.exit_code == 0


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        ("{not json", "not JSON"),
        ('{"tool": "other"}', "not a gpuaccept report"),
        ('{"tool": "gpuaccept", "schema_version": 99}', "schema version 99"),
        ('{"tool": "gpuaccept", "schema_version": 1, "command": 3}', "invalid at"),
        ("", "not JSON"),
    ],
)
def test_import_of_a_malformed_report_names_it_and_imports_nothing(
    tmp_path: Path, content: str, reason: str
) -> None:
    db = tmp_path / "h.sqlite"
    good = _reports(tmp_path)[0]
    bad = _write(tmp_path / "bad report.json", content)
    result = runner.invoke(app, ["history", "import", str(good), str(bad), "--history", str(db)])
    assert result.exit_code == 2
    line = _one_error_line(result)
    assert str(bad) in line
    assert reason in line
    assert not db.exists()  # validated before the database was opened


def test_import_of_a_missing_file_exits_2(tmp_path: Path) -> None:
    result = runner.invoke(
        app, ["history", "import", str(tmp_path / "gone.json"), "--history", str(tmp_path / "h")]
    )
    assert result.exit_code == 2
    assert "gone.json: cannot read" in _one_error_line(result)


def test_reading_a_truncated_history_exits_2_and_leaves_it(tmp_path: Path) -> None:
    db = tmp_path / "h.sqlite"
    with History.open(db) as history:
        history.append([(gpu_report(f"n{i}", [800.0]), "run") for i in range(40)])
    db.write_bytes(db.read_bytes()[:5000])
    digest = hashlib.sha256(db.read_bytes()).hexdigest()
    for args in (["history", "list"], ["history", "import", str(_reports(tmp_path)[0])]):
        result = runner.invoke(app, [*args, "--history", str(db)])
        assert result.exit_code == 2
        assert "truncated" in _one_error_line(result)
    assert hashlib.sha256(db.read_bytes()).hexdigest() == digest


def test_accept_refuses_a_corrupt_history_before_running(tmp_path: Path) -> None:
    db = _write(tmp_path / "h.sqlite", "not a database at all" * 10)
    result = runner.invoke(
        app, ["accept", "--level", "quick", "--device", "cpu", "--history", str(db)]
    )
    assert result.exit_code == 2
    assert "not an SQLite database" in _one_error_line(result)
    assert "[RESULT]" not in result.stdout  # nothing ran


def test_accept_records_into_history_and_no_history_does_not(tmp_path: Path) -> None:
    db = tmp_path / "h.sqlite"
    args = ["accept", "--level", "quick", "--device", "cpu", "--only", "stack"]
    result = runner.invoke(app, [*args, "--history", str(db)])
    assert result.exit_code == 0, result.output
    assert f"[HISTORY] run 1 recorded in {db}" in result.stdout
    runner.invoke(app, [*args, "--history", str(db), "--no-history"])
    with History.open(db, create=False) as history:
        assert history.count() == 1
        assert history.report(1).checks[0].name == "stack"


def test_bad_run_ids_and_unknown_metrics(tmp_path: Path) -> None:
    db = tmp_path / "h.sqlite"
    runner.invoke(app, ["history", "import", str(_reports(tmp_path)[0]), "--history", str(db)])
    for args, message in (
        (["history", "show", "7"], "no run 7"),
        (["history", "show", "abc"], "run id must be a number"),
        (["history", "show", "\u00b2"], "run id must be a number"),
        (["history", "show", "1234567890123456789012345"], "run id must be a number"),
        (["history", "trend", "nonsense"], "no figure named 'nonsense'"),
        (["report", "9", "--markdown", "-"], "no run 9"),
    ):
        result = runner.invoke(app, [*args, "--history", str(db)])
        assert result.exit_code == 2, (args, result.output)
        assert message in _one_error_line(result)
    missing = str(tmp_path / "none.sqlite")
    result = runner.invoke(app, ["history", "show", "1", "--history", missing])
    assert result.exit_code == 2
    assert "no such database" in _one_error_line(result)
    # an empty history is an empty list, not an error (a new machine has none yet)
    result = runner.invoke(app, ["history", "list", "--history", missing])
    assert result.exit_code == 0
    assert "no runs recorded" in result.output


def test_report_from_run_id_and_from_file(tmp_path: Path) -> None:
    db = tmp_path / "h.sqlite"
    files = _reports(tmp_path)
    runner.invoke(app, ["history", "import", *map(str, files), "--history", str(db)])
    html, prom = tmp_path / "out" / "r.html", tmp_path / "out" / "r.prom"
    result = runner.invoke(
        app, ["report", "4", "--html", str(html), "--prometheus", str(prom), "--history", str(db)]
    )
    assert result.exit_code == 0, result.output
    # run 4 is node "slow"'s first: no trend to draw, and the page says so
    assert html.read_text().count("data:image/png;base64,") == 0
    assert "First run of its kind on this node" in html.read_text()
    later = _write(
        tmp_path / "later.json", gpu_report("slow", [800.0, 700.0], hours=9).model_dump_json()
    )
    runner.invoke(app, ["history", "import", str(later), "--history", str(db)])
    again = runner.invoke(app, ["report", "5", "--html", str(html), "--history", str(db)])
    assert again.exit_code == 0, again.output
    assert html.read_text().count("data:image/png;base64,") == 1  # matmul, its two runs
    names = {f.name for f in text_string_to_metric_families(prom.read_text())}
    assert "gpuaccept_measurement_value" in names
    markdown = runner.invoke(app, ["report", str(files[3]), "--markdown", "-"])
    assert markdown.exit_code == 0
    assert markdown.stdout.startswith("## gpuaccept accept --level standard (GPU): PASS")
    # no output named: the same summary on stdout, nothing written
    plain = runner.invoke(app, ["report", str(files[3])])
    assert (plain.exit_code, plain.stdout) == (0, markdown.stdout)


def test_report_refusals(tmp_path: Path) -> None:
    good = _reports(tmp_path)[0]
    for args, message in (
        (["report", str(good), "--html", str(tmp_path)], "is a directory"),
        (["report", str(_write(tmp_path / "x.json", "[]")), "--markdown", "-"], "not a gpuaccept"),
        (["report", str(tmp_path / "missing.json"), "--markdown", "-"], "cannot read"),
    ):
        result = runner.invoke(app, args)
        assert result.exit_code == 2, (args, result.output)
        assert message in _one_error_line(result)


def test_compare_of_runs_at_different_levels_judges_nothing(tmp_path: Path) -> None:
    from tests.run_reports import gpu_report

    db = tmp_path / "h.sqlite"
    quick = rejudged(gpu_report("n1", [800.0]), level="quick")
    standard = gpu_report("n1", [100.0], hours=1)
    paths = []
    for name, report in (("q.json", quick), ("s.json", standard)):
        (tmp_path / name).write_text(report.model_dump_json())
        paths.append(str(tmp_path / name))
    runner.invoke(app, ["history", "import", *paths, "--history", str(db)])
    result = runner.invoke(app, ["history", "compare", "1", "2", "--history", str(db)])
    assert result.exit_code == 0, result.output
    assert "[WARN]" in result.output
    assert "--level quick" in result.output
    assert "worse" not in result.output  # -88% between a quick and a standard run is no verdict
    header = next(line for line in result.output.splitlines() if line.startswith("metric"))
    assert header.split()[-1] == "verdict"  # every column has a heading


def test_trend_warns_when_its_figures_come_from_different_kinds_of_run(tmp_path: Path) -> None:
    db = tmp_path / "h.sqlite"
    quick = rejudged(gpu_report("n1", [400.0], hours=1), level="quick")
    bench = gpu_report("n1", [900.0], hours=2, command="bench")
    files = [
        _write(tmp_path / f"{i}.json", r.model_dump_json())
        for i, r in enumerate([gpu_report("n1", [800.0]), quick, bench])
    ]
    runner.invoke(app, ["history", "import", *map(str, files), "--history", str(db)])
    trend = ["history", "trend", "compute/matmul_bf16_tflops", "--history", str(db)]
    mixed = runner.invoke(app, trend)
    assert mixed.exit_code == 0
    assert mixed.stdout.startswith(
        "[WARN] these figures come from 3 kinds of run (accept quick (cuda); accept standard "
        "(cuda); bench standard (cuda))"
    )
    alike = runner.invoke(app, [*trend, "--command", "accept", "--level", "standard"])
    assert "[WARN]" not in alike.stdout
    assert len(alike.stdout.splitlines()) == 3  # header, rule, one run
    assert "accept standard (cuda)" in alike.stdout
    nothing = runner.invoke(app, [*trend, "--level", "full"])
    assert nothing.exit_code == 2
    assert "at level full" in _one_error_line(nothing)


def test_list_compare_and_trend_speak_json(tmp_path: Path) -> None:
    db = tmp_path / "h.sqlite"
    files = _reports(tmp_path)
    runner.invoke(app, ["history", "import", *map(str, files), "--history", str(db)])
    listed = json.loads(
        runner.invoke(app, ["history", "list", "--json", "--history", str(db)]).stdout
    )
    assert [(r["run"], r["node"], r["label"]) for r in listed][:2] == [
        (4, "slow", "PASS"),
        (3, "node2", "PASS"),
    ]
    assert listed[0]["verdict"]["outcome"] == "pass"
    compared = json.loads(
        runner.invoke(app, ["history", "compare", "1", "4", "--json", "--history", str(db)]).stdout
    )
    [gpu1] = [
        f
        for f in compared["figures"]
        if f["metric"] == "compute/matmul_bf16_tflops" and f["device"] == "gpu1"
    ]
    assert (gpu1["value_a"], gpu1["value_b"], gpu1["worse"]) == (800.0, 690.0, True)
    assert compared["judged"] is True
    trend = json.loads(
        runner.invoke(
            app,
            ["history", "trend", "compute/matmul_bf16_tflops", "--json", "--history", str(db)],
        ).stdout
    )
    assert trend["kinds"] == ["accept standard (cuda)"]
    assert len(trend["points"]) == 8
    empty = runner.invoke(
        app, ["history", "list", "--json", "--history", str(tmp_path / "none.sqlite")]
    )
    assert json.loads(empty.stdout) == []


def test_a_history_uri_of_another_kind_is_refused_and_creates_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`sqlite:///h.sqlite` was a relative path: accept recorded under ./sqlite:/ and `history
    list` said the history was empty, exit 0."""
    monkeypatch.chdir(tmp_path)
    for args in (
        ["accept", "--level", "quick", "--device", "cpu", "--only", "stack"],
        ["history", "list"],
    ):
        result = runner.invoke(app, [*args, "--history", "sqlite:///h.sqlite"])
        assert result.exit_code == 2, result.output
        assert "not a postgresql:// URI" in _one_error_line(result)
        assert "[RESULT]" not in result.stdout
    monkeypatch.setenv("GPUACCEPT_HISTORY", "sqlite:///h.sqlite")
    assert runner.invoke(app, ["history", "list"]).exit_code == 2
    assert list(tmp_path.iterdir()) == []
