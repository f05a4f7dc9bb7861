"""A dmesg stamp `seconds_ago` before now, in this boot's seconds, for kernel logs that a test
hands to `accept` (GPUACCEPT_KERNEL_LOG). A saved log's stamps are dated from this boot when it was
written during it (probe/kernel_log.py), so a fixed `[  100.000000]` is an XID of the boot's first
minutes: older than the 2-hour window once the machine has been up that long (as CI's has), and
then not judged."""

from __future__ import annotations

RECENT_SECONDS = 60.0


def recent(line: str, seconds_ago: float = RECENT_SECONDS) -> str:
    """`line` with its leading `[ seconds ]` stamp set to `seconds_ago` before now."""
    with open("/proc/uptime", encoding="ascii") as stream:
        uptime = float(stream.read().split()[0])
    stamp = max(1.0, uptime - seconds_ago)
    head, bracket, rest = line.partition("]")
    assert bracket, line
    assert head.lstrip().startswith("["), line
    return f"[{stamp:12.6f}]{rest}"
