from __future__ import annotations

import pytest

from gpuaccept import suite
from gpuaccept.errors import InputError
from gpuaccept.probe.hardware import ExpectedGpus
from gpuaccept.results import Status
from tests.checks.conftest import cpu_context


def names(specs: list[suite.CheckSpec]) -> list[str]:
    return [spec.name for spec in specs]


def test_quick_runs_inventory_stack_compute_train_collectives() -> None:
    quick = names(suite.select_checks("quick", [], []))
    assert quick == ["inventory", "stack", "health", "compute", "train", "collectives"]


def test_standard_and_full_run_every_check() -> None:
    every = [spec.name for spec in suite.CHECKS]
    assert names(suite.select_checks("standard", [], [])) == every
    assert names(suite.select_checks("full", [], [])) == every


def test_only_and_skip_select_by_name() -> None:
    assert names(suite.select_checks("quick", ["ddp", "stack"], [])) == ["stack", "ddp"]
    assert "compute" not in names(suite.select_checks("standard", [], ["compute"]))


@pytest.mark.parametrize(
    ("level", "only", "skip", "text"),
    [
        ("medium", [], [], "--level"),
        ("quick", ["gemm"], [], "--only"),
        ("quick", [], ["x"], "--skip"),
    ],
)
def test_bad_selection_is_an_input_error(
    level: str, only: list[str], skip: list[str], text: str
) -> None:
    with pytest.raises(InputError, match=text):
        suite.select_checks(level, only, skip)


def test_levels_grow_in_work() -> None:
    quick, standard, full = (suite.level_settings(level, "cuda") for level in suite.LEVELS)
    assert len(quick.matmul_dtypes) < len(standard.matmul_dtypes)
    assert (
        quick.consistency_iterations < standard.consistency_iterations < full.consistency_iterations
    )
    assert quick.sustained_seconds == 0 < full.sustained_seconds
    assert quick.pattern_fraction == 0 < full.pattern_fraction
    assert quick.smoke_epochs == 1


def spec(target: str) -> suite.CheckSpec:
    return suite.CheckSpec("fake", "FAKE", target, frozenset(suite.LEVELS))


def test_isolated_check_result_comes_back_with_its_duration() -> None:
    result = suite.run_check_isolated(spec("tests.faults:check_passes"), cpu_context(), 60)
    assert result.status is Status.PASS
    assert result.duration_seconds > 0


def test_raising_check_becomes_error() -> None:
    result = suite.run_check_isolated(spec("tests.faults:check_raises"), cpu_context(), 60)
    assert result.status is Status.ERROR
    assert "RuntimeError: injected check failure" in result.message


def test_hanging_check_times_out_as_error() -> None:
    result = suite.run_check_isolated(spec("tests.faults:check_hangs"), cpu_context(), 3)
    assert result.status is Status.ERROR
    assert result.message == "timed out after 3 s"


def test_dying_check_becomes_error() -> None:
    result = suite.run_check_isolated(spec("tests.faults:check_dies"), cpu_context(), 60)
    assert result.status is Status.ERROR
    assert "died (exit code 9)" in result.message


def test_suite_goes_on_after_a_broken_check_and_reports_in_order() -> None:
    seen: list[str] = []
    specs = [spec("tests.faults:check_raises"), spec("tests.faults:check_passes")]
    results = suite.run_suite(specs, cpu_context(), 60, on_result=lambda r: seen.append(r.status))
    assert [r.status for r in results] == [Status.ERROR, Status.PASS]
    assert seen == [Status.ERROR, Status.PASS]


def test_missing_expected_gpus_skip_device_checks_but_not_inventory() -> None:
    context = cpu_context(expected=ExpectedGpus(2, "--expect-gpus"))
    specs = [s for s in suite.CHECKS if s.name in ("inventory", "compute")]
    results = {r.name: r for r in suite.run_suite(specs, context, 60)}
    assert results["inventory"].status is Status.FAIL
    assert results["compute"].status is Status.SKIP
