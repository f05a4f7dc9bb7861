"""The sweep round's words and boundaries, which the state machine (test_sweep_machine.py) does
not read: what an operator sees for each skipped node, the cadence's edge, and the order of the
due with the history's times as they are stored (timezone-aware)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from gpuaccept.act.sweep import Choice, Limits, SweepNode, plan_round

NOW = datetime(2026, 11, 29, 6, 0, tzinfo=UTC)
DAY = Limits(fleet=10, per_pool=None, cadence=timedelta(hours=24))


def test_each_skip_says_why_in_the_operators_words() -> None:
    nodes = [
        SweepNode("a", ("gpu",), testing=True),
        SweepNode("b", ("gpu",), held="drained by root: bad DIMM"),
        SweepNode("c", ("gpu",), busy=True),
        SweepNode("d", ("gpu",), tested=NOW - timedelta(hours=2.5)),
    ]
    assert plan_round(nodes, DAY, NOW) == (
        Choice("a", "skip", "under test: a sweep job of it is queued or running"),
        Choice("b", "skip", "held: drained by root: bad DIMM"),
        Choice("c", "skip", "busy: jobs run on it"),
        Choice("d", "skip", "tested 2.5 h ago (cadence 24 h)"),
    )


def test_a_node_tested_exactly_a_cadence_ago_is_due() -> None:
    """The cadence is how often: a node tested 24 h ago is due at a 24 h cadence, not in the
    next round's."""
    node = SweepNode("a", ("gpu",), tested=NOW - timedelta(hours=24))
    assert plan_round([node], DAY, NOW) == (
        Choice("a", "submit", "due: last tested 2026-11-28 06:00"),
    )
    just_within = SweepNode("a", ("gpu",), tested=NOW - timedelta(hours=23, minutes=59))
    assert plan_round([just_within], DAY, NOW)[0].action == "skip"


def test_never_tested_nodes_go_first_among_aware_times() -> None:
    """The history's times are timezone-aware: a never-tested node must sort before them without
    comparing its missing time with theirs (naive against aware raises)."""
    nodes = [
        SweepNode("old", ("gpu",), tested=NOW - timedelta(days=9)),
        SweepNode("new", ("gpu",)),
        SweepNode("older", ("gpu",), tested=NOW - timedelta(days=30)),
    ]
    chosen = plan_round(nodes, DAY, NOW)
    assert [c.node for c in chosen] == ["new", "older", "old"]
    assert chosen[0] == Choice("new", "submit", "due: never tested")
    capped = plan_round(nodes, Limits(fleet=1, per_pool=None, cadence=DAY.cadence), NOW)
    assert capped[0] == Choice("new", "submit", "due: never tested")
    assert {c.action for c in capped[1:]} == {"skip"}


def test_a_pools_cap_skips_the_rest_of_that_pool_and_says_so() -> None:
    nodes = [SweepNode("a", ("gpu",)), SweepNode("b", ("gpu",)), SweepNode("c", ("cpu",))]
    limits = Limits(fleet=10, per_pool=1, cadence=DAY.cadence)
    assert plan_round(nodes, limits, NOW) == (
        Choice("a", "submit", "due: never tested"),
        Choice("c", "submit", "due: never tested"),
        Choice("b", "skip", "due, but pool gpu's cap holds: 1 of 1"),
    )
