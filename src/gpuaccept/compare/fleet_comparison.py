"""A burn-in's GPUs against the same GPU model on other nodes, from the history (issue #23).

Within a node a straggler is judged against the node's confirmed best (`burnin.judging`); a
node whose every GPU is equally slow passes that test. Across nodes, each GPU's median rate per
stressor is compared with the newest figure of every GPU (by UUID: a GPU that moved between nodes
is counted once, at its newest) of the same model on the *other* nodes the history holds, this
run's own GPUs never among them, from burn-ins that passed on the GPU: a GPU more than the
straggler tolerance below their median is a straggler of the fleet (the same 10% as within a
node: gpu-fryer's, cited in `burnin.judging`). Fewer than three such GPUs make no median: the
GPU is not compared, and the check says so (SKIP when nothing was compared), never a pass.

Bits across nodes. A window's work is fixed by its stressor and seed, so the result bits the
node's GPUs agreed on (the window's majority digest) must equal those of every other node that
ran the same window's work on the same stack and GPU models (`stack_sha256`: the library picks
its algorithm per model and version). Against the newest passing burn-in of each such node: bits
that differ from what at least two other nodes agree on fail (this node's GPUs share a fault
their own majority cannot see); bits that differ from a single other node warn (no majority
across nodes: the CPU reference each window ran decides).
"""

from __future__ import annotations

import statistics
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from gpuaccept.record.identity import node_name_of
from gpuaccept.results import CheckResult, RunReport, Status
from gpuaccept.store.base import History
from gpuaccept.verdict import Outcome

CHECK_NAME = "burnin-fleet"
MIN_PEERS = 3
_COMMAND = "burnin"
_CHECK = "burnin-throughput"
_RUNS_READ = 50  # newest burn-ins read for other nodes' bits


@dataclass(frozen=True)
class FleetFigure:
    metric: str
    gpu: str
    model: str
    value: float
    unit: str
    median: float  # of the same model's GPUs on other nodes
    peers: int

    @property
    def change_percent(self) -> float:
        return (self.value - self.median) / abs(self.median) * 100 if self.median else 0.0


def compare_with_fleet(
    report: RunReport, history: History, tolerance_percent: float
) -> CheckResult:
    """The run's per-GPU burn-in figures against the same model on other nodes."""
    if report.device_mode == "cpu":
        return _skip("CPU mode: the twin's figures are the machine's, not a GPU model's")
    host = node_name_of(report)
    # CPU twins' figures name no GPU model: the model match below leaves them out
    # this run's own GPUs are no peers of themselves, wherever their older figures were measured
    own = {
        uuid
        for g in report.environment.get("gpus") or []
        if isinstance(g, dict) and isinstance(uuid := g.get("uuid"), str)
    }
    compared: list[FleetFigure] = []
    uncompared: set[str] = set()
    for m in _throughput(report).measurements:
        if m.device_index is None or m.device_name is None:
            continue
        # only a burn-in has this check and metric; the newest figure of each node and GPU, if
        # the run that measured it passed (its passing read for those runs alone, not the
        # history: issue #33 §2)
        latest = history.points(f"{_CHECK}/{m.name}", latest_only=True)
        passing = history.passed_runs([p.run_id for p in latest])
        peers = [
            p.value
            for p in latest
            if p.run_id in passing
            and p.hostname != host
            and p.gpu_uuid not in own
            and p.device_name == m.device_name
        ]
        if len(peers) < MIN_PEERS:
            uncompared.add(m.device_name)
            continue
        compared.append(
            FleetFigure(
                m.name,
                f"gpu{m.device_index}",
                m.device_name,
                m.value,
                m.unit,
                statistics.median(peers),
                len(peers),
            )
        )
    slow = [f for f in compared if f.change_percent < -tolerance_percent]
    failures = [
        f"{f.gpu} {f.metric} {f.value:.4g} {f.unit} is {f.change_percent:+.1f}% against "
        f"the median {f.median:.4g} of {f.peers} {f.model} GPUs on other nodes"
        for f in slow
    ]
    bits = compare_bits(report, history)
    failures += bits.failures
    details = {
        "tolerance_percent": tolerance_percent,
        "figures": [f.__dict__ | {"change_percent": f.change_percent} for f in compared],
        "not_compared": sorted(uncompared),
        "windows_compared_bit_for_bit": bits.compared,
    }
    if failures or bits.warnings:
        return CheckResult(
            name=CHECK_NAME,
            area="BURNIN",
            status=Status.FAIL if failures else Status.WARN,
            message="; ".join(failures or bits.warnings),
            details=details,
        )
    if not compared and not bits.compared:
        why = (
            f"fewer than {MIN_PEERS} GPUs of {', '.join(sorted(uncompared))} on other nodes in "
            "the history's passing burn-ins"
            if uncompared
            else "no per-GPU figure to compare"
        )
        return _skip(f"not compared with other nodes: {why}", details)
    said = [f"{len(compared)} figure(s) within {tolerance_percent:g}% of the same GPU model"]
    if bits.compared:
        said.append(f"{bits.compared} window(s) bit for bit equal")
    return CheckResult(
        name=CHECK_NAME,
        area="BURNIN",
        status=Status.PASS,
        message=" and ".join(said) + " on other nodes",
        details=details,
    )


@dataclass
class BitComparison:
    compared: int = 0  # windows whose bits another node's run of the same work could check
    failures: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def _throughput(report: RunReport) -> CheckResult:
    """The report's burnin-throughput check (an empty one where it has none)."""
    empty = CheckResult(name=_CHECK, area="BURNIN", status=Status.SKIP, message="")
    return next((c for c in report.checks if c.name == _CHECK), empty)


def _window_digests(report: RunReport) -> dict[tuple[Any, Any], tuple[int, str]]:
    """(stressor, work seed) -> (window, majority digest) of a burn-in report's windows that
    have both (a window without a majority has no bits to compare)."""
    series = _throughput(report).details.get("series")
    found: dict[tuple[Any, Any], tuple[int, str]] = {}
    windows = [w for w in series if isinstance(w, dict)] if isinstance(series, list) else []
    for window in windows:
        key = (window.get("stressor"), window.get("seed"))
        number, digest = window.get("window"), window.get("digest")
        if isinstance(digest, str) and isinstance(number, int):
            found[key] = (number, digest)
    return found


def compare_bits(report: RunReport, history: History) -> BitComparison:
    """This run's window bits against other nodes' passing GPU burn-ins of the same work on the
    same stack (the newest run of each node)."""
    from gpuaccept.record.environment import stack_sha256

    result = BitComparison()
    mine = _window_digests(report)
    stack, host = stack_sha256(report.environment), node_name_of(report)
    theirs: dict[tuple[Any, Any], dict[str, str]] = {}
    seen_hosts: set[Any] = set()
    for row in history.list_runs(command=_COMMAND, limit=_RUNS_READ):
        # newest first: each node's newest passing run of the same stack (a CPU twin's has no
        # GPUs in its stack, so never matches)
        if row.hostname in (host, *seen_hosts) or row.verdict.outcome is not Outcome.PASS:
            continue
        past = history.report(row.id)
        if stack_sha256(past.environment) != stack:
            continue
        seen_hosts.add(row.hostname)
        for key, (_, digest) in _window_digests(past).items():
            theirs.setdefault(key, {})[str(row.hostname)] = digest
    for key, (window, digest) in sorted(mine.items(), key=lambda item: item[1][0]):
        others = theirs.get(key)
        if not others:
            continue
        result.compared += 1
        (common, agreeing), *_ = Counter(others.values()).most_common(1)
        if digest == common:
            continue
        nodes = sorted(host for host, d in others.items() if d == common)
        where = f"window {window + 1} ({key[0]})"
        if agreeing >= 2:
            result.failures.append(
                f"{where}: this node's GPUs computed other bits than {agreeing} other nodes "
                f"({', '.join(nodes)}) on the same stack"
            )
        else:
            result.warnings.append(
                f"{where}: this node's GPUs computed other bits than {nodes[0]} on the same "
                "stack (no majority across nodes: the CPU reference of each window decides)"
            )
    return result


def _skip(message: str, details: dict[str, object] | None = None) -> CheckResult:
    return CheckResult(
        name=CHECK_NAME, area="BURNIN", status=Status.SKIP, message=message, details=details or {}
    )
