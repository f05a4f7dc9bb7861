"""`history` called as a library (gpuaccept.commands.history.*), without Typer: reports imported
and listed, a run shown, two compared, a figure's trend, a GPU's life, the fleet's exit code when
a GPU lags or a node fails, the spool pushed; bad requests refused in one line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpuaccept.commands.history import compare, fleet, gpu, import_reports, list_runs, push, show
from gpuaccept.commands.history import trend as trending
from gpuaccept.commands.output import Collected
from gpuaccept.errors import InputError
from gpuaccept.store.spool import pending, spool_report
from tests.run_reports import gpu_report, history_with, rejudged, soft_failure


def _fleet(path: Path) -> str:
    """Three nodes alike and one whose gpu1 is 13.8% slower (runs 1-4, 'slow' newest)."""
    reports = [gpu_report(f"node{i}", [800.0, 800.0], hours=i) for i in range(3)]
    reports.append(gpu_report("slow", [800.0, 690.0], hours=3))
    return str(history_with(path, *reports))


def _files(directory: Path) -> list[Path]:
    directory.mkdir()
    paths = []
    for i, report in enumerate([gpu_report("n1", [800.0]), gpu_report("n2", [790.0], hours=1)]):
        paths.append(directory / f"r{i}.json")
        paths[-1].write_text(report.model_dump_json())
    (directory / "n1.env.json").write_text("{}")
    return paths


def test_import_stores_each_report_once_and_says_so(tmp_path: Path) -> None:
    db = str(tmp_path / "h.sqlite")
    files = _files(tmp_path / "reports")
    out = Collected()
    result = import_reports.run(
        import_reports.ImportRequest(reports=[tmp_path / "reports"], history=db), out
    )
    assert (result.new, result.again, result.exit_code) == (2, 0, 0)
    assert out.text().splitlines() == [
        "[HISTORY] skipped 1 environment capture(s) (*.env.json): not runs; each report holds "
        "its own",
        f"[HISTORY] {files[0]}: run 1",
        f"[HISTORY] {files[1]}: run 2",
        "[HISTORY] imported 2 new run(s), 0 already recorded",
    ]
    again = Collected()
    second = import_reports.run(import_reports.ImportRequest(reports=[files[1]], history=db), again)
    assert (second.new, second.again) == (0, 1)
    assert f"[HISTORY] {files[1]}: run 2 (already recorded)" in again.text()


def test_a_malformed_report_imports_nothing(tmp_path: Path) -> None:
    db = tmp_path / "h.sqlite"
    [good, _] = _files(tmp_path / "reports")
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(InputError, match="not JSON"):
        import_reports.run(
            import_reports.ImportRequest(reports=[good, bad], history=str(db)), Collected()
        )
    assert not db.exists()  # checked before the history was opened


def test_list_returns_the_rows_newest_first(tmp_path: Path) -> None:
    db = _fleet(tmp_path / "h.sqlite")
    out = Collected()
    result = list_runs.run(list_runs.ListRequest(history=db, limit=3), out)
    assert [(run.id, run.hostname) for run in result.runs] == [
        (4, "slow"),
        (3, "node2"),
        (2, "node1"),
    ]
    lines = out.text().splitlines()
    assert lines[0].split() == [
        "run",
        "started",
        "(UTC)",
        "node",
        "command",
        "level",
        "mode",
        "result",
        "seconds",
    ]
    assert lines[2].split()[:3] == ["4", "2026-11-01T11:00:00", "slow"]
    as_json = Collected()
    list_runs.run(list_runs.ListRequest(history=db, node="node0", as_json=True), as_json)
    assert [(r["run"], r["label"]) for r in json.loads(as_json.text())] == [(1, "PASS")]


def test_list_of_a_history_not_made_yet_is_empty(tmp_path: Path) -> None:
    missing = tmp_path / "none.sqlite"
    out = Collected()
    result = list_runs.run(list_runs.ListRequest(history=str(missing)), out)
    assert (result.runs, result.exit_code) == ([], 0)
    assert out.text() == f"no runs recorded (no history at {missing} yet)\n"
    assert not missing.exists()


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: list_runs.ListRequest(command="train"), "--command must be one of accept"),
        (lambda: trending.TrendRequest(metric="x", command="x"), "--command must be one of accept"),
        (lambda: gpu.GpuRequest(uuid="0"), "'0' is not a GPU UUID"),
        (lambda: fleet.FleetRequest(judging=fleet.FleetJudging(mtbi_days=0)), "--mtbi-days 0"),
    ],
)
def test_bad_requests_are_refused_before_any_work(make: object, message: str) -> None:
    with pytest.raises(InputError, match=message):
        make()  # type: ignore[operator]


def test_show_says_a_runs_checks_and_figures(tmp_path: Path) -> None:
    db = _fleet(tmp_path / "h.sqlite")
    out = Collected()
    result = show.run(show.ShowRequest(run="4", history=db), out)
    assert result.report.environment["system"]["hostname"] == "slow"
    said = out.text()
    assert said.startswith("run 4: gpuaccept accept --level standard (cuda) on slow, started ")
    assert "    gpu1 matmul_bf16_tflops 690 TFLOPS" in said
    for text, error in (("abc", "run id must be a number"), ("9", "no run 9")):
        with pytest.raises(InputError, match=error):
            show.run(show.ShowRequest(run=text, history=db), Collected())


def test_compare_judges_runs_of_one_kind_only(tmp_path: Path) -> None:
    quick = rejudged(gpu_report("n1", [800.0]), level="quick")
    history_with(tmp_path / "h.sqlite", gpu_report("n1", [800.0]), quick)  # runs 1 and 2
    db = _fleet(tmp_path / "h.sqlite")  # runs 3 to 6, the slow GPU's run 6
    out = Collected()
    alike = compare.run(compare.CompareRequest(run_a="3", run_b="6", history=db), out)
    assert alike.judged
    [gpu1] = [
        f for f in alike.figures if f.metric.endswith("matmul_bf16_tflops") and f.device == "gpu1"
    ]
    assert (gpu1.value_a, gpu1.value_b, gpu1.worse) == (800.0, 690.0, True)
    row = next(line for line in out.text().splitlines() if "matmul" in line and "gpu1" in line)
    assert row.split()[-2:] == ["-13.8%", "worse"]
    unlike = Collected()
    assert not compare.run(compare.CompareRequest(run_a="2", run_b="6", history=db), unlike).judged
    assert unlike.text().startswith("[WARN] run 2 is `gpuaccept accept --level quick")
    assert "worse" not in unlike.text()


def test_trend_follows_a_figure_and_refuses_one_never_recorded(tmp_path: Path) -> None:
    db = _fleet(tmp_path / "h.sqlite")
    out = Collected()
    result = trending.run(
        trending.TrendRequest(metric="compute/matmul_bf16_tflops", history=db, node="slow"), out
    )
    assert [(p.run_id, p.device_index, p.value) for p in result.points] == [
        (4, 0, 800.0),
        (4, 1, 690.0),
    ]
    assert result.mixed == ["accept standard (cuda)"]
    assert len(out.text().splitlines()) == 2 + 2  # header, rule, two GPUs
    with pytest.raises(InputError, match="no figure named 'nonsense' recorded at level full"):
        trending.run(
            trending.TrendRequest(metric="nonsense", history=db, level="full"), Collected()
        )


def test_a_gpus_life_and_a_uuid_no_run_names(tmp_path: Path) -> None:
    # tests.run_reports names a host's GPUs GPU-HOST-INDEX: a host of hex digits makes a UUID
    runs = [gpu_report("deadbeef", [800.0, 800.0], hours=h) for h in (0, 1)]
    db = str(history_with(tmp_path / "h.sqlite", *runs))
    out = Collected()
    life = gpu.run(gpu.GpuRequest(uuid="GPU-deadbeef-1", history=db), out).life
    assert [(r.run, r.host, r.index) for r in life.runs] == [(2, "deadbeef", 1), (1, "deadbeef", 1)]
    assert (life.incidents, life.offender) == (0, False)
    assert out.text().splitlines()[-1] == life.said
    with pytest.raises(InputError, match="no run recorded with GPU GPU-00000000-0"):
        gpu.run(gpu.GpuRequest(uuid="GPU-00000000-0", history=db), Collected())


def test_the_fleet_needs_a_person_when_a_gpu_lags(tmp_path: Path) -> None:
    db = _fleet(tmp_path / "h.sqlite")
    out = Collected()
    lagging = fleet.run(fleet.FleetRequest(history=db), out)
    assert lagging.exit_code == 1
    [outlier] = lagging.state.view.outliers
    assert (outlier.point.hostname, outlier.point.device_index) == ("slow", 1)
    assert "GPUs more than 10% worse than their model's fleet median:" in out.text()
    relaxed = fleet.FleetRequest(history=db, judging=fleet.FleetJudging(tolerance_percent=20))
    calm = Collected()
    assert fleet.run(relaxed, calm).exit_code == 0
    assert "no GPU more than 20% worse than its model's fleet median" in calm.text()
    as_json = Collected()
    fleet.run(fleet.FleetRequest(history=db, as_json=True), as_json)
    view = json.loads(as_json.text())
    assert [(o["node"], o["device_index"]) for o in view["outliers"]] == [("slow", 1)]


def test_the_fleet_needs_a_person_when_a_node_failed(tmp_path: Path) -> None:
    reports = [gpu_report(f"node{i}", [800.0]) for i in range(3)]
    db = str(history_with(tmp_path / "h.sqlite", *reports, soft_failure("node0", hours=2)))
    out = Collected()
    result = fleet.run(fleet.FleetRequest(history=db), out)
    assert result.exit_code == 1
    assert [run.hostname for run in result.state.failing] == ["node0"]
    row = next(line for line in out.text().splitlines() if line.startswith("node0"))
    assert "FAIL" in row
    assert row.endswith("rerun")


@pytest.fixture
def spool(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    directory = tmp_path / "spool"
    monkeypatch.setenv("GPUACCEPT_SPOOL", str(directory))
    return directory


def test_push_delivers_the_spool_once(tmp_path: Path, spool: Path) -> None:
    db = str(tmp_path / "h.sqlite")
    empty = Collected()
    assert push.run(push.PushRequest(history=db), empty).delivery is None
    assert empty.text() == f"[HISTORY] nothing to push: the spool {spool} is empty\n"
    assert not Path(db).exists()  # nothing to push: the history is not made
    kept = spool_report(gpu_report("gpu01", [790.0]), spool)
    out = Collected()
    result = push.run(push.PushRequest(history=db), out)
    assert result.delivery is not None
    assert [(run_id, new) for _, run_id, new in result.delivery.delivered] == [(1, True)]
    assert out.text().splitlines() == [
        f"[HISTORY] spool {kept.name}: run 1",
        f"[HISTORY] pushed 1 run(s) to {db}",
    ]
    assert pending(spool) == []


def test_push_refuses_a_spooled_file_that_is_no_report_after_the_rest(
    tmp_path: Path, spool: Path
) -> None:
    from gpuaccept.store.spool import SpoolError

    spool_report(gpu_report("gpu01", [790.0]), spool)
    (spool / "zz-garbage.json").write_bytes(b"\x00not json")
    out = Collected()
    with pytest.raises(SpoolError, match="1 spooled file"):
        push.run(push.PushRequest(history=str(tmp_path / "h.sqlite")), out)
    assert "zz-garbage.json: not delivered, left in place: not JSON" in out.text()
    assert "pushed 1 run(s)" in out.text()
    assert [p.name for p in pending(spool)] == ["zz-garbage.json"]
