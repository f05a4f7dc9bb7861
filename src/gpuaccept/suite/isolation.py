"""Finding the bad nodes of a multi-node job in O(log N) rounds (issue #33 §1): a planner that
decides the next round from the results of the last, testable without ranks. The runner (torchrun
or srun sub-jobs, one per group) runs each round's groups at once and reports which passed.

The stages, after NVIDIA's Cluster Readiness Engine (screen, bisect, confirm, cross-boundary) and
Google's cluster-health-scanner (a suspect re-tested beside a known-good node):

1. **screen**: every node alone, all at once: a node that fails alone is bad, no more is needed.
   With several GPUs per node, a second screen with NVLink off (**screen-nvlink-off**: NCCL's
   P2P and NVLink SHARP disabled, so the node's GPUs meet over PCIe and host memory) names a
   node whose own PCIe or host path is broken, which NVLink hides in every other round.
2. **whole**: the rest as one job. A pass ends the search.
3. **bisect**: each failing group split in two (along racks first, when the topology is known),
   every half of every failing group tested in the same round; a half that passes is known good,
   a failing half is split again, down to groups of two or three. A group whose halves both
   pass fails only as a whole: the fault is between them (a spine, a switch between racks),
   said as such.
4. **confirm**: each node of a failing small group beside a known-good node (one that passed in
   a group of two or more); the ones that still fail are the suspects. A failing small group
   none of whose nodes fails beside a good one failed only as a whole, as a group whose halves
   pass does: the fault is between its nodes (between their racks when they span several),
   named as a boundary. Without this, a fault between a rack and a lone node of another (the
   middle split puts them in one small group) was cleared node by node and the job PASSED with
   its whole round failed. A suspect that failed beside a node of another rack, over a link
   between the two racks that no passing group crossed, is named with that doubt
   (`beside_other_racks`: its own fault and that link's look the same).
5. **whole** again, when confirmation named new suspects and no fault between groups: the rest
   as one job. It passes unless a fault the suspects hid is left (a rack's link behind a bad
   node of that rack fails only groups the node fails anyway); then bisection and confirmation
   run on the rest as they did on the whole. So a search ends on the rest passing together, or
   on a fault between groups (which would fail it again), never on suspects alone.

With k bad nodes among N: ceil(log2 N) + 3 rounds when every pair can be confirmed at once
(screen, whole, ceil(log2 N) - 1 bisections down to pairs, confirm, the rest; one more with
the NVLink-off screen), well inside the issue's 2 k ceil(log2 N) + k; all-pairs
rounds (`--pairwise`) are N - 1.
A rack all of whose nodes are suspects is named as the rack.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from gpuaccept.results import CheckResult, Status

Group = tuple[str, ...]
SMALLEST_SPLIT = 3  # a group this small or smaller is confirmed node by node
NVLINK_OFF_STAGE = "screen-nvlink-off"
# NVLink off for NCCL (nccl 5067397c): NCCL_P2P_DISABLE=1 sets the P2P level to PATH_LOC
# (src/graph/paths.cc:243-253), so no two GPUs use the P2P transport; NVLink SHARP is a transport
# of its own, enabled unless NCCL_NVLS_ENABLE=0 (src/transport/nvls.cc:159,262). Both are read
# once per process (paths.cc:284-291; the NCCL_PARAM cache, src/include/param.h): the screen
# runs in ranks started for it. What is left is SHM through host memory, over PCIe.
NVLINK_OFF_ENV: Mapping[str, str] = {"NCCL_P2P_DISABLE": "1", "NCCL_NVLS_ENABLE": "0"}


@dataclass(frozen=True)
class Round:
    number: int
    stage: str  # screen, whole, bisect, confirm
    groups: tuple[Group, ...]  # disjoint: run at the same time
    passed: tuple[bool, ...] = ()


@dataclass(frozen=True)
class Isolation:
    suspects: tuple[str, ...]  # nodes that failed alone or beside a known-good node
    boundaries: tuple[tuple[Group, Group], ...]  # halves that pass alone and fail together
    racks: tuple[str, ...]  # racks whose every node is a suspect
    rounds: tuple[Round, ...]
    # suspects that failed beside a good node of another rack whose link to theirs no passing
    # group ever crossed: a fault between the two racks would look the same
    beside_other_racks: tuple[str, ...] = ()

    @property
    def passed(self) -> bool:
        return not self.suspects and not self.boundaries

    @property
    def without_nvlink(self) -> tuple[str, ...]:
        """Suspects that passed the NVLink screen and failed the one with NVLink off."""
        return tuple(
            node
            for step in self.rounds
            if step.stage == NVLINK_OFF_STAGE
            for (node,), ok in zip(step.groups, step.passed, strict=True)
            if not ok
        )


@dataclass
class IsolationPlan:
    """next_round() gives the groups to run; record() takes which passed; done when None."""

    nodes: Sequence[str]
    topology: Mapping[str, str] = field(default_factory=dict)  # node -> rack (or switch)
    nvlink_off: bool = False  # a second screen with NVLink off (nodes of several GPUs)
    rounds: list[Round] = field(default_factory=list)
    _stage: str = "screen"
    _pending: tuple[Group, ...] = ()
    _splits: dict[Group, tuple[Group, Group]] = field(default_factory=dict)
    _failing: list[Group] = field(default_factory=list)
    _to_confirm: list[str] = field(default_factory=list)
    _small: list[Group] = field(default_factory=list)  # failing groups confirmed node by node
    _failed_beside: list[tuple[str, str]] = field(default_factory=list)  # (suspect, partner)
    _good: list[str] = field(default_factory=list)
    suspects: list[str] = field(default_factory=list)
    boundaries: list[tuple[Group, Group]] = field(default_factory=list)
    _crossed: bool = False
    _suspects_before: int = 0  # suspects named before this pass's whole round

    def __post_init__(self) -> None:
        if len(set(self.nodes)) != len(self.nodes):
            raise ValueError("a node is named twice")

    def next_round(self) -> Round | None:
        if self._stage == "screen":
            groups: tuple[Group, ...] = tuple((node,) for node in self.nodes)
        elif self._stage == NVLINK_OFF_STAGE:
            groups = tuple((node,) for node in self.nodes if node not in self.suspects)
        elif self._stage == "whole":
            rest = tuple(n for n in self.nodes if n not in self.suspects)
            groups = (rest,) if len(rest) >= 2 else ()
        elif self._stage == "bisect":
            self._splits = {group: self._halves(group) for group in self._failing}
            groups = tuple(half for pair in self._splits.values() for half in pair)
        elif self._stage == "confirm":
            groups = self._confirm_pairs()
        else:
            return None
        if not groups:
            self._advance(())
            return self.next_round()
        self._pending = groups
        return Round(len(self.rounds) + 1, self._stage, groups)

    def record(self, passed: Sequence[bool]) -> None:
        if len(passed) != len(self._pending):
            raise ValueError(f"{len(passed)} results for {len(self._pending)} groups")
        self.rounds.append(
            Round(len(self.rounds) + 1, self._stage, self._pending, tuple(bool(p) for p in passed))
        )
        self._advance(tuple(bool(p) for p in passed))

    # --- the stages -------------------------------------------------------------------------

    def _advance(self, passed: tuple[bool, ...]) -> None:
        groups = self._pending
        self._pending = ()
        if self._stage in ("screen", NVLINK_OFF_STAGE):
            self.suspects += [g[0] for g, ok in zip(groups, passed, strict=True) if not ok]
            self._stage = (
                NVLINK_OFF_STAGE if self._stage == "screen" and self.nvlink_off else "whole"
            )
        elif self._stage == "whole":
            self._suspects_before = len(self.suspects)
            if groups and not passed[0]:
                self._failing = []
                self._failed(groups[0], self._failing)
                self._stage = "bisect" if self._failing else "confirm"
            else:
                self._good += list(groups[0]) if groups else []
                self._stage = "done"
        elif self._stage == "bisect":
            result = dict(zip(groups, passed, strict=True))
            failing: list[Group] = []
            for first, second in self._splits.values():
                ok_first, ok_second = result[first], result[second]
                for half, ok in ((first, ok_first), (second, ok_second)):
                    if ok:
                        self._good += half
                    else:
                        self._failed(half, failing)
                if ok_first and ok_second:
                    self.boundaries.append((first, second))
            self._failing = failing
            self._stage = "bisect" if failing else "confirm"
        elif self._stage == "confirm":
            crossing = bool(groups) and all(g[1] in self._to_confirm for g in groups)
            for group, ok in zip(groups, passed, strict=True):
                if crossing:  # a pair of nodes both still to confirm: a pass clears both
                    if ok:
                        self._good += group
                        self._to_confirm = [n for n in self._to_confirm if n not in group]
                    continue
                suspect, partner = group
                self._to_confirm.remove(suspect)
                if not ok:
                    self.suspects.append(suspect)
                    self._failed_beside.append((suspect, partner))
            if not self._to_confirm:
                # New suspects and no fault between groups: the rest once more as one job, which
                # passes unless a fault the suspects hid is left (a rack's uplink behind a bad
                # node of that rack fails only groups the node already fails); found, it is
                # searched for as the first was. A fault between groups would fail it again.
                again = len(self.suspects) > self._suspects_before and not self._between()
                self._stage = "whole" if again else "done"

    def _failed(self, group: Group, failing: list[Group]) -> None:
        """A failing group of three or fewer is confirmed node by node (its halves would hold
        one node, whose test alone says nothing between nodes); a larger one is split again."""
        if len(group) <= SMALLEST_SPLIT:
            self._to_confirm += group
            self._small.append(group)
        else:
            failing.append(group)

    def _halves(self, group: Group) -> tuple[Group, Group]:
        """Two halves of a failing group: along racks when it spans several (a rack or a spine
        fault then shows as one half failing, or as a boundary), else down the middle."""
        racks: dict[str, list[str]] = {}
        for node in group:
            racks.setdefault(self.topology.get(node, ""), []).append(node)
        if len(racks) > 1:
            ordered = sorted(racks.values(), key=len, reverse=True)
            first: list[str] = []
            second: list[str] = []
            for members in ordered:  # the larger racks first, each to the lighter half
                (first if len(first) <= len(second) else second).extend(members)
            if min(len(first), len(second)) >= 2:
                return tuple(first), tuple(second)
        middle = len(group) // 2
        return group[:middle], group[middle:]

    def _confirm_pairs(self) -> tuple[Group, ...]:
        """Each node still to confirm beside its own known-good node, as many as there are good
        nodes (the rest wait for the next round); with no good node at all, every node left is a
        suspect (nothing was ever seen to work to hold it against)."""
        # a node of a group failing in a later pass is no partner until it is cleared again
        unconfirmed = set(self._to_confirm)
        good = [
            n for n in dict.fromkeys(self._good) if n not in self.suspects and n not in unconfirmed
        ]
        if not good and not self._crossed and len(self._to_confirm) >= 3:
            # no node was ever seen to pass beside another (a small job): pair them across the
            # groups they failed in, once; a pair that passes clears both
            self._crossed = True
            waiting = self._to_confirm
            half = (len(waiting) + 1) // 2
            return tuple(zip(waiting[:half], waiting[half:], strict=False))
        if not good:
            # nothing to hold a suspect against: every node left is one, said as such
            self.suspects += self._to_confirm
            self._to_confirm = []
            return ()
        pairs: list[Group] = []
        for node in self._to_confirm:
            if not good:
                break  # the rest wait for the next round, with the same partners free again
            rack = self.topology.get(node)
            # a partner in the node's own rack, so that a fault between racks is not laid on it
            partner = next((g for g in good if self.topology.get(g) == rack), good[0])
            good.remove(partner)
            pairs.append((node, partner))
        return tuple(pairs)

    def _between(self) -> tuple[tuple[Group, Group], ...]:
        """The faults between groups: halves that passed apart and failed together, and small
        groups that failed though each of their nodes passed beside a good one."""
        cleared = [g for g in self._small if not any(n in self.suspects for n in g)]
        return tuple(self.boundaries) + tuple(self._apart(g) for g in cleared)

    def _apart(self, group: Group) -> tuple[Group, Group]:
        """A small group that failed though each of its nodes passed beside a good node, as the
        two sides of the fault between them: its first node's rack and the rest when it spans
        racks, else down the middle."""
        rack = self.topology.get(group[0])
        first = tuple(n for n in group if self.topology.get(n) == rack)
        if len(first) == len(group):
            first = group[: len(group) // 2]
        return first, tuple(n for n in group if n not in first)

    def result(self) -> Isolation:
        racks: dict[str, list[str]] = {}
        for node in self.nodes:
            if node in self.topology:
                racks.setdefault(self.topology[node], []).append(node)
        whole_racks = tuple(
            sorted(
                rack
                for rack, members in racks.items()
                if len(members) >= 2 and all(m in self.suspects for m in members)
            )
        )
        return Isolation(
            tuple(dict.fromkeys(self.suspects)),
            self._between(),
            whole_racks,
            tuple(self.rounds),
            self._unproven_links(),
        )

    def _unproven_links(self) -> tuple[str, ...]:
        """Suspects that failed beside a node of another rack, where no group that held nodes
        of both racks ever passed (a lone node of a rack, or a rack whose every node was in the
        failing group): the node's own fault or the racks' link, the data cannot tell."""
        crossed: set[frozenset[str]] = set()
        for step in self.rounds:
            for group, ok in zip(step.groups, step.passed, strict=True):
                racks = {self.topology[n] for n in group if n in self.topology}
                if ok and len(group) >= 2:
                    crossed.update(frozenset((a, b)) for a in racks for b in racks if a != b)
        unproven = []
        for suspect, partner in self._failed_beside:
            mine, theirs = self.topology.get(suspect), self.topology.get(partner)
            if mine and theirs and mine != theirs and frozenset((mine, theirs)) not in crossed:
                unproven.append(suspect)
        return tuple(unproven)


def isolate(
    nodes: Sequence[str],
    run_round: Callable[[tuple[Group, ...]], Sequence[bool]],
    topology: Mapping[str, str] | None = None,
    *,
    nvlink_off: bool = False,
) -> Isolation:
    """Run the plan to its end with `run_round` (the groups of one round, at once -> passed)."""
    plan = IsolationPlan(nodes, dict(topology or {}), nvlink_off)
    while (step := plan.next_round()) is not None:
        plan.record(run_round(step.groups))
    return plan.result()


def round_ceiling(nodes: int, bad: int) -> int:
    """The issue's target: k bad nodes found in at most 2 k ceil(log2 N) + k rounds."""
    return 2 * bad * math.ceil(math.log2(max(nodes, 2))) + bad


# A round's group runs its collectives in children with a deadline (distributed/
# group_children.py): a group that has not finished in ROUND_FLOOR_FACTOR times what its traffic
# takes at the floor is far below the floor, whatever it would have measured; ROUND_SLACK_SECONDS
# covers what is not traffic (buffers, the exactness checks' compares, a loaded host).
ROUND_FLOOR_FACTOR = 4.0
ROUND_SLACK_SECONDS = 10.0


def round_work_seconds(
    nbytes: int, check_iterations: int, warmup: int, repeats: int, floor_gbps: float
) -> float:
    """Seconds a round's group may take for its collectives once joined: all-reduce, all-gather
    and all-to-all, each for its check, warm-up and timed calls on at most `nbytes`, whose bus
    traffic per rank is at most 2 x nbytes (nccl-tests' all-reduce factor 2(n-1)/n)."""
    calls = 3 * (check_iterations + warmup + repeats)
    at_floor = calls * 2 * nbytes / (floor_gbps * 1e9)
    return ROUND_SLACK_SECONDS + ROUND_FLOOR_FACTOR * at_floor


def group_passes(
    figures: list[Any], floor: float, nodes: int, others: Mapping[str, float] | None = None
) -> tuple[bool, str]:
    """Whether one group's collectives passed, and what they measured (or why they failed): the
    all-reduce exact and, across nodes, at 0.9 x the floor; all-gather and all-to-all (where
    the round ran them) exact and, across nodes, at 0.9 x the operator's floor for each in
    `others` ("all_gather" -> GB/s; none is published: sweeps/collectives.py), their bus
    bandwidth said beside it."""
    from gpuaccept.distributed.local_ranks import lost_a_peer
    from gpuaccept.sweeps.collectives import (
        MIN_BUSBW_TOLERANCE,
        OTHER_FLOOR_OPTIONS,
        below_min_busbw,
    )

    errors = [f or "no figure" for f in figures if isinstance(f, str) or f is None]
    if errors:
        # a rank's own error before its peers' echoes of it ("Connection closed by peer")
        return False, f"did not complete: {min(errors, key=lost_a_peer)}"
    figure = figures[0]
    wrong = [f"{figure.wrong_elements} wrong element(s)"] if figure.wrong_elements else []
    wrong += [
        f"{o.collective}: {o.wrong_elements} wrong element(s)"
        for o in figure.others
        if o.wrong_elements
    ]
    if wrong:
        return False, "; ".join(wrong)
    said = ", ".join(f"{o.collective} {o.busbw_gbps:.3g}" for o in figure.others)
    said = f"; {said} GB/s" if said else ""
    if nodes < 2:
        return True, f"exact, {figure.busbw_gbps:.3g} GB/s within the node{said}"
    others = others or {}
    below = [
        f"{o.collective} busbw {o.busbw_gbps:.3g} GB/s below {MIN_BUSBW_TOLERANCE:g} x "
        f"{OTHER_FLOOR_OPTIONS[o.collective]} {others[o.collective]:g}"
        for o in figure.others
        if below_min_busbw(o.busbw_gbps, others.get(o.collective))
    ]
    if below_min_busbw(figure.busbw_gbps, floor):
        below.insert(
            0,
            f"busbw {figure.busbw_gbps:.3g} GB/s below {MIN_BUSBW_TOLERANCE:g} x --min-busbw "
            f"{floor:g}",
        )
    if below:
        return False, "; ".join(below)
    return True, f"exact, busbw {figure.busbw_gbps:.3g} GB/s{said}"


def round_evidence(
    step: Round, group: Group, passed: bool, said: str, **more: Any
) -> dict[str, Any]:
    """One group's entry in the isolation's evidence: its round, stage, nodes and outcome."""
    return {
        "round": step.number,
        "stage": step.stage,
        "nodes": list(group),
        "passed": passed,
        "said": said,
        **more,
    }


@dataclass(frozen=True)
class NotScreened:
    """Why a node's NVLink-off screen could not run: that node passes the round, said so (a
    screen that cannot run says nothing about the node)."""

    reason: str


def node_alone_passes(outcome: Any, floor: float) -> tuple[bool, str]:
    """Whether one node's own all-reduce (a figure, an error's text, or NotScreened) passed."""
    if isinstance(outcome, NotScreened):
        return True, f"not screened: {outcome.reason}"
    return group_passes([outcome], floor, 1)


def judge_isolation(
    isolation: Isolation, evidence: list[dict[str, Any]], floor: float, nodes: int
) -> CheckResult:
    """The verdict of `accept --isolate`: the suspects (and the switches all of whose nodes
    are), the faults between groups that pass alone, the rounds it took, each round's groups as
    evidence."""
    rounds = len(isolation.rounds)
    details = {
        "suspects": list(isolation.suspects),
        "without_nvlink": list(isolation.without_nvlink),
        "boundaries": [[list(a), list(b)] for a, b in isolation.boundaries],
        "racks": list(isolation.racks),
        "beside_other_racks": list(isolation.beside_other_racks),
        "rounds": rounds,
        "pairwise_rounds": nodes - 1 if nodes % 2 == 0 else nodes,
        "min_busbw_gbps": floor,
        "evidence": evidence,
    }
    said = []
    if isolation.racks:
        said.append(f"every node under {', '.join(isolation.racks)} fails: the switch, not nodes")
    if isolation.suspects:
        plain = f"suspect node(s): {', '.join(isolation.suspects)}"
        if isolation.without_nvlink:
            plain += (
                f" ({', '.join(isolation.without_nvlink)} alone only with NVLink off: the "
                "PCIe or host-memory path between its GPUs)"
            )
        if isolation.beside_other_racks:
            plain += (
                f" ({', '.join(isolation.beside_other_racks)} failed beside a node of another "
                "rack, over a link between the racks no passing group crossed: a fault of that "
                "link would look the same)"
            )
        said.append(plain)
    for first, second in isolation.boundaries:
        said.append(
            f"{len(first)} and {len(second)} node(s) pass apart and fail together: a fault "
            f"between them ({first[0]}... | {second[0]}...)"
        )
    return CheckResult(
        name="isolation",
        area="COLLECTIVES",
        status=Status.FAIL if said else Status.PASS,
        message=f"{'; '.join(said)} ({rounds} rounds)"
        if said
        else f"all {nodes} nodes together at {MIN_BUSBW_NOTE} {floor:g} GB/s ({rounds} rounds)",
        details=details,
    )


MIN_BUSBW_NOTE = "0.9 x --min-busbw"
