"""The CPUs near a GPU (its NUMA node, as the kernel's sysfs says), so the worker that drives the
GPU runs there and its pinned host buffers are allocated in that node's memory: on a dual-socket
node, a worker on the far socket reads H2D/D2H low against the floors (issue #22).

Documentation/ABI/testing/sysfs-bus-pci (local_cpulist): the CPUs local to the device."""

from __future__ import annotations

import os
import re
from pathlib import Path

_BUS_ID = re.compile(
    r"(?P<domain>[0-9a-fA-F]{4,8}):(?P<bus>[0-9a-fA-F]{2}):(?P<rest>[0-9a-fA-F]{2}\.[0-7])"
)


# The most CPUs a cpulist may name: a kernel's NR_CPUS is a few thousand at most (arm64's
# Kconfig offers "range 2 4096", torvalds/linux 846a415; x86's MAXSMP sets the largest, in the
# thousands too); 65536 leaves room and keeps a hostile `0-999999999` from building a
# billion-element set.
MAX_CPU = 1 << 16
_CPU_RANGE = re.compile(r"(\d{1,6})(?:-(\d{1,6}))?")


def parse_cpulist(text: str) -> set[int]:
    """'0-3,8,10-11' as a set of CPU numbers; ValueError, with a one-line message quoting at
    most 40 characters of the part, when it is not a cpulist the kernel could have written
    (Documentation/admin-guide/cputopology.rst: ranges and single CPUs, comma-separated)."""
    cpus: set[int] = set()
    for part in filter(None, text.strip().split(",")):
        match = _CPU_RANGE.fullmatch(part.strip())
        if match is None:
            raise ValueError(f"not a cpulist: {part[:40]!r}")
        low, high = int(match[1]), int(match[2] or match[1])
        if high < low or high > MAX_CPU:
            raise ValueError(f"not a cpulist range: {part[:40]!r}")
        cpus.update(range(low, high + 1))
    return cpus


def local_cpus(pci_bus_id: str, sysfs: Path = Path("/sys")) -> set[int] | None:
    """The CPUs local to the PCI device (torch's 00000000:cb:00.0 form or sysfs's 0000:cb:00.0),
    or None where sysfs does not say (a VM without NUMA, a container without /sys)."""
    match = _BUS_ID.fullmatch(pci_bus_id.strip())
    if match is None:
        return None
    name = f"{int(match['domain'], 16):04x}:{match['bus']}:{match['rest']}".lower()
    from gpuaccept.probe.sysfs import read_attribute

    text = read_attribute(sysfs / "bus" / "pci" / "devices" / name / "local_cpulist")
    try:
        cpus = parse_cpulist(text) if text is not None else set()
    except ValueError:
        return None
    return cpus or None


def run_near(pci_bus_id: str | None, sysfs: Path = Path("/sys")) -> set[int] | None:
    """Restrict this process to the GPU's local CPUs among those it may use; the CPUs it now
    runs on, or None when nothing was changed (unknown locality, or no local CPU allowed)."""
    if pci_bus_id is None:
        return None
    near = local_cpus(pci_bus_id, sysfs)
    if near is None:
        return None
    allowed = os.sched_getaffinity(0) & near
    if not allowed or allowed == os.sched_getaffinity(0):
        return None
    os.sched_setaffinity(0, allowed)
    return allowed
