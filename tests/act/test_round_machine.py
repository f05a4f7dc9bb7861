"""The action layer as a state machine (issue #49 §6): long random sequences of rounds, nodes and
operator actions, with the invariants of act/rounds.py held after every step.

The cluster is kept abstractly (each node free, gpuaccept's drain, an administrator's drain, DOWN,
DOWN over gpuaccept's drain, in maintenance) and shown to the decision twice: as `sinfo -O` lines
for Slurm (act.slurm.parse_sinfo) and as `kubectl get nodes -o json` for Kubernetes
(act.kubernetes.parse_nodes), so that the parsers of both edges are in the loop. The decisions
are carried out on the abstract cluster as `scontrol` would."""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from gpuaccept.act.kubernetes import REASON_KEY, TAINTED_AT_KEY, parse_nodes
from gpuaccept.act.ledger import Ledger
from gpuaccept.act.policy import Decision, Guard
from gpuaccept.act.rounds import NodeRun, decide_round
from gpuaccept.act.slurm import parse_sinfo
from gpuaccept.report.node_verdict import TAINT_KEY

START = datetime(2026, 11, 1, 0, 0, 0)
GUARD = Guard(share=0.2, minutes=60.0)  # limit: max(1, floor(0.2 x nodes))
KINDS = ("free", "ours", "admin", "down", "down-ours", "maint")
NOT_OURS = ("admin", "down", "down-ours", "maint")
CHECKS = ("compute", "memory", "events")
STACKS = ("aaaaaaaa", "bbbbbbbb")


@dataclass(frozen=True)
class Node:
    kind: str = "free"
    reason: str = ""  # gpuaccept's or the administrator's
    at: datetime | None = None


def slurm_view(cluster: dict[str, Node]) -> str:
    lines = []
    for name, node in cluster.items():
        state = {
            "free": "idle",
            "ours": "idle+drain",
            "admin": "idle+drain",
            "down": "down",
            "down-ours": "down+drain",
            "maint": "idle+maintenance",
        }[node.kind]
        reason = node.reason or "none"
        when = node.at.isoformat(timespec="seconds") if node.at else "Unknown"
        lines.append(f"{name:<20}|{state:<30}|{when:<25}|{reason}")
    return "\n".join(lines)


def kube_view(cluster: dict[str, Node]) -> str:
    items = []
    for name, node in cluster.items():
        taints: list[dict[str, str]] = []
        annotations: dict[str, str] = {}
        unschedulable = False
        if node.kind in ("ours", "down-ours"):
            taints.append({"key": TAINT_KEY, "value": "x", "effect": "NoSchedule"})
            annotations[REASON_KEY] = node.reason
            assert node.at is not None
            annotations[TAINTED_AT_KEY] = node.at.replace(tzinfo=UTC).isoformat()
        if node.kind in ("down", "down-ours"):
            taints.append({"key": "node.kubernetes.io/unreachable", "effect": "NoExecute"})
        if node.kind == "admin":
            unschedulable = True
        if node.kind == "maint":
            taints.append({"key": "ToBeDeletedByClusterAutoscaler", "effect": "NoSchedule"})
        # a GPU pool's placement taint on every node: never a hold
        taints.append({"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"})
        items.append(
            {
                "kind": "Node",
                "metadata": {"name": name, "labels": {}, "annotations": annotations},
                "spec": {"taints": taints, "unschedulable": unschedulable},
            }
        )
    return json.dumps({"kind": "NodeList", "items": items})


def essence(decision: Decision) -> tuple[object, ...]:
    return (
        decision.node,
        decision.action,
        decision.guard,
        decision.reason,
        decision.trips,
        decision.regression,
    )


runs = st.lists(
    st.tuples(
        st.integers(0, 7),  # the node, modulo the cluster's size
        st.sampled_from(("pass", "fail", "fail", "not-judged")),
        st.sampled_from(("quick", "standard")),
        st.sets(st.sampled_from(CHECKS), min_size=1, max_size=2),
        st.sampled_from(STACKS),
        st.sampled_from(("drain", "reboot-node", "rerun")),
        st.integers(0, 1),
    ),
    min_size=1,
    max_size=6,
)


class Fleet(RuleBasedStateMachine):
    @initialize(size=st.integers(3, 8))
    def start(self, size: int) -> None:
        self.cluster = {f"n{i}": Node() for i in range(size)}
        self.ledger = Ledger()
        self.now = START
        self.drains: list[tuple[datetime, str]] = []  # every drain gpuaccept made
        self.expect_tripped = False  # a breaker refusal happened and no person reset it since
        self.reset_at: datetime | None = None  # a person's last reset: the count starts afresh
        self.expect_held: set[str] = set()  # stacks found regressed and not cleared by a person

    def _round(self, chosen: list[NodeRun]) -> None:
        before = dict(self.cluster)
        slurm = decide_round(
            chosen, parse_sinfo(slurm_view(self.cluster)), self.ledger, self.now, GUARD
        )
        aware = self.now.replace(tzinfo=UTC)
        kube_nodes = [n.sched_node() for n in parse_nodes(json.loads(kube_view(self.cluster)), "x")]
        kube = decide_round(chosen, kube_nodes, self.ledger, aware, GUARD)
        # 4. the same decisions for Slurm and Kubernetes given the same state
        assert [essence(d) for d in slurm.decisions] == [essence(d) for d in kube.decisions]
        was_tripped = self.ledger.tripped is not None
        for run, decision in zip(chosen, slurm.decisions, strict=True):
            node = before[run.node]
            # 1. a node that is not gpuaccept's is never drained, resumed or re-reasoned
            if node.kind in NOT_OURS:
                assert decision.action in ("none", "refused"), (node, decision)
            if decision.action == "drain":
                assert not was_tripped  # 2. none while the breaker is tripped
                self.cluster[run.node] = Node("ours", decision.reason, self.now)
                self.drains.append((self.now, run.node))
            elif decision.action == "resume":
                assert node.kind == "ours"
                self.cluster[run.node] = Node()
            # 6. the return to service is never held back by the breaker
            if (
                node.kind == "ours"
                and run.verdict == "pass"
                and run.level == "standard"
                and self.cluster[run.node] is node  # the round did not drain it before
            ):
                assert decision.action == "resume", decision
        # 3. no round resets a tripped breaker; a refusal by the breaker trips it
        if was_tripped:
            assert slurm.ledger.tripped == self.ledger.tripped
        if any(d.guard == "breaker" for d in slurm.decisions):
            self.expect_tripped = True
        # a regression found is held until a person clears it
        self.expect_held |= {d.regression for d in slurm.decisions if d.regression}
        self.ledger = slurm.ledger
        # 5. replaying the round on the state it left changes nothing
        again = decide_round(
            chosen, parse_sinfo(slurm_view(self.cluster)), self.ledger, self.now, GUARD
        )
        assert all(d.action not in ("drain", "resume") for d in again.decisions), again.decisions
        assert again.ledger == self.ledger

    @rule(drawn=runs)
    def a_round(self, drawn: list[tuple[int, str, str, set[str], str, str, int]]) -> None:
        names = list(self.cluster)
        chosen, seen = [], set()
        for index, verdict, level, checks, stack, action, repeats in drawn:
            name = names[index % len(names)]
            if name in seen:  # one verdict a node a round: its newest
                continue
            seen.add(name)
            failed = tuple(sorted(checks)) if verdict == "fail" else ()
            chosen.append(NodeRun(name, verdict, level, failed, stack, action, repeats))  # type: ignore[arg-type]
        self._round(chosen)

    @rule(index=st.integers(0, 7), kind=st.sampled_from(("admin", "down", "maint")))
    def an_administrator_takes_a_node(self, index: int, kind: str) -> None:
        name = list(self.cluster)[index % len(self.cluster)]
        node = self.cluster[name]
        if kind == "down" and node.kind == "ours":
            self.cluster[name] = replace(node, kind="down-ours")
        elif kind == "admin":
            self.cluster[name] = Node("admin", "admin: DIMM swap", self.now)
        else:
            self.cluster[name] = Node(kind, "admin: down" if kind == "down" else "")

    @rule(index=st.integers(0, 7))
    def an_administrator_resumes_a_node(self, index: int) -> None:
        name = list(self.cluster)[index % len(self.cluster)]
        self.cluster[name] = Node()  # scontrol RESUME clears DRAIN, DOWN and the reason

    @rule(minutes=st.sampled_from((1, 10, 30, 61, 240)))
    def time_passes(self, minutes: int) -> None:
        self.now += timedelta(minutes=minutes)

    @rule()
    def a_person_resets_the_breaker(self) -> None:
        if self.ledger.tripped is not None:
            self.ledger = self.ledger.reset(self.now, "operator", "fleet checked")
            assert self.ledger.tripped is None
            self.expect_tripped = False
            self.reset_at = self.now

    @rule(stack=st.sampled_from(STACKS))
    def a_person_clears_a_regression(self, stack: str) -> None:
        if stack in self.ledger.held_regressions():
            self.ledger = self.ledger.clear_regression(self.now, stack, "operator", "fixed")
            self.expect_held.discard(stack)

    @invariant()
    def the_breaker_and_the_regressions_hold_until_a_person_acts(self) -> None:
        assert (self.ledger.tripped is not None) == self.expect_tripped
        assert set(self.ledger.held_regressions()) == self.expect_held

    @invariant()
    def drains_in_any_window_stay_within_the_breaker(self) -> None:
        # 2. within the breaker's window ending now, at most its limit of drains (counted from a
        # person's reset, when one came within the window: they vouched for those before it)
        since = self.now - timedelta(minutes=GUARD.minutes)
        if self.reset_at is not None:
            since = max(since, self.reset_at)
        recent = [name for at, name in self.drains if at >= since]
        assert len(recent) <= GUARD.limit(len(self.cluster)), recent


TestFleet = Fleet.TestCase
TestFleet.settings = settings(
    max_examples=60,
    stateful_step_count=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
