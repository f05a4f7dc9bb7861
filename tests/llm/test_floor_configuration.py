"""A floor's configuration against a run's: each difference named, one after another, so an
operator sees every reason the speed was not judged (issue #52 §2)."""

from __future__ import annotations

from dataclasses import replace

from gpuaccept.llm.floors import FLOOR_CONFIGURATIONS


def test_every_difference_from_the_floors_configuration_is_named_in_turn() -> None:
    floor = FLOOR_CONFIGURATIONS[("h100-sxm", "llm_8b_mfu")]
    assert floor.mismatch(floor.configuration) is None
    run = replace(floor.configuration, checkpointing="full", world_size=4)
    said = floor.mismatch(run)
    assert said is not None
    assert said.startswith("this run differs from its floor's configuration in ")
    differences = said.removeprefix("this run differs from its floor's configuration in ")
    first, second = differences.split(" (the floor: ")[0].split("; ")
    assert "full" in first
    assert "selective-op" in first
    assert "4" in second
    assert "8" in second
