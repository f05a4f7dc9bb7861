"""Repeat offenders (issue #31 §4, #49 §4): a GPU or a node whose repairs do not hold is escalated,
as the field does it: the repair its findings recommend first (reset the GPU, reboot the node),
then a person's inspection, then replacement (RMA).

- An **incident** is a stretch of failing runs that a pass (or the start of the record) comes
  before: a drained node that fails its hourly re-validation until it is repaired is one
  incident, not one per hour.
- A GPU is followed by its UUID on whichever host it is (`history gpu` reads the same): its
  incidents are the runs whose findings named it for a remediation (reset-gpu, reboot-node,
  drain, replace).
- At `inspect_after` incidents within `days` (default 2: one repair that did not hold) the
  action becomes `drain` for a person to inspect the hardware; at `replace_after` (default 3:
  two that did not hold), `replace`. gpud escalates the same way: a reboot-recoverable XID seen
  again after `DefaultRebootThreshold = 2` reboots asks for HARDWARE_INSPECTION instead of
  another reboot (leptonai/gpud at 4a8de33a, components/accelerator/nvidia/xid/threshold.go:32,
  health_state.go:92-98).
- **A figure below its floor is never an RMA by itself**: a failure whose own recommended action
  leaves the node in service (rerun, monitor: a slow figure, a check that could not complete)
  escalates at most to inspection, and a node is replaced only for incidents whose failures took
  it out of service. gpud keeps XID 94, an application's contained error, from escalating for
  the same reason (threshold.go:37-46).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Literal

from gpuaccept.actions import Action, most_severe
from gpuaccept.results import RunReport
from gpuaccept.verdict import ACCEPT, Outcome

DEFAULT_LIMIT = 3
DEFAULT_INSPECT = 2
DEFAULT_DAYS = 7.0


def remediated(uuid: str, reports: Iterable[RunReport]) -> set[str]:
    """The start times of the runs whose findings named this GPU, by its UUID or its PCI
    address, with an action that takes it out of service (reset-gpu, reboot-node, drain,
    replace)."""
    return {
        report.started_at
        for report in reports
        if uuid in report.action_plan.out_of_service_gpus(report.captured_gpus)
    }


def incidents(runs: Iterable[tuple[str, bool | None]]) -> list[str]:
    """The start of each incident among (started_at, failed?) runs, failed None for a run that
    judged nothing (passed over): a failure after a pass, or the first failure."""
    ordered = sorted(runs, key=lambda run: datetime.fromisoformat(run[0]))
    return [ordered[i][0] for i in _incident_starts([failed for _, failed in ordered])]


def _incident_starts(failed_in_order: Sequence[bool | None]) -> list[int]:
    """The positions where an incident starts among runs in time order (see `incidents`)."""
    starts, before = [], False
    for position, failed in enumerate(failed_in_order):
        if failed is None:
            continue
        if failed and not before:
            starts.append(position)
        before = failed
    return starts


def within(started_at: Iterable[str], newest: str, days: float) -> int:
    """How many of the times fall within `days` before `newest` (inclusive)."""
    end = datetime.fromisoformat(newest)
    since = end - timedelta(days=days)
    return sum(since <= datetime.fromisoformat(t) <= end for t in started_at)


def node_incidents(reports: Iterable[RunReport], hard_only: bool = False) -> list[str]:
    """Incidents of a node among its accept runs; `hard_only`: of the failures that took it out
    of service (a soft failure is then passed over, as a run that judged nothing)."""
    from gpuaccept.report.node_verdict import fitness

    judged = {"pass": False, "fail": True}

    def failed(report: RunReport) -> bool | None:
        verdict = judged.get(fitness(report))
        if verdict and hard_only and not report.action_plan.action.takes_out_of_service:
            return None
        return verdict

    return incidents((r.started_at, failed(r)) for r in reports if r.verdict.kind == ACCEPT)


def gpu_incidents(uuid: str, reports: Iterable[RunReport]) -> list[str]:
    """Incidents of one GPU: runs it took part in, failed when a finding named it for a
    remediation."""
    reports = list(reports)
    named = remediated(uuid, reports)
    return incidents(
        (r.started_at, r.started_at in named)
        for r in reports
        if any(
            g.get("uuid") == uuid for g in r.environment.get("gpus") or [] if isinstance(g, dict)
        )
        or r.started_at in named
    )


Escalation = Literal["inspect", "replace"]


@dataclass(frozen=True)
class Offence:
    """Why a node or one of its GPUs is escalated: to a person's inspection, or replacement."""

    what: str  # "node gpu07" or "GPU GPU-..."
    count: int
    days: float
    escalation: Escalation = "replace"
    hosts: tuple[str, ...] = ()  # a GPU's hosts in its incidents, when more than one

    @property
    def said(self) -> str:
        moved = f" (on {', '.join(self.hosts)})" if len(self.hosts) > 1 else ""
        if self.escalation == "inspect":
            return (
                f"{self.what}{moved} failed in {self.count} incidents within {self.days:g} "
                "days: its repair did not hold, drain it for a person to inspect the hardware"
            )
        return (
            f"{self.what}{moved} failed in {self.count} incidents within {self.days:g} days: a "
            "repeat offender, replace it"
        )


def _escalation(count: int, inspect_after: int, replace_after: int) -> Escalation | None:
    if replace_after and count >= replace_after:
        return "replace"
    if inspect_after and count >= inspect_after:
        return "inspect"
    return None


def _hosts_of(uuid: str, reports: Iterable[RunReport]) -> tuple[str, ...]:
    return tuple(
        dict.fromkeys(
            r.hostname
            for r in sorted(reports, key=lambda r: datetime.fromisoformat(r.started_at))
            if r.hostname
            and any(
                isinstance(g, dict) and g.get("uuid") == uuid
                for g in r.environment.get("gpus") or []
            )
        )
    )


def offences(
    report: RunReport,
    earlier: list[RunReport],
    limit: int = DEFAULT_LIMIT,
    days: float = DEFAULT_DAYS,
    inspect_after: int = DEFAULT_INSPECT,
) -> list[Offence]:
    """The node's and its GPUs' offences as of `report` (which counts), from earlier runs (of
    any host: the node's own are told by its name, its GPUs by their UUIDs): only what this run
    failed for is held against it. `limit` is the replacement's count, `inspect_after` the
    inspection's (0: never)."""
    from gpuaccept.report.node_verdict import node_of

    this = node_of(report)
    own = [report, *(r for r in earlier if node_of(r) == this)]
    everywhere = [report, *earlier]
    hard = report.action_plan.action.takes_out_of_service
    found = []
    if report.verdict.outcome is Outcome.FAIL:
        any_kind = within(node_incidents(own), report.started_at, days)
        took_out = within(node_incidents(own, hard_only=True), report.started_at, days)
        # replaced only for incidents that took the node out of service, this one among them
        step = _escalation(took_out, 0, limit) if hard else None
        step = step or _escalation(any_kind, inspect_after, 0)
        if step is not None:
            count = took_out if step == "replace" else any_kind
            found.append(Offence(f"node {this or '(unnamed)'}", count, days, step))
    for uuid in report.out_of_service_uuids:
        incidents_here = gpu_incidents(uuid, everywhere)
        count = within(incidents_here, report.started_at, days)
        step = _escalation(count, inspect_after, limit)
        if step is not None:
            found.append(Offence(f"GPU {uuid}", count, days, step, _hosts_of(uuid, everywhere)))
    return found


@dataclass(frozen=True)
class GpuRun:
    run: int
    started_at: str
    host: str | None
    command: str
    verdict: str  # the run's label: PASS, FAILURE: ..., NOT JUDGED
    index: int | None  # the GPU's index on that host
    serial: str | None
    action: Action  # the most severe action the run's findings named this GPU for


@dataclass(frozen=True)
class GpuLife:
    uuid: str
    runs: list[GpuRun]  # newest first
    hosts: list[str]  # in the order the GPU was first seen on them
    serials: list[str]
    incidents: int  # within `days` before its newest run
    days: float
    offender: bool

    @property
    def said(self) -> str:
        moved = f", moved between {len(self.hosts)} hosts" if len(self.hosts) > 1 else ""
        verdict = (
            f": a repeat offender, replace it ({self.incidents} incidents >= the limit)"
            if self.offender
            else ""
        )
        serial = f" (serial {', '.join(self.serials)})" if self.serials else ""
        return (
            f"GPU {self.uuid}{serial}: {len(self.runs)} run(s) on {', '.join(self.hosts) or '?'}"
            f"{moved}; {self.incidents} incident(s) in the {self.days:g} days before its newest "
            f"run{verdict}"
        )


def gpu_life(
    uuid: str,
    rows: list[tuple[int, str, str | None, str, str, int | None, str | None]],
    reports: dict[int, RunReport],
    limit: int = DEFAULT_LIMIT,
    days: float = DEFAULT_DAYS,
) -> GpuLife:
    """A GPU's runs (run id, start, host, command, label, index, serial; newest first) with what
    each run's findings named it for, read from the stored `reports` by run id."""
    runs = []
    for run_id, started_at, host, command, label, index, serial in rows:
        report = reports.get(run_id)
        named = (
            [r.action for r in report.action_plan.recommendations if r.gpu == uuid]
            if report is not None
            else []
        )
        runs.append(
            GpuRun(run_id, started_at, host, command, label, index, serial, most_severe(named))
        )
    count = 0
    if runs:
        starts = gpu_incidents(uuid, list(reports.values()))
        count = within(starts, runs[0].started_at, days)
    return GpuLife(
        uuid,
        runs,
        list(dict.fromkeys(r.host for r in reversed(runs) if r.host)),
        list(dict.fromkeys(r.serial for r in reversed(runs) if r.serial)),
        count,
        days,
        count >= limit > 0,
    )


DEFAULT_MTBI_DAYS = 30.0


@dataclass(frozen=True)
class Mtbi:
    """Mean time between incidents of a node or a GPU over a window (issue #31 §4): the hours
    between its first and last judged run there, over its incidents."""

    what: str  # the node's name or the GPU's UUID
    incidents: int
    hours: float  # observed: first to last judged run in the window
    runs: int
    hosts: tuple[str, ...] = ()  # a GPU's hosts in the window, first seen first
    serial: str | None = None

    @property
    def mean_hours(self) -> float | None:
        """None without an incident, or with no time observed (one run)."""
        return self.hours / self.incidents if self.incidents and self.hours > 0 else None


def _observed(ordered: Sequence[tuple[datetime, bool | None]]) -> float:
    """Hours from the first to the last judged run of runs in time order."""
    times = [moment for moment, failed in ordered if failed is not None]
    return (times[-1] - times[0]).total_seconds() / 3600 if times else 0.0


def node_mtbi(runs: Iterable[tuple[str | None, str, bool | None]]) -> list[Mtbi]:
    """Per node, of its accept runs (host, started_at, failed?: None when nothing was judged);
    the nodes with the most incidents first. Each start is read once (a fleet's window holds
    hundreds of thousands of runs)."""
    by_node: dict[str, list[tuple[datetime, bool | None]]] = {}
    for host, started_at, failed in runs:
        by_node.setdefault(str(host), []).append((datetime.fromisoformat(started_at), failed))
    found = []
    for node, rows in by_node.items():
        rows.sort(key=lambda row: row[0])  # stable: runs of one instant keep their order
        found.append(
            Mtbi(
                node,
                len(_incident_starts([failed for _, failed in rows])),
                _observed(rows),
                sum(failed is not None for _, failed in rows),
            )
        )
    return sorted(found, key=lambda m: (-m.incidents, m.what))


def gpu_mtbi(
    named: Iterable[tuple[str, int]],
    took_part: Iterable[tuple[str, int, str, str | None, str | None]],
) -> list[Mtbi]:
    """Per GPU that a run named for a remediation: `named` (UUID, run id), `took_part` (UUID,
    run id, started_at, host, serial) the runs it took part in, on whatever host; a run of it is
    failed for the GPU when it named the GPU. The GPUs with the most incidents first."""
    failed_for = set(named)
    runs: dict[str, list[tuple[datetime, int, str | None, str | None]]] = {}
    for uuid, run_id, started_at, host, serial in took_part:
        runs.setdefault(uuid, []).append((datetime.fromisoformat(started_at), run_id, host, serial))
    found = []
    for uuid, rows in runs.items():
        rows.sort()  # by start, then run id: an instant's runs in the order stored
        judged: list[tuple[datetime, bool | None]] = [
            (moment, (uuid, run_id) in failed_for) for moment, run_id, _, _ in rows
        ]
        # hosts first seen first, the serial of its latest run: of one instant (a capture that
        # puts a GPU on two hosts at once), by name, as the history's tables order them
        first_seen: dict[str, datetime] = {}
        for moment, _, host, _ in rows:
            if host:
                first_seen.setdefault(host, moment)
        serials = sorted((moment, serial) for moment, _, _, serial in rows if serial)
        found.append(
            Mtbi(
                uuid,
                len(_incident_starts([failed for _, failed in judged])),
                _observed(judged),
                len(rows),
                tuple(sorted(first_seen, key=lambda host: (first_seen[host], host))),
                serials[-1][1] if serials else None,
            )
        )
    return sorted(found, key=lambda m: (-m.incidents, m.what))
