"""One node, one name (issue #53 §1): the name a node goes by, resolved once when a run's
environment is captured, recorded in its report (`environment.node`) and read from there by every
writer and reader: the report's file name, the history, the comparisons, the fleet page, the
HTML and Prometheus writers, `node-verdict`, `act` and the evidence archive.

The name is the first of: the operator's GPUACCEPT_NODE_NAME, Slurm's SLURMD_NODENAME, the
Kubernetes node (GPUACCEPT_K8S_NODE_NAME, which the manifests in k8s/ set from `spec.nodeName`
through the downward API: inside a pod the host name is the pod's), then the host name.

A name is not a machine: hosts are renamed and names reused. `identity_changes` says, when a run
is recorded, that its name last belonged to another machine or its machine last went by another
name (machine-id, else the DMI product serial), rather than merging or splitting them silently.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from gpuaccept.results import RunReport

K8S_NODE_NAME_ENV = "GPUACCEPT_K8S_NODE_NAME"
# (variable, who sets it), in the order they win
NODE_NAME_SOURCES: tuple[tuple[str, str], ...] = (
    ("GPUACCEPT_NODE_NAME", "the operator"),
    ("SLURMD_NODENAME", "Slurm"),
    (K8S_NODE_NAME_ENV, "Kubernetes"),
)
HOSTNAME_SOURCE = "hostname"  # the source of a name that no variable gave


def resolve_node_name(environ: Mapping[str, str], hostname: str | None) -> dict[str, str | None]:
    """This node's name and where it came from (`environment.node` of a report): the first set
    of NODE_NAME_SOURCES' variables, else the host name."""
    for variable, _ in NODE_NAME_SOURCES:
        value = (environ.get(variable) or "").strip()
        if value:
            return {"name": value, "source": variable}
    return {
        "name": hostname.strip() if hostname and hostname.strip() else None,
        "source": HOSTNAME_SOURCE,
    }


def node_name_of(report: RunReport) -> str | None:
    """The node a report is from: the name its capture resolved. A report written before the
    name was recorded reads as its readers read it then: the name its launcher or scheduler gave
    (GPUACCEPT_NODE_NAME or SLURMD_NODENAME, which it kept), else its host name."""
    environment = report.environment
    node = environment.get("node")
    if isinstance(node, dict) and "source" in node:
        return str(node["name"]) if node.get("name") else None
    launch = environment.get("launch")
    if isinstance(launch, dict) and launch.get("node"):
        return str(launch["node"])
    scheduler = environment.get("scheduler")
    if isinstance(scheduler, dict) and scheduler.get("node_name"):
        return str(scheduler["node_name"])
    return report.hostname


@dataclass(frozen=True)
class Machine:
    """What a name is not: the machine behind it, as far as the capture could tell."""

    machine_id: str | None
    product_serial: str | None

    @classmethod
    def of(cls, report: RunReport) -> Machine:
        system: Any = report.environment.get("system")
        system = system if isinstance(system, dict) else {}
        return cls(
            _text(system.get("machine_id")),
            _text(system.get("product_serial")),
        )

    def same_as(self, other: Machine) -> bool | None:
        """True or False where both captures know one identity of the machine; None where
        they share none (nothing can be said)."""
        if self.machine_id and other.machine_id:
            return self.machine_id == other.machine_id
        if self.product_serial and other.product_serial:
            return self.product_serial == other.product_serial
        return None

    def __str__(self) -> str:
        if self.machine_id:
            return f"machine-id {self.machine_id}"
        return f"DMI serial {self.product_serial}"


def _text(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


class _Run(Protocol):
    @property
    def id(self) -> int: ...

    @property
    def hostname(self) -> str | None: ...


class PastRuns(Protocol):
    """What `identity_changes` reads of a history: an open store.base.History answers it. Named
    here so the record does not import the stores, which import it (issue #51 §2)."""

    def list_runs(self, *, node: str | None = None, limit: int | None = None) -> Sequence[_Run]: ...

    def gpu_runs(
        self, uuid: str, limit: int = 200
    ) -> Sequence[tuple[_Run, int | None, str | None]]: ...

    def report(self, run_id: int) -> RunReport: ...


def identity_changes(history: PastRuns, report: RunReport) -> list[str]:
    """What is new about this run's name and machine against the history, before it is stored:
    its name last recorded from another machine (hardware replaced, or a name given twice), or
    its machine (or its GPUs' last run) recorded under another name (a rename: the node's past
    runs stay under the old name). Two indexed lookups and at most two reports read."""
    name = node_name_of(report)
    machine = Machine.of(report)
    said: list[str] = []
    if name:
        before = history.list_runs(node=name, limit=1)
        if before:
            past = Machine.of(history.report(before[0].id))
            if machine.same_as(past) is False:
                said.append(
                    f"node {name} was {past} in run {before[0].id} and is {machine} now: another "
                    f"machine under the same name (hardware replaced, or two machines named "
                    f"{name}: give each its own GPUACCEPT_NODE_NAME); its runs are compared as "
                    "one node's"
                )
    uuids = _gpu_uuids(report)
    if uuids:
        found = history.gpu_runs(uuids[0], limit=1)
        if found and found[0][0].hostname != name:
            row = found[0][0]
            past = Machine.of(history.report(row.id))
            if machine.same_as(past) is not False:  # the same machine, or its GPUs at least
                said.append(
                    f"this machine ({machine if machine.same_as(past) else 'its GPU ' + uuids[0]})"
                    f" was recorded as node {row.hostname or '(unnamed)'} in run {row.id} and "
                    f"is {name or '(unnamed)'} now: renamed? its past runs stay under "
                    f"{row.hostname or '(unnamed)'} (GPUACCEPT_NODE_NAME keeps one name)"
                )
    return said


def _gpu_uuids(report: RunReport) -> list[str]:
    gpus = report.environment.get("gpus")
    if not isinstance(gpus, list):
        return []
    return [g["uuid"] for g in gpus if isinstance(g, dict) and isinstance(g.get("uuid"), str)]


def node_title(report: RunReport) -> str | None:
    """The node's name as a report shows it: with the host name beside it where they differ
    (a pod's, or a renamed host's), so either can be found."""
    name, host = node_name_of(report), report.hostname
    if name and host and host != name:
        return f"{name} (host {host})"
    return name or host
