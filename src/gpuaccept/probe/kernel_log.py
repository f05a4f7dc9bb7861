"""`NVRM: Xid`, NVSwitch `SXid` and link-flap lines in the kernel log since boot, when this
process may read it, each with its time.

Inside containers and for unprivileged users the kernel ring buffer is usually closed
(dmesg_restrict); that is reported as a reason, never as "no XID".
"""

from __future__ import annotations

import os
import re
import stat
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from gpuaccept.probe.pci_address import match_gpu, parse_pci_address

# NVRM: Xid (PCI:0000:cb:00): 79, pid=..., GPU has fallen off the bus.
_XID_LINE = re.compile(
    r"NVRM: Xid \((?:PCI:)?(?P<pci>[0-9A-Fa-f:.]+)(?: [^)]*)?\): (?P<xid>\d+)\b(?P<rest>.*)"
)
# Blackwell's NVLink XIDs 144-150 name their unit, severity and words (gpud's
# RegexNVRMXidExtended, components/accelerator/nvidia/xid/kmsg.go at leptonai/gpud 4a8de33):
#   149, NETIR_LINK_EVT  Fatal   XC0 i0 Link 01 (0x021425c6 0x00000000 ...)
_NVLINK5_REST = re.compile(
    r"^(?:, pid=[^,]*, name=[^,]*)?, (?P<unit>[A-Z_]+(?:/[A-Z_]+)?)\s+(?P<severity>Nonfatal|Fatal)"
    r"\s+XC[01]\s+i\d+\s+Link\s+(?P<link>-?\d+)\s+\((?P<intrinfo>0x[0-9a-fA-F]+)\s+"
    r"(?P<status>0x[0-9a-fA-F]+)"
)
# XID 154: "GPU recovery action changed from 0x0 (None) to 0x1 (GPU Reset Required)" (gpud's
# kmsg_test.go lines); the value is nvmlDeviceGpuRecoveryAction_t (probe/nvml_health.py)
_RECOVERY_CHANGE = re.compile(r"recovery action changed from .*? to (?P<value>0x[0-9a-fA-F]+|\d+)")
# "GPU has fallen off the bus" without an Xid: NVRM's single line and its three-line form, which
# gpud reads as XID 79 (RegexNVRMFallenOffBusSingleLine / ...Multiline, kmsg.go)
# gpud's patterns take a 4-digit domain; the kernel prints "%04x" (at least 4 digits,
# probe/pci_address.py), so VMD's domain 10000 would leave the line unread: 4 to 8 digits here.
_FALLEN_SINGLE = re.compile(
    r"NVRM:\s+GPU (?P<pci>(?:[0-9a-fA-F]{4,8}:)?[0-9a-fA-F]{2}:[0-9a-fA-F]{2})\.\d:\s+GPU has "
    r"fallen off the bus"
)
_FALLEN_FIRST = re.compile(
    r"NVRM:\s+The NVIDIA GPU (?P<pci>(?:[0-9a-fA-F]{4,8}:)?[0-9a-fA-F]{2}:[0-9a-fA-F]{2})\.\d"
)
_FALLEN_LAST = "fallen off the bus and is not responding to commands"
# nvidia-nvswitch3: SXid (PCI:0000:05:00.0): 24007, Fatal, Link 30 sourcetrack timeout error
# (gpud's RegexNVSwitchSXidKMessage, components/accelerator/nvidia/sxid/kmsg.go); a following
# `..., Data {...}` line details the same error and is not counted again
_SXID_LINE = re.compile(
    r"(?:(?P<switch>nvidia-nvswitch\d+): )?SXid \((?:PCI:)?(?P<pci>[0-9A-Fa-f:.]+)\): "
    r"(?P<sxid>\d+),\s*(?P<rest>.*)"
)
_READ_TIMEOUT_SECONDS = 10.0
_MAX_BYTES = 64 * 1024 * 1024  # a kernel log larger than this is cut: only its tail is read


@dataclass(frozen=True)
class KernelXid:
    xid: int
    # domain:bus:device as the kernel spells it (0000:cb:00, 0008:01:00, 10000:01:00); bus:device
    # alone when the line gave no domain
    pci_bus_id: str
    line: str
    seconds_since_boot: float | None = None  # dmesg's [12345.678] stamp, when the line has one
    at: float | None = None  # the line's time, seconds since the epoch, when it can be known
    unit: str = ""  # NVLink5 XIDs (144-150): the unit, e.g. NETIR_LINK_EVT
    severity: str = ""  # NVLink5 XIDs: Fatal or Nonfatal, as printed
    intrinfo: int | None = None  # NVLink5 XIDs: the first word
    error_status: int | None = None  # NVLink5 XIDs: the second word
    recovery_action: str | None = None  # XID 154: the NVML recovery action it changed to
    without_xid: bool = False  # a "fallen off the bus" message read as XID 79


@dataclass(frozen=True)
class KernelSxid:
    """An NVSwitch SXid line, bound to its switch."""

    sxid: int
    switch: str  # nvidia-nvswitchN, or "" when the line does not say
    pci_bus_id: str  # the switch's PCI address, as printed (domain:bus:device.function)
    fatal: bool | None  # as printed: Fatal / Non-fatal; None when the line says neither
    line: str
    seconds_since_boot: float | None = None
    at: float | None = None


@dataclass(frozen=True)
class LinkFlap:
    """A log line saying an InfiniBand interface lost its carrier (a link flap)."""

    interface: str
    line: str
    seconds_since_boot: float | None = None  # dmesg's [12345.678] stamp
    at: float | None = None  # the line's time as seconds since the epoch (any format's stamp)


@dataclass(frozen=True)
class KernelLogScan:
    readable: bool
    source: str  # "dmesg", a file path, or why nothing could be read
    xids: tuple[KernelXid, ...] = ()
    flaps: tuple[LinkFlap, ...] = ()
    uptime_seconds: float | None = None  # this boot's, when the log is this boot's (dmesg)
    sxids: tuple[KernelSxid, ...] = ()
    boot_at: float | None = None  # when this boot began (epoch), when the log is this boot's
    undated: int = 0  # lines read (XID, SXid, flap) whose time cannot be known


# --- each line's time -----------------------------------------------------------------------
# The forms operators save a kernel log in (issue #50 §4), each line's time read from its own
# stamp: dmesg `[  123.456]` (seconds since boot), dmesg -T `[Sat Nov 28 10:00:00 2026]`,
# dmesg --time-format=iso `2026-11-28T10:00:00,123456+00:00`, dmesg -x `kern  :warn  : [...]`,
# journalctl -k `Nov 28 10:00:00 host kernel: ...` and -o short-iso `2026-11-28T10:00:00+0000 ...`,
# syslog with or without a dmesg stamp after its date, /dev/kmsg `4,1234,123456789,-;...`
# (microseconds since boot), any of them with CRLF line ends.
_STAMP = re.compile(r"^\[\s*(?P<seconds>\d+\.\d+)\]")
_INNER_STAMP = re.compile(r"\[\s*(?P<seconds>\d+\.\d+)\]")
_KMSG = re.compile(r"^(?P<level>\d+),(?P<seq>\d+),(?P<usec>\d+),[^;]*;(?P<message>.*)$")
_DMESG_X = re.compile(
    r"^(?:kern|user|mail|daemon|auth|syslog|lpr|news|uucp|cron|authpriv|ftp|local[0-7])\s*:"
    r"\s*(?:emerg|alert|crit|err|warn|notice|info|debug)\s*:\s?"
)
_MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")
_CTIME = re.compile(
    rf"^\[(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun) (?P<month>{'|'.join(_MONTHS)})\s+(?P<day>\d{{1,2}}) "
    r"(?P<time>\d{2}:\d{2}:\d{2}) (?P<year>\d{4})\]"
)
_SYSLOG_STAMP = re.compile(
    rf"^(?P<month>{'|'.join(_MONTHS)})\s+(?P<day>\d{{1,2}})\s+(?P<time>\d{{2}}:\d{{2}}:\d{{2}})\b"
)
_ISO_STAMP = re.compile(
    r"^(?P<iso>\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(?:[.,]\d+)?(?:Z|[+-]\d{2}:?\d{2})?)"
)


@dataclass(frozen=True)
class StampedLine:
    """A log line without its stamps, and the time they give."""

    text: str
    at: float | None  # seconds since the epoch, from the line's own date or its boot's
    seconds_since_boot: float | None


def stamped(raw: str, now: float | None = None, boot_at: float | None = None) -> StampedLine:
    """The line's time from whichever stamp it carries: its own date where it has one, else its
    seconds since boot dated from `boot_at` (None when neither is known)."""
    line = raw.strip()
    since_boot: float | None = None
    at: float | None = None
    kmsg = _KMSG.match(line)
    if kmsg:
        since_boot, line = int(kmsg["usec"]) / 1e6, kmsg["message"].strip()
    line = _DMESG_X.sub("", line, count=1)
    ctime = _CTIME.match(line)
    if ctime:
        at = _local_time(int(ctime["year"]), ctime["month"], int(ctime["day"]), ctime["time"])
        line = line[ctime.end() :].strip()
    elif _ISO_STAMP.match(line) or _SYSLOG_STAMP.match(line):
        at = line_time(line, now)
    if since_boot is None:
        inner = _STAMP.match(line) if at is None else _INNER_STAMP.search(line[:200])
        if inner:
            since_boot = float(inner["seconds"])
    if at is None and since_boot is not None and boot_at is not None:
        at = boot_at + since_boot
    return StampedLine(line, at, since_boot)


def _local_time(year: int, month: str, day: int, clock: str) -> float | None:
    from datetime import datetime

    hour, minute, second = (int(part) for part in clock.split(":"))
    try:
        return datetime(year, _MONTHS.index(month) + 1, day, hour, minute, second).timestamp()
    except ValueError:
        return None


def _pci(text: str) -> str:
    """domain:bus:device in the kernel's spelling (`probe.pci_address`): `00000008:01:00.0` ->
    `0008:01:00`. An address printed without a domain stays without one (`18:00.0` -> `18:00`):
    gpud's normalizePCIBDF makes it `0000:18:00`, which names another GPU on a GB200 tray, where
    each GPU has its own domain (`0008:01:00` ... `0019:01:00`)."""
    address = parse_pci_address(text)
    return text.lower().removeprefix("pci:") if address is None else str(address)


def _recovery_action(rest: str) -> str | None:
    from gpuaccept.probe.nvml_health import RECOVERY_ACTIONS

    change = _RECOVERY_CHANGE.search(rest)
    if change is None:
        return None
    value = int(change["value"], 0)
    return RECOVERY_ACTIONS.get(value, f"unknown ({value})")


def _xid_of(line: StampedLine) -> KernelXid | None:
    match = _XID_LINE.search(line.text)
    if match is None:
        return None
    xid, rest = int(match["xid"]), match["rest"]
    extended = _NVLINK5_REST.match(rest) if 144 <= xid <= 150 else None
    return KernelXid(
        xid,
        _pci(match["pci"]),
        line.text[:300],
        line.seconds_since_boot,
        line.at,
        unit=extended["unit"] if extended else "",
        severity=extended["severity"] if extended else "",
        intrinfo=int(extended["intrinfo"], 16) if extended else None,
        error_status=int(extended["status"], 16) if extended else None,
        recovery_action=_recovery_action(rest) if xid == 154 else None,
    )


def _sxid_of(line: StampedLine) -> KernelSxid | None:
    match = _SXID_LINE.search(line.text)
    if match is None or match["rest"].startswith("Data {"):
        return None
    severity = match["rest"].split(",", 1)[0].strip().lower()
    fatal = {"fatal": True, "non-fatal": False, "nonfatal": False}.get(severity)
    return KernelSxid(
        int(match["sxid"]),
        match["switch"] or "",
        match["pci"].lower(),
        fatal,
        line.text[:300],
        line.seconds_since_boot,
        line.at,
    )


def _wanted(raw: str) -> bool:
    """Whether a line can be one read here: only those are stamped (a 64 MiB log is mostly
    others; plain substring tests keep the scan about as fast as before every line had a time).
    `lost carrier` is matched in any case later, as aznhc's `grep -i`."""
    return (
        "Xid" in raw
        or "NVIDIA GPU" in raw
        or "fallen off the bus" in raw
        or "arrier" in raw
        or "ARRIER" in raw
    )


# _wanted's words, found by str.find over the whole text (a C scan each): a Python test of
# each of a 32 MiB kern.log's 320,000 lines cost 0.23 s of CPU, every poll of `watch` (2.6% of
# a core at its 10 s interval, over issue #54's 1%)
_WANTED_WORDS = ("Xid", "NVIDIA GPU", "fallen off the bus", "arrier", "ARRIER")


def _wanted_lines(text: str) -> Iterator[str]:
    """The lines of `text.splitlines()` that are `_wanted`, in order, each once: only the
    newline-ended pieces holding one of its words are split and tested."""
    pieces: set[int] = set()
    for word in _WANTED_WORDS:
        at = text.find(word)
        while at >= 0:
            start = text.rfind("\n", 0, at) + 1
            pieces.add(start)
            end = text.find("\n", at)
            if end < 0:
                break
            at = text.find(word, end)
    for start in sorted(pieces):
        end = text.find("\n", start)
        piece = text[start:] if end < 0 else text[start:end]
        yield from (raw for raw in piece.splitlines() if _wanted(raw))


def _lines(text: str, now: float | None, boot_at: float | None) -> list[StampedLine]:
    return [stamped(raw, now, boot_at) for raw in _wanted_lines(text)]


def parse_kernel_log(
    text: str, now: float | None = None, boot_at: float | None = None
) -> list[KernelXid]:
    """Every XID the log names: `NVRM: Xid` lines, and "fallen off the bus" messages that carry
    no Xid as XID 79 (once per GPU, and not where the same GPU has an Xid 79 line)."""
    return _parse_xids(_lines(text, now, boot_at))


def _parse_xids(lines: list[StampedLine]) -> list[KernelXid]:
    found: list[KernelXid] = []
    fallen: list[KernelXid] = []
    opened: str | None = None  # the GPU of a three-line "The NVIDIA GPU ..." message
    for line in lines:
        xid = _xid_of(line)
        if xid is not None:
            found.append(xid)
            continue
        single = _FALLEN_SINGLE.search(line.text)
        first = _FALLEN_FIRST.search(line.text)
        if first:
            opened = _pci(first["pci"])
        pci = _pci(single["pci"]) if single else None
        if pci is None and opened is not None and _FALLEN_LAST in line.text:
            pci, opened = opened, None
        if pci is not None:
            fallen.append(
                KernelXid(
                    79,
                    pci,
                    line.text[:300],
                    line.seconds_since_boot,
                    line.at,
                    without_xid=True,
                )
            )
    with_xid79 = {x.pci_bus_id for x in found if x.xid == 79}
    for xid in fallen:
        if not _named_among(xid.pci_bus_id, with_xid79):
            found.append(xid)
            with_xid79.add(xid.pci_bus_id)
    return found


def _named_among(pci: str, addresses: set[str]) -> bool:
    """Whether `pci` names one of `addresses`' GPUs: domain compared as a number; an address
    without a domain only where a single one of them has its bus and device."""
    address = parse_pci_address(pci)
    if address is None:
        return pci in addresses
    known = sorted(addresses)
    return match_gpu(address, [parse_pci_address(a) for a in known]) is not None


def parse_sxids(
    text: str, now: float | None = None, boot_at: float | None = None
) -> list[KernelSxid]:
    return [s for s in (_sxid_of(line) for line in _lines(text, now, boot_at)) if s is not None]


# aznhc's check_ib_link_flapping (customTests/azure_ib_link_flapping.nhc at Azure/
# azurehpc-health-checks 0ce3f7c) greps the *syslog* for "lost carrier" (case-insensitive), dates
# each line by its syslog stamp (month, day and time, in the year that puts it nearest now) and
# counts the lines of the last 24 hours per interface, the first match of ib[0-9a-zA-Z_]+
# (get_linkflap_count). The kernel itself prints no "lost carrier" for an IPoIB interface:
# systemd-networkd and NetworkManager write it to the journal, and mlx5's Ethernet ports to the
# kernel log. So the lines are read from dmesg or from the file GPUACCEPT_KERNEL_LOG names (the
# syslog, as aznhc reads it), dated by whichever stamp they carry (`stamped`): a date, or dmesg's
# seconds since boot dated from the boot time. The interface is the ib... word that a colon
# follows, never an ib inside a longer word (a host named `calib01` is no interface).
_IB_INTERFACE = re.compile(r"(?<![\w.-])(ib[0-9a-zA-Z_]+):")


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
    candidates = [
        at
        for at in (
            _local_time(candidate, stamp["month"], int(stamp["day"]), stamp["time"])
            for candidate in (year, year - 1)
        )
        if at is not None  # 29 February in a year without one, a day 31 of a short month
    ]
    return min(candidates, key=lambda at: abs(at - now)) if candidates else None


def parse_link_flaps(
    text: str, now: float | None = None, boot_at: float | None = None
) -> list[LinkFlap]:
    return _parse_flaps(_lines(text, now, boot_at))


def _parse_flaps(lines: list[StampedLine]) -> list[LinkFlap]:
    found = []
    for line in lines:
        if "lost carrier" not in line.text.lower():
            continue
        interface = _IB_INTERFACE.search(line.text)
        if interface:
            found.append(
                LinkFlap(interface.group(1), line.text[:300], line.seconds_since_boot, line.at)
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


# The wanted lines of the saved log read last, by the file's identity and change: `watch` reads
# it every poll, and an unchanged kern.log of 32 MiB cost 0.1 s of CPU to read and search again
_last_file: tuple[tuple[str, int, int, int, int], list[str]] | None = None


def _wanted_in_file(path: str) -> list[str] | None:
    """The `_wanted` lines of the file's last _MAX_BYTES (read_kernel_log_file), from the last
    read while the file is the same one, unchanged (device, inode, size, modification time)."""
    global _last_file
    try:
        info = os.stat(path)
    except OSError:
        return None
    identity = (path, info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns)
    # a file changed in the last second is read again: the kernel stamps a change with a coarse
    # clock (a tick of up to 10 ms), so two writes of one size within a tick look the same
    settled = time.time() - info.st_mtime > 1.0
    if settled and _last_file is not None and _last_file[0] == identity:
        return list(_last_file[1])
    text = read_kernel_log_file(path)
    if text is None:
        return None
    raws = list(_wanted_lines(text))
    _last_file = (identity, raws)
    return list(raws)


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


def scan_kernel_log(
    read: Callable[[], str | None] | None = None, now: float | None = None
) -> KernelLogScan:
    """XID, SXid and link-flap lines since boot from `dmesg` (or the file GPUACCEPT_KERNEL_LOG
    names), each with its time; a note instead when the log cannot be read here.

    (/dev/kmsg is the same buffer, but a read of it blocks at its end.)
    """
    import time

    now = time.time() if now is None else now
    path = os.environ.get(KERNEL_LOG_ENV)
    raws: list[str] | None
    if read is None and path:
        raws, source = _wanted_in_file(path), path
    else:
        text, source = (read or read_dmesg)(), "dmesg"
        raws = None if text is None else list(_wanted_lines(text))
    if raws is None:
        why = (
            f"{KERNEL_LOG_ENV}={path} could not be read"
            if source != "dmesg"
            else "dmesg refused: container or dmesg_restrict"
        )
        return KernelLogScan(readable=False, source=f"kernel log not readable here ({why})")
    uptime = read_uptime_seconds()
    boot_at = None if uptime is None else now - uptime
    lines = [stamped(raw, now, boot_at) for raw in raws]
    if source != "dmesg" and not _this_boots(path, lines, uptime, boot_at):
        boot_at = None  # a saved file's seconds since boot may count from another boot
        lines = [stamped(raw, now, None) for raw in raws]
    xids, sxids, flaps = _parse_xids(lines), tuple(_parse_sxids(lines)), _parse_flaps(lines)
    times = [x.at for x in xids] + [s.at for s in sxids] + [f.at for f in flaps]
    undated = sum(1 for at in times if at is None)
    return KernelLogScan(
        readable=True,
        source=source,
        xids=tuple(xids),
        flaps=tuple(flaps),
        # dmesg's stamps count from this boot; a saved file's only when it was saved in it
        uptime_seconds=uptime if boot_at is not None else None,
        sxids=sxids,
        boot_at=boot_at,
        undated=undated,
    )


def _parse_sxids(lines: list[StampedLine]) -> list[KernelSxid]:
    return [s for s in (_sxid_of(line) for line in lines) if s is not None]


def _this_boots(
    path: str | None, lines: list[StampedLine], uptime: float | None, boot_at: float | None
) -> bool:
    """Whether a saved log's seconds since boot count from this boot: it was written since this
    boot began and none of its stamps is later than this boot's uptime (a log of an earlier,
    longer boot has one; a shorter one cannot be told apart, and is dated as this boot's)."""
    if path is None or uptime is None or boot_at is None:
        return False
    try:
        if os.stat(path).st_mtime < boot_at:
            return False
    except OSError:
        return False
    stamps = [line.seconds_since_boot for line in lines if line.seconds_since_boot is not None]
    return bool(stamps) and max(stamps) <= uptime + 1.0
