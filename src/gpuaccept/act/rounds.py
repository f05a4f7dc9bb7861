"""One round of decisions (issue #49 §6): a pure function of the cluster's state, gpuaccept's own
records, the new verdicts and the guard, the same for Slurm and Kubernetes.

Invariants (held by tests/act/test_round_machine.py, a hypothesis state machine over long random
sequences of rounds, nodes and operator actions):
1. A node that is not gpuaccept's (held by someone else: a state, a flag, another's drain, cordon
   or taint) is never drained, resumed or re-reasoned.
2. Within any window of the breaker's minutes gpuaccept drains at most the breaker's limit of
   the pool (counted from its own records: a drain an administrator lifted still counts), and
   none while the breaker is tripped.
3. A tripped breaker is reset only by a person (`Ledger.reset`); no round resets it.
4. The decisions are the same for Slurm and Kubernetes given the same state.
5. Replaying a round on the state it left changes nothing.
6. A node gpuaccept drained returns to service after a passing run at the resume level,
   tripped breaker or not.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime, timedelta

from gpuaccept.act.ledger import Ledger
from gpuaccept.act.policy import (
    Decision,
    Guard,
    SchedNode,
    Trip,
    Verdict,
    alike,
    decide,
    recent_drains,
)
from gpuaccept.results import RunReport


@dataclass(frozen=True)
class NodeRun:
    """A node's newest verdict, as the round judges it."""

    node: str
    verdict: Verdict
    level: str
    failed_checks: tuple[str, ...]
    stack: str | None
    action: str  # the recommended action, escalated by the node's past (act.repeats)
    repeats: int = 0  # failing runs just before this one (the debounce)
    # the checks the run ran (None: not known): a pass returns a node only when it ran the
    # checks the node was drained for
    ran: tuple[str, ...] | None = None


@dataclass(frozen=True)
class Round:
    decisions: tuple[Decision, ...]
    ledger: Ledger


def checks_run(report: RunReport) -> tuple[str, ...]:
    """The checks a run ran and did not fail (passed or warned)."""
    from gpuaccept.verdict import Status

    return tuple(c.name for c in report.checks if c.status in (Status.PASS, Status.WARN))


def after(node: SchedNode, decision: Decision, now: datetime) -> SchedNode:
    """The node as the scheduler shows it once the decision is carried out."""
    if decision.action == "drain":
        ours = True if node.ours is not None else None
        return replace(node, drained=True, reason=decision.reason, reason_time=now, ours=ours)
    if decision.action == "resume":
        ours = False if node.ours is not None else None
        return replace(node, drained=False, reason="", reason_time=None, ours=ours)
    return node


def _failing_alike(run: NodeRun, runs: list[NodeRun]) -> tuple[str, ...]:
    """The other nodes of the round that failed alike on the same stack."""
    if run.stack is None:
        return ()
    return tuple(
        other.node
        for other in runs
        if other.node != run.node
        and other.verdict == "fail"
        and other.stack == run.stack
        and alike(run.failed_checks, other.failed_checks)
    )


def decide_round(
    runs: list[NodeRun],
    nodes: list[SchedNode],
    ledger: Ledger,
    now: datetime,
    guard: Guard,
    pool: set[str] | None = None,
) -> Round:
    """Each run's decision, in order, against the cluster's `nodes` (every run's node among them:
    KeyError otherwise) and gpuaccept's records; the breaker counts the nodes of `pool` (every
    node when None) and the drains this round made before. Returns the decisions and the
    records as they stand after them (a trip, a regression found)."""
    state = {n.name: n for n in nodes}
    failing = [r for r in runs if r.verdict == "fail"]
    since = now - timedelta(minutes=guard.minutes)
    decisions = []
    for run in runs:
        node = state[run.node]
        partition = [n for n in state.values() if pool is None or n.name in pool or n is node]
        members = {n.name for n in partition}
        # the breaker counts every drain gpuaccept made in the window (its records: one an
        # administrator lifted since still counts) and the scheduler's recent gpuaccept drains
        # its records do not hold (made before them)
        start = ledger.window_start(since)
        recorded = [name for name in ledger.drains_since(start) if name in members]
        scheduler = [
            n
            for n in recent_drains(partition, now, guard)
            if n.reason_time is None or n.reason_time >= start or ledger.counted_from is None
        ]
        counted = recorded + [n.name for n in scheduler if n.name not in recorded]
        trip = ledger.tripped
        decision = decide(
            run.verdict,
            run.level,
            list(run.failed_checks),
            node,
            partition,
            now,
            guard,
            run.stack,
            run.action,
            run.repeats,
            _failing_alike(run, failing) if run.verdict == "fail" else (),
            Trip(trip.at, trip.why) if trip is not None else None,
            ledger.held_regressions(),
            counted,
            run.ran,
        )
        if decision.action == "drain":
            ledger = ledger.drained(now, run.node)
        if decision.trips:
            ledger = ledger.trip(now, f"a drain of {run.node} was refused: {decision.why}")
        if decision.regression and decision.regression_checks:
            alike_nodes = (run.node, *_failing_alike(run, failing))
            ledger = ledger.hold_regression(
                now, decision.regression, decision.regression_checks, alike_nodes
            )
        decisions.append(decision)
        state[run.node] = after(node, decision, now)
    return Round(tuple(decisions), ledger)
