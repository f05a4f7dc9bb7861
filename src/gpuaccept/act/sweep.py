"""One round of the sweep (issue #54 §3): which idle nodes get an `accept` job now. A pure function
of the nodes as the scheduler shows them, the sweep's jobs in its queue, each node's newest
accept run in the history, the limits and the clock; the Slurm side is act.sweep_slurm.

Invariants (held by tests/act/test_sweep_machine.py, a hypothesis state machine over long random
sequences of rounds, jobs that start and end, operators' drains, time and the limits changing):
1. The cap: after a round, the nodes under test (the sweep's jobs queued or running, and those it
   submits) are at most `fleet`, and in each pool at most `per_pool`; a round that finds more
   under test already (the limits were lowered) submits nothing there, and never stops a job.
2. A node that is busy (jobs on it), held (drained or DOWN by anyone, gpuaccept's own action layer
   included, in maintenance, reserved, not responding: act.slurm.held_by), under test already, or
   tested within the cadence is never submitted.
3. The most overdue are first: a node never tested, then the oldest tested, then by name; so a
   cap that admits k nodes a round reaches every due node in turn.
4. Replaying a round on the state it leaves submits nothing more.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Literal


@dataclass(frozen=True)
class SweepNode:
    """A node as the round sees it."""

    name: str
    pools: tuple[str, ...]  # its partitions (a node may be in several)
    busy: bool = False  # jobs run on it (allocated, mixed, completing)
    held: str = ""  # why it is not the sweep's to test ("" when it is)
    testing: bool = False  # a sweep job of it is queued or running
    tested: datetime | None = None  # its newest accept run in the history


@dataclass(frozen=True)
class Limits:
    fleet: int  # nodes under test at once in the whole fleet
    per_pool: int | None  # and in each pool (None: only the fleet's)
    cadence: timedelta  # a node tested within it is not due


@dataclass(frozen=True)
class Choice:
    node: str
    action: Literal["submit", "skip"]
    why: str


def _overdue(node: SweepNode) -> tuple[int, datetime, str]:
    return (0 if node.tested is None else 1, node.tested or datetime.min, node.name)


def plan_round(nodes: Sequence[SweepNode], limits: Limits, now: datetime) -> tuple[Choice, ...]:
    """Each node's choice, the submitted ones in the order they are to be submitted, then the
    skipped ones by name."""
    testing = [n for n in nodes if n.testing]
    in_fleet = len(testing)
    in_pool = Counter(pool for n in testing for pool in n.pools)
    choices: list[Choice] = []
    skipped: list[Choice] = []
    due: list[SweepNode] = []
    for node in nodes:
        why = ""
        if node.testing:
            why = "under test: a sweep job of it is queued or running"
        elif node.held:
            why = f"held: {node.held}"
        elif node.busy:
            why = "busy: jobs run on it"
        elif node.tested is not None and now - node.tested < limits.cadence:
            hours = (now - node.tested).total_seconds() / 3600
            why = f"tested {hours:.1f} h ago (cadence {_hours(limits.cadence)} h)"
        if why:
            skipped.append(Choice(node.name, "skip", why))
        else:
            due.append(node)
    for node in sorted(due, key=_overdue):
        if in_fleet >= limits.fleet:
            why = f"due, but the fleet's cap holds: {in_fleet} of {limits.fleet} under test"
            skipped.append(Choice(node.name, "skip", why))
            continue
        full = [
            p for p in node.pools if limits.per_pool is not None and in_pool[p] >= limits.per_pool
        ]
        if full:
            why = f"due, but pool {full[0]}'s cap holds: {in_pool[full[0]]} of {limits.per_pool}"
            skipped.append(Choice(node.name, "skip", why))
            continue
        in_fleet += 1
        in_pool.update(node.pools)
        when = (
            "never tested" if node.tested is None else f"last tested {node.tested:%Y-%m-%d %H:%M}"
        )
        choices.append(Choice(node.name, "submit", f"due: {when}"))
    return (*choices, *sorted(skipped, key=lambda c: c.node))


def _hours(span: timedelta) -> str:
    return f"{span.total_seconds() / 3600:g}"
