"""Run-against-run comparison and the fleet view's outlier rule."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuaccept.compare.comparison import compare_reports, fleet_view, higher_is_better
from gpuaccept.store.history import History
from tests.run_reports import gpu_report


def test_compare_matches_figures_and_signs_the_change() -> None:
    a = gpu_report("n", [800.0, 800.0])
    b = gpu_report("n", [720.0, 800.0], hours=1, train_seconds=13.0)
    compared = {(f.metric, f.device): f for f in compare_reports(a, b)}
    slower = compared[("compute/matmul_bf16_tflops", "gpu0")]
    assert slower.change_percent == pytest.approx(-10.0)
    assert slower.worse
    assert not compared[("compute/matmul_bf16_tflops", "gpu1")].worse
    # training took one second longer: worse, because seconds are better when fewer
    assert compared[("train/train_elapsed", "cpu")].worse


def test_compare_keeps_figures_only_one_run_has() -> None:
    a = gpu_report("n", [800.0])
    b = gpu_report("n", [800.0, 790.0])
    gpu1 = next(f for f in compare_reports(a, b) if f.device == "gpu1")
    assert (gpu1.value_a, gpu1.value_b, gpu1.change_percent) == (None, 790.0, None)


@pytest.mark.parametrize(
    ("unit", "expected"),
    [("TFLOPS", True), ("GB/s", True), ("samples/s", True), ("s", False), ("ratio", None)],
)
def test_direction_of_units(unit: str, expected: bool | None) -> None:
    assert higher_is_better(unit) is expected


def _view(tmp_path: Path, reports: list, tolerance: float = 10.0, min_samples: int = 3):  # type: ignore[no-untyped-def]
    with History.open(tmp_path / "h.sqlite") as history:
        history.append([(r, "run") for r in reports])
        return fleet_view(
            history.list_runs(),
            history.points(latest_only=True),
            tolerance_percent=tolerance,
            min_samples=min_samples,
        )


def test_gpu_below_fleet_median_is_flagged_even_when_it_passed(tmp_path: Path) -> None:
    # 700 passes its reference floor (0.8 x 800 = 640) but is 12.5% below its siblings
    reports = [gpu_report(f"node{i}", [800.0, 800.0]) for i in range(3)]
    reports.append(gpu_report("slow", [800.0, 700.0]))
    view = _view(tmp_path, reports)
    assert all(run.verdict.passed for run in view.nodes)
    [outlier] = view.outliers
    assert (outlier.point.hostname, outlier.point.device_index) == ("slow", 1)
    assert outlier.deviation_percent == pytest.approx(-12.5)
    assert outlier.point.gpu_uuid == "GPU-slow-1"


def test_only_the_newest_figure_of_a_gpu_counts(tmp_path: Path) -> None:
    reports = [gpu_report(f"node{i}", [800.0]) for i in range(3)]
    reports.append(gpu_report("fixed", [600.0], hours=0))
    reports.append(gpu_report("fixed", [798.0], hours=5))  # repaired since
    view = _view(tmp_path, reports)
    assert view.outliers == []
    assert [run.hostname for run in view.nodes] == ["fixed", "node0", "node1", "node2"]
    assert next(r for r in view.nodes if r.hostname == "fixed").started_at.startswith(
        "2026-11-01T13"
    )


def test_models_are_compared_only_with_their_own_kind(tmp_path: Path) -> None:
    reports = [gpu_report(f"h{i}", [800.0]) for i in range(3)]
    reports += [gpu_report(f"a{i}", [280.0], model="NVIDIA A100-SXM4-80GB") for i in range(3)]
    assert _view(tmp_path, reports).outliers == []


def test_tolerance_and_sample_floor(tmp_path: Path) -> None:
    reports = [gpu_report("a", [800.0]), gpu_report("b", [800.0]), gpu_report("c", [750.0])]
    assert _view(tmp_path / "1", reports, tolerance=10.0).outliers == []  # 6.25% below
    assert len(_view(tmp_path / "2", reports, tolerance=5.0).outliers) == 1
    assert _view(tmp_path / "3", reports, tolerance=5.0, min_samples=4).outliers == []


def test_slower_training_time_is_an_outlier_too(tmp_path: Path) -> None:
    reports = [gpu_report(f"n{i}", [800.0]) for i in range(3)]
    view = _view(
        tmp_path, [*reports, gpu_report("late", [800.0], train_seconds=15.0)], tolerance=10.0
    )
    [outlier] = view.outliers
    assert (outlier.point.name, outlier.point.hostname) == ("train_elapsed", "late")


def test_a_figure_only_one_run_has_keeps_its_unit_either_way() -> None:
    a = gpu_report("n", [800.0, 790.0])
    b = gpu_report("n", [800.0])
    only_a = next(f for f in compare_reports(a, b) if f.device == "gpu1")
    assert (only_a.value_a, only_a.value_b, only_a.unit) == (790.0, None, "TFLOPS")
    only_b = next(f for f in compare_reports(b, a) if f.device == "gpu1")
    assert (only_b.value_a, only_b.value_b, only_b.unit) == (None, 790.0, "TFLOPS")


def test_exactly_the_tolerance_away_is_not_an_outlier_and_the_view_says_its_terms(
    tmp_path: Path,
) -> None:
    """ "More than" the tolerance: 90 against a median of 100 at 10% is not an outlier (a rate),
    nor 11 s against 10 s at 10% (a time); a hair beyond is. Three GPUs make a median by
    default."""
    rates = [gpu_report("a", [100.0]), gpu_report("b", [100.0]), gpu_report("c", [90.0])]
    view = _view(tmp_path / "1", rates)
    assert [f.point.name for f in view.outliers] == []
    assert (view.tolerance_percent, view.min_samples) == (10.0, 3)
    figure = next(f for f in view.figures if f.point.hostname == "c" and f.point.unit == "TFLOPS")
    assert (figure.fleet_median, figure.samples) == (100.0, 3)
    times = [gpu_report(h, [100.0], train_seconds=s) for h, s in (("a", 10), ("b", 10), ("c", 11))]
    assert _view(tmp_path / "2", times).outliers == []
    beyond = [*rates[:2], gpu_report("c", [89.9])]
    assert [f.point.hostname for f in _view(tmp_path / "3", beyond).outliers] == ["c"]
    with History.open(tmp_path / "4.sqlite") as history:
        history.append([(r, "run") for r in beyond])
        default = fleet_view(
            history.list_runs(), history.points(latest_only=True), tolerance_percent=10.0
        )
    assert [f.point.hostname for f in default.outliers] == ["c"]  # min_samples 3 by default
