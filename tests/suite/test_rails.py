"""The rails' verdict (suite/rails.py), from figures alone: which ranks make a rail, a slow or
failing rail named, and the cases with nothing to compare."""

from __future__ import annotations

import math

import pytest

from gpuaccept.measure.collectives import AllReduceFigure
from gpuaccept.results import Status
from gpuaccept.suite.rails import judge_rails, rail_ranks

MIB = 2**20


def _figure(seconds: float, wrong: int = 0, ranks: int = 4) -> AllReduceFigure:
    return AllReduceFigure(ranks, 64 * MIB, wrong, seconds)


def test_a_rail_is_one_local_rank_of_every_node() -> None:
    assert rail_ranks(0, 3, 8) == [0, 8, 16]
    assert rail_ranks(7, 3, 8) == [7, 15, 23]
    with pytest.raises(ValueError, match="rail 8 of 8"):
        rail_ranks(8, 3, 8)


def test_equal_rails_pass_with_each_rails_figure() -> None:
    result = judge_rails({k: _figure(0.01) for k in range(8)}, nodes=4, tolerance_percent=10)
    assert result.status is Status.PASS
    assert (result.name, result.area) == ("rails", "COLLECTIVES")
    each = ", ".join(f"rail {k} {_figure(0.01).busbw_gbps:.3g}" for k in range(8))
    assert result.message == f"8 rails across 4 nodes, busbw GB/s: {each}"
    assert result.details == {"rails": 8, "nodes": 4, "tolerance_percent": 10, "slow": []}
    assert [m.device_index for m in result.measurements] == list(range(8))
    assert all(m.name == "rail_busbw_gbps" and m.unit == "GB/s" for m in result.measurements)
    assert math.isclose(result.measurements[0].value, _figure(0.01).busbw_gbps)


def test_a_slow_rail_is_named_against_the_best_a_second_rail_confirms() -> None:
    figures = {k: _figure(0.010) for k in range(8)}
    figures[0] = _figure(0.005)  # one unusually fast rail does not fail the others
    figures[5] = _figure(0.0115)  # 13% slower than the confirmed best
    result = judge_rails(figures, nodes=4, tolerance_percent=10)
    assert result.status is Status.FAIL
    assert result.details["slow"] == ["rail 5"]
    assert "rail 5" in result.message
    assert "-13%" in result.message
    # within the tolerance asked: no rail is slow
    assert judge_rails(figures, nodes=4, tolerance_percent=15).status is Status.PASS


def test_of_two_rails_the_slower_is_held_to_the_better() -> None:
    result = judge_rails({0: _figure(0.010), 1: _figure(0.012)}, nodes=2, tolerance_percent=10)
    assert result.status is Status.FAIL
    assert result.details["slow"] == ["rail 1"]


@pytest.mark.parametrize(
    ("bad", "said"),
    [
        ("timed out after 60 s", "rail 2: its all-reduce failed: timed out"),
        (_figure(0.010, wrong=3), "rail 2: 3 wrong element(s)"),
        (_figure(math.inf), "rail 2: no bus bandwidth measured"),
    ],
)
def test_a_rail_that_failed_or_computed_wrong_fails(bad: object, said: str) -> None:
    figures: dict[int, object] = {k: _figure(0.010) for k in range(4)}
    figures[2] = bad
    result = judge_rails(figures, nodes=3, tolerance_percent=10)  # type: ignore[arg-type]
    assert result.status is Status.FAIL
    assert said in result.message


@pytest.mark.parametrize(
    ("figures", "nodes", "why"),
    [({}, 1, "one node"), ({0: _figure(0.01)}, 2, "one rank per node")],
)
def test_nothing_to_compare_is_a_skip_with_the_reason(
    figures: dict[int, AllReduceFigure], nodes: int, why: str
) -> None:
    result = judge_rails(figures, nodes=nodes, tolerance_percent=10)
    assert result.status is Status.SKIP
    assert result.area == "COLLECTIVES"
    assert result.message == (
        f"{why}: no rails to compare (rails need 2+ nodes and 2+ ranks per node)"
    )


def test_every_rail_is_judged_past_a_failed_one_and_slow_rails_are_not_too_slow() -> None:
    """A rail that failed does not end the judging: a slow rail after it is named too (each
    finding its own, joined by '; '); rails of well under 1 GB/s (the CPU twin's gloo) are
    figures like any other."""
    figures: dict[int, object] = {k: _figure(1.0) for k in range(4)}  # 0.1 GB/s busbw each
    figures[0] = "connection reset"
    figures[1] = _figure(1.5)
    result = judge_rails(figures, nodes=3, tolerance_percent=10)  # type: ignore[arg-type]
    assert result.message == (
        "rail 0: its all-reduce failed: connection reset; rail 1 0.0671 GB/s busbw, -33% against "
        "the rails' best 0.101 (a NIC, cable or switch on that rail)"
    )
    assert [m.device_index for m in result.measurements] == [1, 2, 3]
    nothing: dict[int, object] = {0: _figure(math.inf), 1: _figure(1.5), 2: _figure(1.0)}
    nothing[3] = _figure(1.0)
    said = judge_rails(nothing, nodes=3, tolerance_percent=10).message  # type: ignore[arg-type]
    assert said.startswith("rail 0: no bus bandwidth measured (0.0); rail 1 ")
