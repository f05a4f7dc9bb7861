"""kubernetes.client: CoreV1Api's list_node, read_node and patch_node over the state file (and,
for the sweep, list_pod_for_all_namespaces and BatchV1Api's Jobs), with
the strategic-merge semantics gpuaccept relies on (labels and annotations merged, a null value
removes a key; spec.taints replaced whole, as a list without a merge key in a patch of ours)."""

from __future__ import annotations

import copy
import json
import os
from pathlib import Path
from types import SimpleNamespace
from typing import Any


class ApiException(Exception):
    def __init__(self, status: int, reason: str) -> None:
        super().__init__(f"({status}) Reason: {reason}")
        self.status, self.reason = status, reason


class _StatusOnly(Exception):
    status = 500


def _state() -> Path:
    down = os.environ.get("FAKE_KUBE_DOWN")
    if down == "refused":  # no HTTP answer at all: urllib3's own error, no status
        raise ConnectionRefusedError(111, "Connection refused")
    if down == "status-only":
        raise _StatusOnly("server error")
    if down:
        raise ApiException(503, "Service Unavailable")
    return Path(os.environ["FAKE_KUBE_STATE"])


def _nodes() -> dict[str, Any]:
    return dict(json.loads(_state().read_text()))


class ApiClient:
    def sanitize_for_serialization(self, value: Any) -> Any:
        return copy.deepcopy(value)


class CoreV1Api:
    def list_node(self) -> dict[str, Any]:
        # a V1NodeList whose kind the server left unset: sanitize_for_serialization drops None
        return {k: v for k, v in _nodes().items() if k not in ("kind", "pods", "jobs")}

    def list_pod_for_all_namespaces(self) -> dict[str, Any]:
        # the sweep's: the state's "pods", each {"metadata", "spec", "status"}
        return {"items": _nodes().get("pods", [])}

    def _find(self, document: dict[str, Any], name: str) -> dict[str, Any]:
        for item in document["items"]:
            if item["metadata"]["name"] == name:
                return item  # type: ignore[no-any-return]
        raise ApiException(404, "Not Found")

    def read_node(self, name: str) -> SimpleNamespace:
        node = self._find(_nodes(), name)
        return SimpleNamespace(spec=SimpleNamespace(taints=node.get("spec", {}).get("taints")))

    def patch_node(self, name: str, body: dict[str, Any]) -> None:
        if os.environ.get("FAKE_KUBE_PATCH_DENIED"):
            raise ApiException(403, "Forbidden")
        document = _nodes()
        node = self._find(document, name)
        for part in ("labels", "annotations"):
            merged = dict(node["metadata"].get(part) or {})
            for key, value in (body.get("metadata", {}).get(part) or {}).items():
                if value is None:
                    merged.pop(key, None)
                else:
                    merged[key] = value
            node["metadata"][part] = merged
        if "taints" in body.get("spec", {}):
            node.setdefault("spec", {})["taints"] = body["spec"]["taints"]
        _state().write_text(json.dumps(document))


class BatchV1Api:
    """The sweep's Jobs: the state's "jobs"; a Job created gets its generated name and is kept."""

    def list_namespaced_job(self, namespace: str, label_selector: str = "") -> dict[str, Any]:
        key, _, value = label_selector.partition("=")
        return {
            "items": [
                job
                for job in _nodes().get("jobs", [])
                if job["metadata"].get("namespace") == namespace
                and (not key or job["metadata"].get("labels", {}).get(key) == value)
            ]
        }

    def create_namespaced_job(self, namespace: str, body: dict[str, Any]) -> dict[str, Any]:
        if os.environ.get("FAKE_KUBE_CREATE_DENIED"):
            raise ApiException(403, "Forbidden")
        document = _nodes()
        jobs = document.setdefault("jobs", [])
        made = copy.deepcopy(body)
        made["metadata"]["name"] = f"{body['metadata']['generateName']}{len(jobs):05d}"
        made["metadata"]["namespace"] = namespace
        jobs.append(made)
        _state().write_text(json.dumps(document))
        return made
