"""The sweep's round as a state machine (issue #54 §3): long random sequences of rounds, sweep jobs
that end, users' jobs, operators' drains, the clock and the limits changing, with the invariants
of act/sweep.py held at every round. Eight nodes in two pools, one node in both."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, rule

from gpuaccept.act.sweep import Limits, SweepNode, plan_round

START = datetime(2026, 11, 1)
POOLS = {f"n{i}": ("a",) if i < 3 else ("a", "b") if i == 3 else ("b",) for i in range(8)}
NAMES = sorted(POOLS)


class Sweep(RuleBasedStateMachine):
    @initialize(
        fleet=st.integers(0, 5),
        per_pool=st.none() | st.integers(0, 3),
        hours=st.integers(1, 48),
    )
    def start(self, fleet: int, per_pool: int | None, hours: int) -> None:
        self.now = START
        self.limits = Limits(fleet, per_pool, timedelta(hours=hours))
        self.nodes = {name: SweepNode(name, pools) for name, pools in POOLS.items()}

    def _under_test(self) -> tuple[int, dict[str, int]]:
        testing = [n for n in self.nodes.values() if n.testing]
        pools = {p: sum(p in n.pools for n in testing) for p in ("a", "b")}
        return len(testing), pools

    @rule()
    def a_round(self) -> None:
        before, before_pools = self._under_test()
        choices = plan_round(list(self.nodes.values()), self.limits, self.now)
        assert sorted(c.node for c in choices) == NAMES  # every node once
        submitted = [c.node for c in choices if c.action == "submit"]
        for name in submitted:
            node = self.nodes[name]
            # 2: never a busy, held, tested or recently tested node
            assert not node.busy, node
            assert not node.held, node
            assert not node.testing, node
            assert node.tested is None or self.now - node.tested >= self.limits.cadence, node

        # 3: the most overdue first; none skipped for the fleet's cap is more overdue
        def overdue(name: str) -> tuple[int, datetime, str]:
            tested = self.nodes[name].tested
            return (0 if tested is None else 1, tested or datetime.min, name)

        assert [overdue(n) for n in submitted] == sorted(overdue(n) for n in submitted)
        capped = [c.node for c in choices if "the fleet's cap holds" in c.why]
        assert all(overdue(s) < overdue(c) for s in submitted for c in capped)
        for name in submitted:
            self.nodes[name] = replace(self.nodes[name], testing=True)
        # 1: the cap, fleet-wide and per pool; a round over it already submits nothing
        after, after_pools = self._under_test()
        assert after <= max(self.limits.fleet, before)
        if before >= self.limits.fleet:
            assert not submitted
        if self.limits.per_pool is not None:
            for pool, count in after_pools.items():
                assert count <= max(self.limits.per_pool, before_pools[pool])
                if before_pools[pool] >= self.limits.per_pool:
                    assert not any(pool in POOLS[n] for n in submitted)
        # a due node is skipped only for a cap
        for choice in choices:
            node = self.nodes[choice.node]
            if choice.action == "skip" and choice.why.startswith("due"):
                assert "cap holds" in choice.why
        # 4: replaying the round on the state it left submits nothing more
        again = plan_round(list(self.nodes.values()), self.limits, self.now)
        assert [c for c in again if c.action == "submit"] == []

    @rule(name=st.sampled_from(NAMES))
    def a_sweep_job_ends(self, name: str) -> None:
        node = self.nodes[name]
        if node.testing:
            self.nodes[name] = replace(node, testing=False, tested=self.now)

    @rule(name=st.sampled_from(NAMES), busy=st.booleans())
    def a_users_job_starts_or_ends(self, name: str, busy: bool) -> None:
        self.nodes[name] = replace(self.nodes[name], busy=busy)

    @rule(name=st.sampled_from(NAMES), why=st.sampled_from(["", "drained by someone else", "DOWN"]))
    def an_operator_drains_or_resumes(self, name: str, why: str) -> None:
        self.nodes[name] = replace(self.nodes[name], held=why)

    @rule(hours=st.integers(0, 30))
    def time_passes(self, hours: int) -> None:
        self.now += timedelta(hours=hours)

    @rule(fleet=st.integers(0, 5), per_pool=st.none() | st.integers(0, 3))
    def the_operator_changes_the_limits(self, fleet: int, per_pool: int | None) -> None:
        self.limits = replace(self.limits, fleet=fleet, per_pool=per_pool)


TestSweep = Sweep.TestCase
TestSweep.settings = settings(
    max_examples=300,
    stateful_step_count=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)


def test_more_nodes_due_than_the_cap_allows_are_taken_in_turn() -> None:
    """Eight nodes due, a cap of three: three a round, the never tested first, and every node
    tested once in three rounds whose jobs end between them."""
    limits = Limits(3, None, timedelta(hours=24))
    nodes = {name: SweepNode(name, POOLS[name]) for name in NAMES}
    seen: list[list[str]] = []
    now = START
    for _ in range(3):
        choices = plan_round(list(nodes.values()), limits, now)
        submitted = [c.node for c in choices if c.action == "submit"]
        seen.append(submitted)
        for name in submitted:  # the job runs and ends within the hour
            nodes[name] = replace(nodes[name], tested=now)
        now += timedelta(hours=1)
    assert seen == [["n0", "n1", "n2"], ["n3", "n4", "n5"], ["n6", "n7"]]
    first = plan_round([SweepNode(name, POOLS[name]) for name in NAMES], limits, START)
    assert [c.why for c in first if c.action == "skip"] == [
        "due, but the fleet's cap holds: 3 of 3 under test"
    ] * 5


def test_a_pool_cap_holds_where_the_fleet_would_allow_more() -> None:
    limits = Limits(8, 1, timedelta(hours=24))
    nodes = [SweepNode(name, POOLS[name]) for name in NAMES]
    submitted = [c.node for c in plan_round(nodes, limits, START) if c.action == "submit"]
    assert submitted == ["n0", "n4"]  # n3 is in both pools: a's is taken by n0
