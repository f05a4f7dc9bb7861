"""host: the host side of a GPU node (issue #24), judged against the node profile
(`--node-profile`, docs/fabric.md).

- Host memory copy bandwidth on each NUMA node (a STREAM-like copy, pinned to the node's CPUs):
  below the profile's `min_memory_gbps` fails; without a floor, a NUMA node more than 10% below
  the node's best warns (the sockets of a node are built alike: a missing DIMM channel shows as
  one slower socket; 10% as between the GPUs of a node, gpu-fryer's tolerance).
- Logical CPUs fewer than `cpus` fail; CPUs whose frequency ceiling (cpufreq's
  `scaling_max_freq`) is below `min_cpu_mhz` fail (a node capped in a low power state), where
  cpufreq reports; an idle CPU's current clock is not judged (powersave parks it low).
- The scratch file system (`scratch_dir`, else the temporary directory): sequential write and
  read throughput below `min_scratch_write_gbps` / `min_scratch_read_gbps`, and the 99th
  percentile of a 4 KiB write + fsync above `max_fsync_ms`, fail.
- Nothing to judge against (no profile, one NUMA node): SKIP with the figures, never a pass.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from gpuaccept.checks.context import CheckContext
from gpuaccept.checks.judging import Findings
from gpuaccept.measure.host import cpu_mhz, memory_copy_gbps, scratch_io
from gpuaccept.node_profile import NodeExpectation
from gpuaccept.probe.fabric import read_inventory
from gpuaccept.probe.numa import parse_cpulist
from gpuaccept.probe.sysfs import sysfs_root
from gpuaccept.results import CheckResult, Status

NUMA_TOLERANCE_PERCENT = 10.0
_MEMORY_BYTES = {"cuda": 1024**3, "cpu": 64 * 1024**2}
_SCRATCH_BYTES = {"cuda": 1024**3, "cpu": 32 * 1024**2}


def judge_memory(by_node: dict[int, float], floor: float | None, findings: Findings) -> bool:
    """Judge the NUMA nodes' copy bandwidth; whether anything was judged."""
    for node, gbps in sorted(by_node.items()):
        findings.record_node(f"host_memory_node{node}_gbps", gbps, "GB/s")
        if floor is not None and gbps < floor:
            findings.failures.append(
                f"NUMA node {node}: host memory copy {gbps:.4g} GB/s, below the profile's "
                f"{floor:g} GB/s"
            )
    if floor is None and len(by_node) > 1:
        best = max(by_node.values())
        findings.warnings += [
            f"NUMA node {node}: host memory copy {gbps:.4g} GB/s, "
            f"{(gbps - best) / best * 100:+.1f}% against the node's best {best:.4g} GB/s "
            "(a missing memory channel?)"
            for node, gbps in sorted(by_node.items())
            if gbps < best * (1 - NUMA_TOLERANCE_PERCENT / 100)
        ]
    return floor is not None or len(by_node) > 1


def judge_cpus(
    count: int, mhz: dict[int, float], expect: NodeExpectation, findings: Findings
) -> bool:
    judged = False
    if expect.cpus is not None:
        judged = True
        if count < expect.cpus:
            findings.failures.append(f"{count} logical CPUs, the profile expects {expect.cpus}")
    if expect.min_cpu_mhz is not None:
        if not mhz:
            findings.warnings.append("no cpufreq in sysfs: the CPU frequency could not be judged")
            return judged
        judged = True
        slow = {cpu: f for cpu, f in mhz.items() if f < expect.min_cpu_mhz}
        if slow:
            slowest = min(slow, key=lambda cpu: slow[cpu])
            findings.failures.append(
                f"{len(slow)} CPU(s) below {expect.min_cpu_mhz:g} MHz (slowest: cpu{slowest} at "
                f"{slow[slowest]:.0f} MHz)"
            )
    return judged


def judge_scratch(
    write_gbps: float,
    read_gbps: float,
    fsync_p99_ms: float,
    expect: NodeExpectation,
    findings: Findings,
) -> bool:
    findings.record_node("scratch_write_gbps", write_gbps, "GB/s")
    findings.record_node("scratch_read_gbps", read_gbps, "GB/s")
    findings.record_node("scratch_fsync_p99_ms", fsync_p99_ms, "ms")
    rules = (
        ("write", write_gbps, expect.min_scratch_write_gbps, "GB/s", False),
        ("read", read_gbps, expect.min_scratch_read_gbps, "GB/s", False),
        ("fsync p99", fsync_p99_ms, expect.max_fsync_ms, "ms", True),
    )
    judged = False
    for what, value, bound, unit, ceiling in rules:
        if bound is None:
            continue
        judged = True
        if (value > bound) if ceiling else (value < bound):
            side = "above" if ceiling else "below"
            findings.failures.append(
                f"scratch {what} {value:.4g} {unit}, {side} the profile's {bound:g} {unit}"
            )
    return judged


def numa_nodes(numa: dict[int, str], findings: Findings) -> dict[int, set[int]]:
    """Each NUMA node's CPUs, from its sysfs cpulist. A cpulist that is not one (`abc`, or
    `0-999999999`, beyond any kernel's NR_CPUS) is sysfs's trouble, not the node's: it warns,
    in one line, and that node is not measured. A node with no CPU (memory alone: a GH200's GPU
    memory, CXL memory) has nothing to pin a copy to and is left out."""
    nodes: dict[int, set[int]] = {}
    for node, text in sorted(numa.items()):
        try:
            cpus = parse_cpulist(text)
        except ValueError as error:
            findings.warnings.append(
                f"NUMA node {node}: its cpulist is unreadable ({error}): its memory was not "
                "measured"
            )
            continue
        if cpus:
            nodes[node] = cpus
    return nodes


def run(context: CheckContext) -> CheckResult:
    expect = context.node or NodeExpectation()
    findings = Findings("host", "HOST")
    numa = read_inventory().numa_cpus
    # no NUMA in sysfs (a VM, a container without /sys): the CPUs this process may use are one
    nodes = numa_nodes(numa, findings) if numa else {0: os.sched_getaffinity(0)}
    size = _MEMORY_BYTES[context.device_mode]
    memory = {node: memory_copy_gbps(cpus, size) for node, cpus in sorted(nodes.items())}
    judged = judge_memory(memory, expect.min_memory_gbps, findings)
    judged |= judge_cpus(os.cpu_count() or 0, cpu_mhz(sysfs_root()), expect, findings)
    directory = expect.scratch_dir or Path(tempfile.gettempdir())
    scratch = scratch_io(directory, _SCRATCH_BYTES[context.device_mode])
    judged |= judge_scratch(
        scratch.write_gbps, scratch.read_gbps, scratch.fsync_p99_ms, expect, findings
    )
    if scratch.cached_read:
        findings.warnings.append(
            f"scratch {directory}: the file stayed cached, the read speed is memory's"
        )
    findings.details = {
        "numa_cpus": numa,
        "scratch": scratch.__dict__,
        "numa_tolerance_percent": NUMA_TOLERANCE_PERCENT,
    }
    measured = (
        f"{len(memory)} NUMA node(s) at {min(memory.values()):.4g} GB/s or more"
        if memory
        else "no NUMA node's memory measured"
    )
    said = (
        f"{measured}; scratch {directory} writes {scratch.write_gbps:.3g} GB/s, reads "
        f"{scratch.read_gbps:.3g} GB/s, fsync p99 {scratch.fsync_p99_ms:.3g} ms"
    )
    if not judged and not findings.failures and not findings.warnings:
        return CheckResult(
            name="host",
            area="HOST",
            status=Status.SKIP,
            message=f"{said}: nothing to judge them against (give a --node-profile)",
            measurements=findings.measurements,
            details=findings.details,
        )
    return findings.conclude(said)
