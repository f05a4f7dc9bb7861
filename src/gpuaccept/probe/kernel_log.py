"""`NVRM: Xid` lines in the kernel log since boot, when this process may read it.

Inside containers and for unprivileged users the kernel ring buffer is usually closed
(dmesg_restrict); that is reported as a reason, never as "no XID".
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Callable
from dataclasses import dataclass

# NVRM: Xid (PCI:0000:cb:00): 79, pid=..., GPU has fallen off the bus.
_XID_LINE = re.compile(
    r"NVRM: Xid \((?:PCI:)?(?P<pci>[0-9A-Fa-f:.]+)\): (?P<xid>\d+)\b(?P<rest>.*)"
)
_READ_TIMEOUT_SECONDS = 10.0
_MAX_BYTES = 64 * 1024 * 1024  # a kernel log larger than this is cut: only its tail is read


@dataclass(frozen=True)
class KernelXid:
    xid: int
    pci_bus_id: str  # as the driver prints it, e.g. 0000:cb:00
    line: str


@dataclass(frozen=True)
class KernelLogScan:
    readable: bool
    source: str  # "dmesg", a file path, or why nothing could be read
    xids: tuple[KernelXid, ...] = ()


def parse_kernel_log(text: str) -> list[KernelXid]:
    found = []
    for line in text.splitlines():
        match = _XID_LINE.search(line)
        if match:
            found.append(KernelXid(int(match["xid"]), match["pci"].lower(), line.strip()[:300]))
    return found


def read_dmesg() -> str | None:
    try:
        done = subprocess.run(
            ["dmesg", "--nopager"],
            capture_output=True,
            timeout=_READ_TIMEOUT_SECONDS,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    if done.returncode != 0:
        return None
    return done.stdout[-_MAX_BYTES:].decode("utf-8", "replace")


def scan_kernel_log(read: Callable[[], str | None] = read_dmesg) -> KernelLogScan:
    """XID lines since boot from `dmesg`; a note instead when the log cannot be read here.

    (/dev/kmsg is the same buffer, but a read of it blocks at its end.)
    """
    text = read()
    if text is None:
        return KernelLogScan(
            readable=False,
            source="kernel log not readable here (dmesg refused: container or dmesg_restrict)",
        )
    return KernelLogScan(readable=True, source="dmesg", xids=tuple(parse_kernel_log(text)))
