"""Kubernetes' side of acting on a verdict (issue #31 §2, §3): the same guards as `act slurm`
(`act.policy.decide`: debounce, the regression rule, the circuit breaker, return to service only
of gpuaccept's own taint after a pass at the resume level) over the cluster's nodes, read from
`kubectl get nodes -o json` or the API.

Kubernetes keeps no drain reason with a time as Slurm does, so gpuaccept writes its own beside
its taint: the annotation `gpuaccept.io/reason` holds the reason in Slurm's form (`gpuaccept
LEVEL: ACTION: CHECKS [stack DIGEST]`: the regression rule reads its stack tag) and
`gpuaccept.io/tainted-at` when it was set (taints carry `timeAdded` only with the NoExecute
effect: kubernetes/api core/v1 types.go, Taint.TimeAdded). A node is out of service for the
guards when it carries gpuaccept's taint (gpuaccept's, whatever the annotations say) or is
cordoned (`spec.unschedulable`: someone else's; a pass never uncordons it).

Only its own (issue #49 §1): a node that someone else took out of service, cordoned (NVSentinel
cordons, so does `kubectl drain`), tainted NoExecute, or tainted by the node lifecycle controller,
a cloud provider or the cluster autoscaler (`_takes_out_of_service`), is never tainted by
gpuaccept nor re-reasoned; its labels still record the run (they are gpuaccept's, and change no
scheduling). A pool's placement taints (NoSchedule, e.g. `nvidia.com/gpu`) do not hold a node.
Where gpuaccept's own taint is there too, it stays until they release the node (a pass then lifts
it), as it does under Slurm's DOWN: the two schedulers are decided alike (act.rounds).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from gpuaccept.act import rounds
from gpuaccept.act.ledger import Ledger
from gpuaccept.act.offenders import DEFAULT_DAYS, DEFAULT_INSPECT, DEFAULT_LIMIT, Offence
from gpuaccept.act.policy import Decision, Guard, SchedNode
from gpuaccept.act.repeats import NodePast, node_past
from gpuaccept.act.rounds import NodeRun
from gpuaccept.errors import EnvironmentProblem, InputError
from gpuaccept.record.environment import stack_sha256
from gpuaccept.report.node_verdict import PREFIX, TAINT_KEY, NodeVerdict
from gpuaccept.results import RunReport

REASON_KEY = f"{PREFIX}/reason"
TAINTED_AT_KEY = f"{PREFIX}/tainted-at"
# `kubectl get nodes -o json` of 5,000 nodes (Kubernetes' tested limit) is about 100 MB with
# their images lists; a file past this is not a node list
MAX_CLUSTER_BYTES = 256 * 1024 * 1024
CORDONED = "cordoned (spec.unschedulable)"
# Taints that say someone else took the node out of service, as opposed to placement taints a
# GPU pool carries for good (`nvidia.com/gpu=present:NoSchedule` keeps other pods off every
# healthy GPU node of many clusters). Out of service: any NoExecute taint (it evicts running
# pods), and the NoSchedule taints of the node lifecycle controller and cloud providers
# (`node.kubernetes.io/*`: not-ready, unreachable, unschedulable, out-of-service, the pressure
# conditions; `node.cloudprovider.kubernetes.io/*`: uninitialized, shutdown) and of the cluster
# autoscaler draining a node (`ToBeDeletedByClusterAutoscaler`), as Kubernetes' "Well-Known
# Labels, Annotations and Taints" reference lists them.
OUT_OF_SERVICE_TAINT_PREFIXES = ("node.kubernetes.io/", "node.cloudprovider.kubernetes.io/")
OUT_OF_SERVICE_TAINTS = frozenset({"ToBeDeletedByClusterAutoscaler"})
# NVSentinel's fault-quarantine taint, whatever its effect: its quarantine may taint without a
# cordon (its own tests expect `AggregatedNodeHealth=False:NoSchedule` after an XID 79:
# NVIDIA/NVSentinel tests/fault_quarantine_special_modes_test.go at 4c391d36, TestDryRunMode)
QUARANTINE_TAINTS = frozenset({"AggregatedNodeHealth"})


def _takes_out_of_service(taint: dict[str, Any]) -> bool:
    key = str(taint["key"])
    if key == TAINT_KEY:
        return False
    if taint.get("effect") == "NoExecute" or key in QUARANTINE_TAINTS:
        return True
    return taint.get("effect") == "NoSchedule" and (
        key in OUT_OF_SERVICE_TAINTS or key.startswith(OUT_OF_SERVICE_TAINT_PREFIXES)
    )


@dataclass(frozen=True)
class KubeNode:
    name: str
    labels: dict[str, str]
    annotations: dict[str, str]
    taints: tuple[str, ...]  # their keys
    unschedulable: bool
    # the keys of others' taints that took the node out of service (_takes_out_of_service)
    others: tuple[str, ...] = ()

    @property
    def tainted_by_gpuaccept(self) -> bool:
        return TAINT_KEY in self.taints

    def held(self) -> str:
        """Why someone else holds the node ("" when no one does)."""
        if self.others:
            return f"tainted by another controller ({', '.join(self.others[:3])})"
        return CORDONED if self.unschedulable else ""

    def sched_node(self) -> SchedNode:
        """The node as the guards see it (act.policy's view of a Slurm node)."""
        held = self.held()
        if self.tainted_by_gpuaccept:
            # someone else holding it too (a cordon, their taint) holds it whole: gpuaccept's
            # taint stays until they release it, as Slurm's DOWN over gpuaccept's DRAIN does
            said = self.annotations.get(REASON_KEY, "")
            when = _when(self.annotations)
            return SchedNode(self.name, True, said, when, ours=True, held=held)
        return SchedNode(self.name, bool(held), held, None, ours=False, held=held)

    def in_pool(self, selector: dict[str, str]) -> bool:
        return all(self.labels.get(key) == value for key, value in selector.items())


def _when(annotations: dict[str, str]) -> datetime | None:
    """When gpuaccept tainted the node; None when unsaid or unreadable (the breaker then counts
    the taint as recent: it errs on the side of tainting less)."""
    try:
        when = datetime.fromisoformat(annotations.get(TAINTED_AT_KEY, ""))
    except ValueError:
        return None
    return when if when.tzinfo else when.replace(tzinfo=UTC)


def _strings(value: object, where: str) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in value.items()
    ):
        raise InputError(f"{where}: not a map of strings")
    return dict(value)


def _node(item: object, where: str) -> KubeNode:
    if not isinstance(item, dict) or item.get("kind", "Node") != "Node":
        raise InputError(f"{where}: not a Node")
    metadata, spec = item.get("metadata"), item.get("spec") or {}
    if not isinstance(metadata, dict) or not isinstance(metadata.get("name"), str):
        raise InputError(f"{where}: a Node without metadata.name")
    if not isinstance(spec, dict):
        raise InputError(f"{where}: spec is not a map")
    name = metadata["name"]
    taints = spec.get("taints") or []
    if not isinstance(taints, list) or not all(
        isinstance(t, dict) and isinstance(t.get("key"), str) for t in taints
    ):
        raise InputError(f"{where} ({name}): spec.taints is not a list of taints")
    unschedulable = spec.get("unschedulable", False)
    if not isinstance(unschedulable, bool):
        raise InputError(f"{where} ({name}): spec.unschedulable is not true or false")
    return KubeNode(
        name=name,
        labels=_strings(metadata.get("labels"), f"{where} ({name}): metadata.labels"),
        annotations=_strings(metadata.get("annotations"), f"{where} ({name}): annotations"),
        taints=tuple(t["key"] for t in taints),
        unschedulable=unschedulable,
        others=tuple(t["key"] for t in taints if _takes_out_of_service(t)),
    )


def parse_nodes(document: object, shown: str) -> list[KubeNode]:
    """The nodes of a NodeList (`kubectl get nodes -o json`: kind List or NodeList)."""
    if not isinstance(document, dict) or document.get("kind") not in ("List", "NodeList"):
        raise InputError(f"{shown}: not a node list (give `kubectl get nodes -o json`)")
    items = document.get("items")
    if not isinstance(items, list):
        raise InputError(f"{shown}: items is not a list")
    nodes = [_node(item, f"{shown}: items[{i}]") for i, item in enumerate(items)]
    names = [n.name for n in nodes]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise InputError(f"{shown}: node {twice[0]} is listed twice")
    return nodes


def read_cluster_file(path: Path) -> list[KubeNode]:
    from gpuaccept.input_files import read_input_bytes

    shown = f"--cluster {path}"
    data = read_input_bytes(path, "cluster", MAX_CLUSTER_BYTES)
    try:
        document = json.loads(data)
    except (ValueError, RecursionError) as error:  # UnicodeDecodeError is a ValueError
        raise InputError(f"{shown}: not JSON: {error}") from None
    return parse_nodes(document, shown)


def _client(
    needed_by: str = "--apply", otherwise: str = " (or run the printed kubectl commands)"
) -> tuple[Any, Any]:
    """(the kubernetes module's client, its CoreV1Api), configured in-cluster, else from the
    kubeconfig; `needed_by` and `otherwise` say who asked and what else there is, when it is
    not installed."""
    try:
        from kubernetes import client, config  # type: ignore[import-not-found]
    except ImportError:
        raise EnvironmentProblem(
            f"{needed_by} needs the Kubernetes Python client: pip install kubernetes{otherwise}"
        ) from None
    try:
        config.load_incluster_config()
    except config.ConfigException:
        try:
            config.load_kube_config()
        except (config.ConfigException, OSError) as error:
            raise EnvironmentProblem(f"no Kubernetes configuration: {error}") from None
    return client, client.CoreV1Api()


def _api_error(error: Exception) -> EnvironmentProblem:
    status = getattr(error, "status", None)
    said = f"HTTP {status} {getattr(error, 'reason', '')}".strip() if status else str(error)
    return EnvironmentProblem(f"the Kubernetes API refused or did not answer: {said}")


def read_cluster_api() -> list[KubeNode]:
    """The cluster's nodes through the API, as `kubectl get nodes -o json` shows them."""
    client, api = _client()
    try:
        listed = api.list_node()
        document = client.ApiClient().sanitize_for_serialization(listed)
    except Exception as error:  # the client's ApiException, urllib3's, a refused connection
        raise _api_error(error) from None
    return parse_nodes({**document, "kind": "NodeList"}, "the Kubernetes API's node list")


def patch_for(verdict: NodeVerdict, taints: list[dict[str, Any]]) -> dict[str, Any]:
    """The strategic-merge patch of a verdict, given the node's current taints (camelCase, as
    the API serialises them)."""
    kept = [t for t in taints if t.get("key") != TAINT_KEY]
    if verdict.taint is not None:
        kept.append({"key": TAINT_KEY, "value": verdict.taint, "effect": "NoSchedule"})
    elif not verdict.remove_taint:
        kept = taints
    metadata: dict[str, Any] = {"labels": verdict.labels}
    if verdict.annotations:
        metadata["annotations"] = verdict.annotations  # a null value removes the key
    return {"metadata": metadata, "spec": {"taints": kept}}


def apply_verdict(verdict: NodeVerdict) -> None:
    """Make the change through the Kubernetes API (in-cluster, else the kubeconfig)."""
    client, api = _client()
    try:
        node = api.read_node(verdict.node)
        taints = client.ApiClient().sanitize_for_serialization(node.spec.taints or [])
        api.patch_node(verdict.node, patch_for(verdict, taints))
    except Exception as error:
        raise _api_error(error) from None


def guarded(verdict: NodeVerdict, decision: Decision, now: datetime) -> NodeVerdict:
    """The verdict's change as the guards decided it: the labels always (they record the run),
    the taint only as decided: set with its reason and time on a drain (the verdict's taint: a
    failure's), lifted with them on a resume (a pass at the resume level lifts it already),
    left as it is otherwise (a refusal, a debounced failure, someone else's cordon)."""
    if decision.action == "drain":
        said: dict[str, str | None] = {
            REASON_KEY: decision.reason,
            TAINTED_AT_KEY: now.isoformat(timespec="seconds"),
        }
        return replace(verdict, annotations=said)
    if decision.action == "resume":
        return replace(verdict, annotations={REASON_KEY: None, TAINTED_AT_KEY: None})
    return replace(verdict, taint=None, remove_taint=False)


@dataclass(frozen=True)
class KubeAction:
    """What the guards decided for one node: the change to make, why, and the offences that made
    its action replace."""

    change: NodeVerdict
    decision: Decision
    offences: tuple[Offence, ...] = ()


def decide_round(
    runs: list[tuple[NodeVerdict, RunReport]],
    chosen: list[NodeVerdict],
    nodes: list[KubeNode],
    now: datetime,
    guard: Guard,
    pool: dict[str, str] | None = None,
    replace_after: int = DEFAULT_LIMIT,
    replace_days: float = DEFAULT_DAYS,
    ledger: Ledger | None = None,
    inspect_after: int = DEFAULT_INSPECT,
) -> tuple[list[KubeAction], Ledger]:
    """The guarded change of each chosen verdict (the newest of its node), in order, against
    the cluster's `nodes` and gpuaccept's records (act.rounds.decide_round, as for Slurm): the
    breaker counts the nodes of the `pool` (labels that must match; every node when None) and
    the drains this round made before; the other reports among `runs` are the past (the
    debounce of the node's own, the escalation of its GPUs' on whichever host)."""
    state = {n.name: n for n in nodes}
    report_of = {id(verdict): report for verdict, report in runs}
    node_runs, pasts = [], []
    for verdict in chosen:
        if verdict.node not in state:
            raise InputError(
                f"node {verdict.node} is not among the cluster's nodes: give --node, or the "
                "cluster it is in"
            )
        report = report_of[id(verdict)]
        past = NodePast()
        if verdict.verdict == "fail":
            earlier = [r for _, r in runs if r is not report]
            past = node_past(
                report, earlier, guard.debounce_hours, replace_after, replace_days, inspect_after
            )
        pasts.append(past)
        node_runs.append(
            NodeRun(
                verdict.node,
                verdict.verdict,  # type: ignore[arg-type]
                report.level,
                tuple(report.verdict.failed_checks),
                stack_sha256(report.environment),
                past.action(report.action_plan.action.value),
                past.repeats,
                rounds.checks_run(report),
            )
        )
    in_pool = {n.name for n in nodes if n.in_pool(pool or {})}
    done = rounds.decide_round(
        node_runs, [n.sched_node() for n in nodes], ledger or Ledger(), now, guard, in_pool
    )
    decided = []
    for verdict, run, past, decision in zip(chosen, node_runs, pasts, done.decisions, strict=True):
        labels = dict(verdict.labels)
        if f"{PREFIX}/action" in labels:
            labels[f"{PREFIX}/action"] = run.action
        change = guarded(replace(verdict, labels=labels), decision, now)
        decided.append(KubeAction(change, decision, past.offences))
    return decided, done.ledger


def regressions(decided: list[KubeAction]) -> dict[str, list[str]]:
    """The nodes each stack's regression held back (stack digest -> node names, in order): one
    alert per stack, not one per node."""
    found: dict[str, list[str]] = {}
    for done in decided:
        if done.decision.regression:
            found.setdefault(done.decision.regression, []).append(done.change.node)
    return found
