"""Which checks a level runs, --only/--skip, and the levels' sizes."""

from __future__ import annotations

import pytest

from gpuaccept import suite
from gpuaccept.errors import InputError


def names(specs: list[suite.CheckSpec]) -> list[str]:
    return [spec.name for spec in specs]


def test_quick_runs_inventory_stack_compute_train_collectives_and_events_last() -> None:
    quick = names(suite.select_checks("quick", [], []))
    assert quick == [
        "inventory",
        "stack",
        "fabric",
        "health",
        "compute",
        "train",
        "collectives",
        "fabric-errors",
        "events",
    ]


def test_standard_runs_every_check_but_dcgm_and_full_runs_every_check() -> None:
    every = [spec.name for spec in suite.CHECKS]
    assert names(suite.select_checks("standard", [], [])) == [n for n in every if n != "dcgm"]
    assert names(suite.select_checks("full", [], [])) == every


def test_dcgm_joins_any_level_when_asked_for_in_its_place() -> None:
    quick = names(suite.select_checks("quick", [], [], also=("dcgm",)))
    assert quick[-3:] == ["dcgm", "fabric-errors", "events"]
    assert "dcgm" not in names(suite.select_checks("quick", [], ["dcgm"], also=("dcgm",)))


def test_only_and_skip_select_by_name() -> None:
    assert names(suite.select_checks("quick", ["ddp", "stack"], [])) == ["stack", "ddp"]
    assert "compute" not in names(suite.select_checks("standard", [], ["compute"]))


@pytest.mark.parametrize(
    ("level", "only", "skip", "text"),
    [
        ("medium", [], [], "--level"),
        ("quick", ["gemm"], [], "--only"),
        ("quick", [], ["x"], "--skip"),
        ("quick", ["inventory"], ["inventory"], "no check left to run"),
    ],
)
def test_bad_or_empty_selection_is_an_input_error(
    level: str, only: list[str], skip: list[str], text: str
) -> None:
    with pytest.raises(InputError, match=text):
        suite.select_checks(level, only, skip)


def test_skipping_every_check_of_a_level_is_an_input_error() -> None:
    every = [spec.name for spec in suite.CHECKS]
    with pytest.raises(InputError, match="no check left to run: --level quick"):
        suite.select_checks("quick", [], every)


def test_levels_grow_in_work() -> None:
    quick, standard, full = (suite.level_settings(level, "cuda") for level in suite.LEVELS)
    assert len(quick.matmul_dtypes) < len(standard.matmul_dtypes)
    assert (
        quick.consistency_iterations < standard.consistency_iterations < full.consistency_iterations
    )
    assert quick.sustained_seconds == 0 < full.sustained_seconds
    assert quick.pattern_fraction == 0 < full.pattern_fraction
    assert quick.smoke_epochs == 1


def test_per_gpu_checks_run_per_device_and_transfer_one_gpu_at_a_time() -> None:
    scopes = {spec.name: (spec.scope, spec.serial) for spec in suite.CHECKS}
    assert scopes["compute"] == ("device", False)
    assert scopes["health"] == ("device", False)
    assert scopes["transfer"] == ("device", True)  # shared PCIe uplinks: never all at once
    assert scopes["collectives"][0] == scopes["ddp"][0] == "ranks"
    assert scopes["inventory"][0] == scopes["stack"][0] == "node"


def test_p2p_and_dcgm_run_with_the_gpus_free_of_our_workers_after_those_that_need_them() -> None:
    """DCGM's memory test allocates most of each GPU and its software test reports other
    processes; p2p makes a context on every GPU, which exclusive-process compute mode refuses
    beside our workers' contexts. Both run with the workers stopped, after every check that
    needs the workers (so they are stopped once, and restarted only for the final events)."""
    names = [spec.name for spec in suite.CHECKS]
    assert [spec.name for spec in suite.CHECKS if spec.gpus_idle] == ["p2p", "dcgm"]
    idle_from = names.index("p2p")
    assert all(spec.gpus_idle or spec.final for spec in suite.CHECKS[idle_from:])
