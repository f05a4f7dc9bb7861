"""A run's verdict as Kubernetes node labels and a taint: the exact kubectl commands, or the
same change made through the Kubernetes API.

Only an `accept` report is read (a benchmark or a training run says nothing of a node's
fitness). pass on the GPUs: labels gpuaccept.io/verdict=pass (level, date), the gpuaccept.io/unfit
taint removed; fail (in any mode: a GPU node whose GPUs are unusable runs in CPU mode and fails
inventory): verdict=fail, gpuaccept.io/failed=<checks>, gpuaccept.io/action=<the recommended
action: reset-gpu, reboot-node, drain, replace...>, and the NoSchedule taint
gpuaccept.io/unfit=<checks>, so no new pod lands there; not judged, interrupted, or a pass of the
CPU twins: the labels say not-judged and the taint and the failed label are left as they are.
Given several reports of one node, only the newest (by start time, not file name) is applied.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime
from typing import Literal

from gpuaccept.errors import InputError
from gpuaccept.naming import run_title
from gpuaccept.results import RunReport
from gpuaccept.results import verdict_fitness as verdict_fitness
from gpuaccept.verdict import ACCEPT

PREFIX = "gpuaccept.io"
TAINT_KEY = f"{PREFIX}/unfit"
_NODE_NAME = re.compile(r"[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?")
_LABEL_VALUE = re.compile(r"[^A-Za-z0-9_.-]")


@dataclass(frozen=True)
class NodeVerdict:
    node: str
    verdict: str  # "pass", "fail", "not-judged"
    labels: dict[str, str | None]  # None: remove the label
    taint: str | None  # the unfit taint's value to set; None with remove_taint False: leave it
    remove_taint: bool
    started_at: str  # when the run began (ISO 8601): the newest report of a node wins
    note: str | None = None  # what was left as it is, and why (said on stderr)
    # set beside the taint by the guards (act.kubernetes): its reason and time; None removes
    annotations: dict[str, str | None] = field(default_factory=dict)


def node_of(report: RunReport) -> str | None:
    """The node a report is from: its one name (record/identity.py)."""
    from gpuaccept.record.identity import node_name_of

    return node_name_of(report)


def _label_value(text: str) -> str:
    """A valid label value: 63 characters of [A-Za-z0-9_.-], starting and ending alphanumeric."""
    return _LABEL_VALUE.sub("-", text)[:63].strip("-_.") or "none"


def fitness(report: RunReport) -> Literal["pass", "fail", "not-judged"]:
    """What an accept report says of its node: a failure in any mode (a node whose GPUs are
    unusable runs in CPU mode and fails inventory), a pass on the GPUs alone, else nothing."""
    return verdict_fitness(report.verdict)


def node_verdict(
    report: RunReport, node: str | None = None, resume_level: str = "standard"
) -> NodeVerdict:
    """The labels and taint a report puts on its node. A pass below `resume_level` lifts no
    taint and leaves the failed label (issue #31 §3, as `act slurm` returns a node: the quick
    check that found a fault is not the check that clears it)."""
    from gpuaccept.act.policy import returns_to_service

    verdict = report.verdict
    if verdict.kind != ACCEPT:
        raise InputError(
            f"a `{run_title(report)}` report says nothing of a node's fitness: node-verdict "
            "reads `gpuaccept accept` reports"
        )
    name = node or node_of(report)
    if not name or not _NODE_NAME.fullmatch(name):
        raise InputError(f"node name {name!r} is not a Kubernetes node name: give one with --node")
    failed = _label_value(".".join(verdict.failed_checks)) if verdict.failed_checks else None
    state = fitness(report)
    labels: dict[str, str | None] = {
        f"{PREFIX}/verdict": state,
        f"{PREFIX}/level": _label_value(report.level),
        f"{PREFIX}/checked": report.started_at[:10],
    }
    below = state == "pass" and not returns_to_service(report.level, resume_level)
    if state != "not-judged" and not below:  # a run that judged nothing changes nothing
        labels[f"{PREFIX}/failed"] = failed
        # what to do about the node (gpuaccept.actions), beside the checks it is for: a
        # selector for the repair queue
        labels[f"{PREFIX}/action"] = report.action_plan.action.value
    return NodeVerdict(
        node=name,
        verdict=state,
        labels=labels,
        taint=failed if state == "fail" else None,
        remove_taint=state == "pass" and not below,
        started_at=report.started_at,
        note=(
            f"passed {report.level}: the {TAINT_KEY} taint, if set, is lifted by a passing "
            f"{resume_level} run (k8s/accept-job.yaml tolerates it)"
            if below
            else None
        ),
    )


_RANK = {"fail": 2, "not-judged": 1, "pass": 0}  # on a tie, the more cautious verdict wins


def newest_per_node(verdicts: list[NodeVerdict]) -> tuple[list[NodeVerdict], list[NodeVerdict]]:
    """(the newest verdict of each node, in first-seen order; the older ones it supersedes).

    Report files are not in time order (on Kubernetes their names carry pod names), so an older
    pass applied after a newer failure would lift the taint the failure set. Two reports that
    started at the same instant are not ordered by their place on the command line: the failure
    wins (`tied`).
    """
    newest: dict[str, NodeVerdict] = {}
    for verdict in verdicts:
        kept = newest.get(verdict.node)
        if kept is None or _later(verdict, kept):
            newest[verdict.node] = verdict
    chosen = set(map(id, newest.values()))
    return list(newest.values()), [v for v in verdicts if id(v) not in chosen]


def _later(verdict: NodeVerdict, kept: NodeVerdict) -> bool:
    """Whether `verdict` supersedes `kept`: later, or at the same instant and more cautious."""
    if _moment(verdict) != _moment(kept):
        return _moment(verdict) > _moment(kept)
    return _RANK[verdict.verdict] > _RANK[kept.verdict]


def tied(verdicts: list[NodeVerdict]) -> list[tuple[NodeVerdict, NodeVerdict]]:
    """(applied, passed over) for each pair of one node's reports that started at the same
    instant with different verdicts (said, since the choice is a rule, not a time)."""
    found = []
    for chosen in newest_per_node(verdicts)[0]:
        found += [
            (chosen, other)
            for other in verdicts
            if other is not chosen
            and other.node == chosen.node
            and _moment(other) == _moment(chosen)
            and other.verdict != chosen.verdict
        ]
    return found


def _moment(verdict: NodeVerdict) -> datetime:
    return datetime.fromisoformat(verdict.started_at)


def kubectl_commands(verdict: NodeVerdict) -> list[list[str]]:
    """The kubectl commands that record the verdict on the node."""
    labels = [
        f"{key}={value}" if value is not None else f"{key}-"
        for key, value in verdict.labels.items()
    ]
    commands = [["kubectl", "label", "node", verdict.node, *labels, "--overwrite"]]
    if verdict.annotations:
        said = [
            f"{key}={value}" if value is not None else f"{key}-"
            for key, value in verdict.annotations.items()
        ]
        commands.append(["kubectl", "annotate", "node", verdict.node, *said, "--overwrite"])
    if verdict.taint is not None:
        commands.append(
            [
                "kubectl",
                "taint",
                "node",
                verdict.node,
                f"{TAINT_KEY}={verdict.taint}:NoSchedule",
                "--overwrite",
            ]
        )
    elif verdict.remove_taint:
        commands.append(["kubectl", "taint", "node", verdict.node, f"{TAINT_KEY}:NoSchedule-"])
    return commands
