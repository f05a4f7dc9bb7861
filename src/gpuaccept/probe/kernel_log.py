"""`NVRM: Xid` lines in the kernel log since boot, when this process may read it.

Inside containers and for unprivileged users the kernel ring buffer is usually closed
(dmesg_restrict); that is reported as a reason, never as "no XID".
"""

from __future__ import annotations

import os
import re
import stat
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
    seconds_since_boot: float | None = None  # dmesg's [12345.678] stamp, when the line has one


@dataclass(frozen=True)
class LinkFlap:
    """A log line saying an InfiniBand interface lost its carrier (a link flap)."""

    interface: str
    line: str
    seconds_since_boot: float | None = None  # dmesg's [12345.678] stamp
    at: float | None = None  # a syslog or ISO 8601 stamp, as seconds since the epoch


@dataclass(frozen=True)
class KernelLogScan:
    readable: bool
    source: str  # "dmesg", a file path, or why nothing could be read
    xids: tuple[KernelXid, ...] = ()
    flaps: tuple[LinkFlap, ...] = ()
    uptime_seconds: float | None = None  # this boot's, when the log is this boot's (dmesg)


_STAMP = re.compile(r"^\[\s*(?P<seconds>\d+\.\d+)\]")


def parse_kernel_log(text: str) -> list[KernelXid]:
    found = []
    for line in text.splitlines():
        match = _XID_LINE.search(line)
        if match:
            stamp = _STAMP.match(line.strip())
            found.append(
                KernelXid(
                    int(match["xid"]),
                    match["pci"].lower(),
                    line.strip()[:300],
                    float(stamp["seconds"]) if stamp else None,
                )
            )
    return found


# aznhc's check_ib_link_flapping (customTests/azure_ib_link_flapping.nhc at Azure/
# azurehpc-health-checks 0ce3f7c) greps the *syslog* for "lost carrier" (case-insensitive), dates
# each line by its syslog stamp (month, day and time, in the year that puts it nearest now) and
# counts the lines of the last 24 hours per interface, the first match of ib[0-9a-zA-Z_]+
# (get_linkflap_count). The kernel itself prints no "lost carrier" for an IPoIB interface:
# systemd-networkd and NetworkManager write it to the journal, and mlx5's Ethernet ports to the
# kernel log. So the lines are read from dmesg or from the file GPUACCEPT_KERNEL_LOG names (the
# syslog, as aznhc reads it), dated by whichever stamp they carry: dmesg's seconds since boot, a
# syslog date, or ISO 8601. The interface is the ib... word that a colon follows, never an ib
# inside a longer word (a host named `calib01` is no interface).
_IB_INTERFACE = re.compile(r"(?<![\w.-])(ib[0-9a-zA-Z_]+):")
_MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")
_SYSLOG_STAMP = re.compile(
    rf"^(?P<month>{'|'.join(_MONTHS)})\s+(?P<day>\d{{1,2}})\s+(?P<time>\d{{2}}:\d{{2}}:\d{{2}})\b"
)
_ISO_STAMP = re.compile(
    r"^(?P<iso>\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(?:[.,]\d+)?(?:Z|[+-]\d{2}:?\d{2})?)"
)


def line_time(line: str, now: float | None = None) -> float | None:
    """The epoch seconds of a syslog (`Nov 22 10:00:00`, local time, in the year nearest `now`,
    as aznhc dates it) or ISO 8601 stamp at the start of `line`; None without one."""
    import time
    from datetime import datetime

    now = time.time() if now is None else now
    iso = _ISO_STAMP.match(line)
    if iso:
        text = iso["iso"].replace(",", ".").replace(" ", "T").replace("Z", "+00:00")
        try:
            moment = datetime.fromisoformat(text)
        except ValueError:
            return None
        return moment.timestamp()  # naive: local time, as the log's writer meant it
    stamp = _SYSLOG_STAMP.match(line)
    if stamp is None:
        return None
    year = time.localtime(now).tm_year
    hour, minute, second = (int(part) for part in stamp["time"].split(":"))
    month = _MONTHS.index(stamp["month"]) + 1
    candidates = []
    for candidate in (year, year - 1):
        try:
            candidates.append(
                datetime(candidate, month, int(stamp["day"]), hour, minute, second).timestamp()
            )
        except ValueError:  # 29 February in a year without one, a day 31 of a short month
            continue
    return min(candidates, key=lambda at: abs(at - now)) if candidates else None


def parse_link_flaps(text: str, now: float | None = None) -> list[LinkFlap]:
    found = []
    for raw in text.splitlines():
        if "lost carrier" not in raw.lower():
            continue
        line = raw.strip()
        interface = _IB_INTERFACE.search(line)
        if interface:
            stamp = _STAMP.match(line)
            found.append(
                LinkFlap(
                    interface.group(1),
                    line[:300],
                    float(stamp["seconds"]) if stamp else None,
                    None if stamp else line_time(line, now),
                )
            )
    return found


def read_uptime_seconds() -> float | None:
    try:
        with open("/proc/uptime", encoding="ascii") as stream:
            return float(stream.read().split()[0])
    except (OSError, ValueError, IndexError):
        return None


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


# A file to read instead of dmesg: a kernel log saved or mounted from the host (a container
# cannot read the ring buffer), e.g. `journalctl -k -b > kernel.log`.
KERNEL_LOG_ENV = "GPUACCEPT_KERNEL_LOG"


def read_kernel_log_file(path: str) -> str | None:
    """The last _MAX_BYTES of a regular file; None for anything else (a FIFO would block the
    open, /dev/zero never ends) or an unreadable one."""
    try:
        # O_NONBLOCK: opening a FIFO with no writer returns at once instead of waiting for one
        descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError:
        return None
    with os.fdopen(descriptor, "rb") as stream:
        try:
            if not stat.S_ISREG(os.fstat(descriptor).st_mode):
                return None
            stream.seek(0, os.SEEK_END)
            stream.seek(max(0, stream.tell() - _MAX_BYTES))
            return stream.read(_MAX_BYTES).decode("utf-8", "replace")
        except OSError:
            return None


def check_kernel_log_setting() -> None:
    """Refuse (exit 2, before a run) a GPUACCEPT_KERNEL_LOG that is not a readable regular file."""
    from gpuaccept.errors import InputError

    path = os.environ.get(KERNEL_LOG_ENV)
    if not path:
        return
    try:
        mode = os.stat(path).st_mode
    except OSError as error:
        raise InputError(f"{KERNEL_LOG_ENV}={path}: {error.strerror}") from None
    if not stat.S_ISREG(mode):
        raise InputError(f"{KERNEL_LOG_ENV}={path}: not a regular file (a saved kernel log)")
    if not os.access(path, os.R_OK):
        raise InputError(f"{KERNEL_LOG_ENV}={path}: not readable")


def scan_kernel_log(read: Callable[[], str | None] | None = None) -> KernelLogScan:
    """XID lines since boot from `dmesg` (or the file GPUACCEPT_KERNEL_LOG names); a note
    instead when the log cannot be read here.

    (/dev/kmsg is the same buffer, but a read of it blocks at its end.)
    """
    path = os.environ.get(KERNEL_LOG_ENV)
    if read is None and path:
        text, source = read_kernel_log_file(path), path
    else:
        text, source = (read or read_dmesg)(), "dmesg"
    if text is None:
        why = (
            f"{KERNEL_LOG_ENV}={path} could not be read"
            if source != "dmesg"
            else "dmesg refused: container or dmesg_restrict"
        )
        return KernelLogScan(readable=False, source=f"kernel log not readable here ({why})")
    return KernelLogScan(
        readable=True,
        source=source,
        xids=tuple(parse_kernel_log(text)),
        flaps=tuple(parse_link_flaps(text)),
        # dmesg's stamps count from this boot; a saved file's may come from another one
        uptime_seconds=read_uptime_seconds() if source == "dmesg" else None,
    )
