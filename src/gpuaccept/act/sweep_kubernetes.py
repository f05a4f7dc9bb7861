"""The sweep's side of Kubernetes (issue #54 §3): the nodes and their pools from the API (the same
reading of who holds a node as `node-verdict`'s: act.kubernetes), the nodes busy with others' GPU
pods, the sweep's own Jobs, and one Job per node from the site's template (k8s/sweep-job.yaml).
The round itself is act.sweep's, pure, the same as Slurm's."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

from gpuaccept.act.kubernetes import _api_error, _client, parse_nodes
from gpuaccept.act.sweep import SweepNode
from gpuaccept.errors import EnvironmentProblem, InputError

COMPONENT_KEY = "app.kubernetes.io/component"
COMPONENT = "sweep"
# the node a sweep Job tests: the queue says which nodes are under test, a pending Job included
NODE_KEY = "gpuaccept.io/sweep-node"
GPU = "nvidia.com/gpu"
MAX_TEMPLATE_BYTES = 1024 * 1024
# the sweep has no --apply and prints no kubectl commands: said as its own need
_NEEDED_BY = ("the Kubernetes sweep (--scheduler kubernetes)", "")


def read_template(path: Path) -> dict[str, Any]:
    """The Job document of the site's template (a manifest file; its other documents, such as
    the PriorityClass beside it, are the operator's to apply)."""
    from gpuaccept.input_files import read_input_bytes

    shown = f"--template {path}"
    data = read_input_bytes(path, "template", MAX_TEMPLATE_BYTES)
    try:
        import yaml  # type: ignore[import-untyped]  # the Kubernetes client's own dependency
    except ImportError:
        raise EnvironmentProblem(
            "the Kubernetes sweep needs the Kubernetes Python client: pip install kubernetes"
        ) from None
    try:
        documents = [d for d in yaml.safe_load_all(data) if d]
    except (yaml.YAMLError, RecursionError) as error:
        said = str(error).splitlines()[0] if str(error) else type(error).__name__
        raise InputError(f"{shown}: not YAML: {said}") from None
    jobs = [d for d in documents if isinstance(d, dict) and d.get("kind") == "Job"]
    if len(jobs) != 1:
        raise InputError(f"{shown}: holds {len(jobs)} Job(s); give a manifest with one")
    spec = jobs[0].get("spec", {}).get("template", {}).get("spec")
    if not isinstance(spec, dict) or not isinstance(spec.get("containers"), list):
        raise InputError(f"{shown}: its Job has no pod template with containers")
    return dict(jobs[0])


def _requests_gpus(pod: dict[str, Any]) -> bool:
    for container in pod.get("spec", {}).get("containers") or []:
        resources = container.get("resources") or {}
        for part in ("requests", "limits"):
            if str((resources.get(part) or {}).get(GPU, "0")) not in ("0", ""):
                return True
    return False


def busy_nodes(pods: dict[str, Any]) -> set[str]:
    """Nodes where a pod that is not the sweep's asks for GPUs and has not ended."""
    busy = set()
    for pod in pods.get("items") or []:
        labels = pod.get("metadata", {}).get("labels") or {}
        node = pod.get("spec", {}).get("nodeName")
        phase = pod.get("status", {}).get("phase")
        if not node or phase in ("Succeeded", "Failed") or labels.get(COMPONENT_KEY) == COMPONENT:
            continue
        if _requests_gpus(pod):
            busy.add(node)
    return busy


def running_jobs(jobs: dict[str, Any]) -> dict[str, str]:
    """node -> Job name of the sweep's Jobs that have not ended (no Complete or Failed
    condition that is True)."""
    found: dict[str, str] = {}
    for job in jobs.get("items") or []:
        metadata = job.get("metadata", {})
        node = (metadata.get("labels") or {}).get(NODE_KEY)
        conditions = job.get("status", {}).get("conditions") or []
        ended = any(
            c.get("type") in ("Complete", "Failed") and c.get("status") == "True"
            for c in conditions
        )
        if node and not ended:
            found.setdefault(node, str(metadata.get("name", "")))
    return found


def read_round(pool_label: str, namespace: str) -> tuple[list[SweepNode], dict[str, str]]:
    """The nodes (pool: the node's `pool_label` label) and the sweep's Jobs not yet ended."""
    client, core = _client(*_NEEDED_BY)
    try:
        serial = client.ApiClient().sanitize_for_serialization
        nodes = serial(core.list_node())
        pods = serial(core.list_pod_for_all_namespaces())
        jobs = serial(
            client.BatchV1Api().list_namespaced_job(
                namespace, label_selector=f"{COMPONENT_KEY}={COMPONENT}"
            )
        )
    except Exception as error:  # the client's ApiException, urllib3's, a refused connection
        raise _api_error(error) from None
    busy = busy_nodes(pods)
    swept = []
    for node in parse_nodes({**nodes, "kind": "NodeList"}, "the Kubernetes API's node list"):
        held = node.held()
        if not held and node.tainted_by_gpuaccept:
            held = "tainted unfit by gpuaccept (node-verdict's guards return it)"
        pool = node.labels.get(pool_label, "")
        swept.append(SweepNode(node.name, (pool,), busy=node.name in busy, held=held))
    return swept, running_jobs(jobs)


def job_for(node: str, template: dict[str, Any], level: str) -> dict[str, Any]:
    """The template's Job for one node: named after the sweep, labelled with its node, bound to
    it by node affinity on its name, and the container's `--level` set. Affinity, not
    spec.nodeName: the scheduler still places the pod, so its priority, preemption and the
    node's taints apply, as for the DaemonSet controller's pods ("adds the NodeAffinity parameter
    to the DaemonSet pods, instead of the .spec.nodeName parameter", matchFields on metadata.name:
    openshift/openshift-docs modules/nodes-pods-daemonsets-pods.adoc, PR 14751)."""
    job = copy.deepcopy(template)
    metadata = job.setdefault("metadata", {})
    metadata.pop("name", None)
    metadata["generateName"] = "gpuaccept-sweep-"
    labels = {COMPONENT_KEY: COMPONENT, NODE_KEY: node}
    metadata["labels"] = {**(metadata.get("labels") or {}), **labels}
    pod = job["spec"]["template"]
    pod.setdefault("metadata", {})["labels"] = {**(pod["metadata"].get("labels") or {}), **labels}
    bind = {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}
    affinity = pod["spec"].setdefault("affinity", {}).setdefault("nodeAffinity", {})
    affinity["requiredDuringSchedulingIgnoredDuringExecution"] = {"nodeSelectorTerms": [bind]}
    for container in pod["spec"]["containers"]:
        args = container.get("args") or []
        if "--level" in args[:-1]:
            args[args.index("--level") + 1] = level
    return job


def submit(node: str, template: dict[str, Any], level: str, namespace: str) -> str:
    client, _ = _client(*_NEEDED_BY)
    try:
        made = client.BatchV1Api().create_namespaced_job(namespace, job_for(node, template, level))
    except Exception as error:
        raise _api_error(error) from None
    return str(client.ApiClient().sanitize_for_serialization(made)["metadata"]["name"])
