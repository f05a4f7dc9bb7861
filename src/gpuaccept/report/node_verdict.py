"""A run's verdict as Kubernetes node labels and a taint: the exact kubectl commands, or the
same change made through the Kubernetes API.

pass: labels gpuaccept.io/verdict=pass (level, date), the gpuaccept.io/unfit taint removed;
fail: verdict=fail, gpuaccept.io/failed=<checks>, and the NoSchedule taint
gpuaccept.io/unfit=<checks>, so no new pod lands there; not judged: the labels say so and the
taint is left as it is.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from gpuaccept.errors import InputError
from gpuaccept.results import RunReport

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


def node_of(report: RunReport) -> str | None:
    """The scheduler's name for the node a report is from, else its hostname."""
    launch = report.environment.get("launch")
    if isinstance(launch, dict) and launch.get("node"):
        return str(launch["node"])
    scheduler = report.environment.get("scheduler")
    if isinstance(scheduler, dict) and scheduler.get("node_name"):
        return str(scheduler["node_name"])
    return report.hostname


def _label_value(text: str) -> str:
    """A valid label value: 63 characters of [A-Za-z0-9_.-], starting and ending alphanumeric."""
    return _LABEL_VALUE.sub("-", text)[:63].strip("-_.") or "none"


def node_verdict(report: RunReport, node: str | None = None) -> NodeVerdict:
    name = node or node_of(report)
    if not name or not _NODE_NAME.fullmatch(name):
        raise InputError(f"node name {name!r} is not a Kubernetes node name: give one with --node")
    failed = _label_value(".".join(report.failed_checks)) if report.failed_checks else None
    verdict = "fail" if failed else ("pass" if report.judged else "not-judged")
    labels: dict[str, str | None] = {
        f"{PREFIX}/verdict": verdict,
        f"{PREFIX}/level": _label_value(report.level),
        f"{PREFIX}/checked": report.started_at[:10],
        f"{PREFIX}/failed": failed,
    }
    return NodeVerdict(
        node=name,
        verdict=verdict,
        labels=labels,
        taint=failed,
        remove_taint=verdict == "pass",
    )


def kubectl_commands(verdict: NodeVerdict) -> list[list[str]]:
    """The kubectl commands that record the verdict on the node."""
    labels = [
        f"{key}={value}" if value is not None else f"{key}-"
        for key, value in verdict.labels.items()
    ]
    commands = [["kubectl", "label", "node", verdict.node, *labels, "--overwrite"]]
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


def patch_for(verdict: NodeVerdict, taints: list[dict[str, Any]]) -> dict[str, Any]:
    """The strategic-merge patch the commands amount to, given the node's current taints."""
    kept = [t for t in taints if t.get("key") != TAINT_KEY]
    if verdict.taint is not None:
        kept.append({"key": TAINT_KEY, "value": verdict.taint, "effect": "NoSchedule"})
    elif not verdict.remove_taint:
        kept = taints
    return {"metadata": {"labels": verdict.labels}, "spec": {"taints": kept}}


def apply_verdict(verdict: NodeVerdict) -> None:
    """Make the change through the Kubernetes API (in-cluster, else the kubeconfig)."""
    from gpuaccept.errors import EnvironmentProblem

    try:
        from kubernetes import client, config  # type: ignore[import-not-found]
    except ImportError:
        raise EnvironmentProblem(
            "--apply needs the Kubernetes Python client: pip install kubernetes "
            "(or run the printed kubectl commands)"
        ) from None
    try:
        config.load_incluster_config()
    except config.ConfigException:
        config.load_kube_config()
    api = client.CoreV1Api()
    node = api.read_node(verdict.node)
    taints = [t.to_dict() for t in (node.spec.taints or [])]
    api.patch_node(verdict.node, patch_for(verdict, taints))
