"""probe.kernel_log: every line the field prints, in every form it is saved in, with its time
(issue #50 §3-4)."""

from __future__ import annotations

import os
import time
from datetime import datetime
from pathlib import Path

import pytest

from gpuaccept.checks.fabric import judge_link_flaps
from gpuaccept.checks.judging import Findings
from gpuaccept.probe import kernel_log
from gpuaccept.probe.kernel_log import (
    parse_kernel_log,
    parse_link_flaps,
    parse_sxids,
    scan_kernel_log,
    stamped,
)

XID = "NVRM: Xid (PCI:0000:cb:00): 79, pid=1, GPU has fallen off the bus."
# 10:00:00 local time on 28 November 2026, and a boot 100,000 s before it
AT = datetime(2026, 11, 28, 10, 0, 0).timestamp()
BOOT = AT - 100_000.0
NOW = AT + 60.0


def _utc_offset() -> str:
    offset = datetime.fromtimestamp(AT).astimezone().utcoffset()
    seconds = round(offset.total_seconds()) if offset is not None else 0
    sign = "+" if seconds >= 0 else "-"
    return f"{sign}{abs(seconds) // 3600:02d}{abs(seconds) % 3600 // 60:02d}"


# each form an operator saves a kernel log in, the XID line as it prints it
FORMATS = {
    "dmesg": f"[100000.000000] {XID}",
    "dmesg -T": f"[Sat Nov 28 10:00:00 2026] {XID}",
    "dmesg --time-format=iso": f"2026-11-28T10:00:00,000000{_utc_offset()[:3]}:"
    f"{_utc_offset()[3:]} {XID}",
    "dmesg -x": f"kern  :warn  : [100000.000000] {XID}",
    "journalctl -k": f"Nov 28 10:00:00 node1 kernel: {XID}",
    "journalctl -k -o short-iso": f"2026-11-28T10:00:00{_utc_offset()} node1 kernel: {XID}",
    "syslog": f"Nov 28 10:00:00 node1 kernel: {XID}",
    "syslog with a dmesg stamp": f"Nov 28 10:00:00 node1 kernel: [100000.000000] {XID}",
    "/dev/kmsg": f"3,4521,100000000000,-;{XID}",
}


@pytest.mark.parametrize("form", sorted(FORMATS))
@pytest.mark.parametrize("end", ["\n", "\r\n"])
def test_every_format_keeps_the_lines_time(form: str, end: str) -> None:
    (found,) = parse_kernel_log(FORMATS[form] + end, now=NOW, boot_at=BOOT)
    assert (found.xid, found.pci_bus_id) == (79, "0000:cb:00")
    assert found.at == pytest.approx(AT, abs=1e-3), form
    assert not found.line.endswith("\r")


def test_a_line_with_no_stamp_has_no_time_and_seconds_since_boot_need_the_boot() -> None:
    (bare,) = parse_kernel_log(XID, now=NOW, boot_at=BOOT)
    assert bare.at is None
    (unbooted,) = parse_kernel_log(FORMATS["dmesg"], now=NOW)
    assert (unbooted.at, unbooted.seconds_since_boot) == (None, 100_000.0)
    # a dated line keeps its date whatever boot it came from
    assert stamped(FORMATS["syslog with a dmesg stamp"], NOW).seconds_since_boot == 100_000.0


def test_nvswitch_sxid_lines_are_bound_to_their_switch() -> None:
    # the forms of gpud's components/accelerator/nvidia/sxid/kmsg.go (leptonai/gpud 4a8de33)
    log = (
        "[131453.740743] nvidia-nvswitch0: SXid (PCI:0000:00:00.0): 20034, Fatal, Link 30 LTSSM"
        " Fault Up\n"
        "nvidia-nvswitch3: SXid (PCI:0000:05:00.0): 24007, Fatal, Link 30 sourcetrack timeout "
        "error\n"
        "nvidia-nvswitch3: SXid (PCI:0000:05:00.0): 24007, Data {0x0, 0x1}\n"
        "[1.0] nvidia-nvswitch2: SXid (PCI:0000:07:00.0): 12028, Non-fatal, Link 32 egress "
        "non-posted PRIV error (First)\n"
    )
    found = parse_sxids(log)
    assert [(s.switch, s.pci_bus_id, s.sxid, s.fatal) for s in found] == [
        ("nvidia-nvswitch0", "0000:00:00.0", 20034, True),
        ("nvidia-nvswitch3", "0000:05:00.0", 24007, True),
        ("nvidia-nvswitch2", "0000:07:00.0", 12028, False),
    ]
    assert not parse_kernel_log(log)  # an SXid is no XID


def test_fallen_off_the_bus_without_an_xid_is_xid_79_once_per_gpu() -> None:
    # gpud's kmsg_test.go TestMatch lines (leptonai/gpud 4a8de33)
    log = (
        "NVRM: The NVIDIA GPU 0000:18:00.0\n"
        "NVRM: (PCI ID: 10de:2901) installed in this system has\n"
        "NVRM: fallen off the bus and is not responding to commands.\n"
        "NVRM: GPU 18:00.0: GPU has fallen off the bus.\n"
        "NVRM: GPU 0000:29:00.0: GPU has fallen off the bus.\n"
        "NVRM: The NVIDIA GPU invalid-bdf.0\n"
        "NVRM: fallen off the bus and is not responding to commands.\n"
    )
    found = parse_kernel_log(log)
    assert [(x.xid, x.pci_bus_id, x.without_xid) for x in found] == [
        (79, "0000:18:00", True),
        (79, "0000:29:00", True),
    ]
    # beside an Xid 79 line for the same GPU it is the same event, not a second one
    both = f"{XID.replace('cb', '29')}\nNVRM: GPU 0000:29:00.0: GPU has fallen off the bus.\n"
    assert [(x.xid, x.without_xid) for x in parse_kernel_log(both)] == [(79, False)]


def test_xid_154_names_the_recovery_action_and_nvlink5_lines_their_words() -> None:
    log = (
        "[171167.620236] NVRM: Xid (PCI:0009:01:00): 149, NETIR_LINK_EVT  Fatal   XC0 i0 Link 01"
        " (0x021425c6 0x00000000 0x00000000 0x00000000 0x00000000 0x00000000)\n"
        "[171167.897562] NVRM: Xid (PCI:0019:01:00): 154, GPU recovery action changed from 0x4 "
        "(Drain and Reset) to 0x1 (GPU Reset Required)\n"
    )
    nvlink, recovery = parse_kernel_log(log)
    assert (nvlink.unit, nvlink.severity, nvlink.intrinfo, nvlink.error_status) == (
        "NETIR_LINK_EVT",
        "Fatal",
        0x021425C6,
        0,
    )
    assert (recovery.xid, recovery.pci_bus_id, recovery.recovery_action) == (
        154,
        "0019:01:00",
        "GPU reset",
    )


def test_a_saved_log_is_dated_from_this_boot_only_when_it_was_saved_in_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    uptime = 50_000.0
    monkeypatch.setattr(kernel_log, "read_uptime_seconds", lambda: uptime)
    now = time.time()
    saved = tmp_path / "kernel.log"
    saved.write_text(f"[49000.000000] {XID}\n")
    monkeypatch.setenv(kernel_log.KERNEL_LOG_ENV, str(saved))
    (found,) = scan_kernel_log(now=now).xids
    assert found.at == pytest.approx(now - uptime + 49_000.0)
    # a stamp later than this boot's uptime is another boot's: no date, and said once
    saved.write_text(f"[99000.000000] {XID}\n")
    scan = scan_kernel_log(now=now)
    assert (scan.xids[0].at, scan.undated, scan.boot_at) == (None, 1, None)
    # a file written before this boot began cannot hold this boot's lines
    saved.write_text(f"[49000.000000] {XID}\n")
    os.utime(saved, (now - uptime - 10, now - uptime - 10))
    assert scan_kernel_log(now=now).xids[0].at is None


def test_five_link_flaps_stamped_in_seconds_since_boot_are_judged(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """aznhc fails at five lost-carrier lines in 24 h (issue #50 §7): dmesg's stamps are dated
    from the boot time, so the flap rule reads them as it reads a syslog's dates."""
    monkeypatch.setattr(kernel_log, "read_uptime_seconds", lambda: 10_000.0)
    lines = "".join(f"[{9000 + i}.000000] mlx5_core ib0: lost carrier\n" for i in range(5))
    now = time.time()
    scan = scan_kernel_log(lambda: lines, now=now)
    assert all(flap.at is not None for flap in scan.flaps)
    findings = Findings("fabric", "FABRIC")
    assert judge_link_flaps(scan, findings, now=now) == {"ib0": 5}
    assert "aznhc fails at 5" in findings.failures[0]
    # the same five without a boot to date them from are not judged
    assert all(f.at is None for f in parse_link_flaps(lines))


def test_dmesg_is_dated_from_the_boot(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(kernel_log, "read_uptime_seconds", lambda: 100_060.0)
    scan = scan_kernel_log(lambda: FORMATS["dmesg"], now=NOW)
    assert scan.boot_at == pytest.approx(NOW - 100_060.0)
    assert scan.xids[0].at == pytest.approx(AT)
    assert scan.undated == 0


# A GB200 tray: each GPU in its own PCI domain (FIELD-NOTES 2026-11-28), and VMD's 5-digit one
GB200 = ("0008:01:00", "0009:01:00", "0018:01:00", "0019:01:00")


def test_gb200_domains_and_a_five_digit_domain_are_kept_in_every_line_form() -> None:
    log = (
        f"NVRM: Xid (PCI:{GB200[0]}): 79, pid=1, GPU has fallen off the bus.\n"
        f"NVRM: GPU {GB200[1]}.0: GPU has fallen off the bus.\n"
        f"NVRM: The NVIDIA GPU {GB200[2]}.0\n"
        "NVRM: (PCI ID: 10de:2941) installed in this system has\n"
        "NVRM: fallen off the bus and is not responding to commands.\n"
        f"NVRM: Xid (PCI:{GB200[3]}): 48, pid=1, DBE\n"
        "NVRM: GPU 10000:01:00.0: GPU has fallen off the bus.\n"
        "NVRM: The NVIDIA GPU 10001:01:00.0\n"
        "NVRM: fallen off the bus and is not responding to commands.\n"
    )
    found = [(x.xid, x.pci_bus_id) for x in parse_kernel_log(log)]
    assert sorted(found) == sorted(
        [
            *((79, pci) for pci in GB200[:3]),
            (48, GB200[3]),
            (79, "10000:01:00"),
            (79, "10001:01:00"),
        ]
    )


def test_an_address_printed_without_a_domain_gets_none_it_did_not_have() -> None:
    # gpud's normalizePCIBDF makes `18:00.0` 0000:18:00: on a GB200 tray that is another GPU
    (found,) = parse_kernel_log("NVRM: GPU 01:00.0: GPU has fallen off the bus.\n")
    assert found.pci_bus_id == "01:00"
    # NVML's 8-digit spelling of the domain is the driver's 4-digit one
    (nvml,) = parse_kernel_log("NVRM: Xid (PCI:00000008:01:00.0): 79, pid=1, off the bus\n")
    assert nvml.pci_bus_id == "0008:01:00"


def test_a_fallen_line_beside_another_domains_xid_79_is_its_own_gpu() -> None:
    # the same bus and device in another domain is another GPU: its fallen line is kept
    log = (
        "NVRM: Xid (PCI:0008:01:00): 79, pid=1, GPU has fallen off the bus.\n"
        "NVRM: GPU 0009:01:00.0: GPU has fallen off the bus.\n"
        "NVRM: GPU 00000008:01:00.0: GPU has fallen off the bus.\n"  # 0008's, said again
    )
    assert [(x.pci_bus_id, x.without_xid) for x in parse_kernel_log(log)] == [
        ("0008:01:00", False),
        ("0009:01:00", True),
    ]
    # without a domain it is the one GPU at 01:00 when one only has an Xid 79, else its own
    one = (
        "NVRM: Xid (PCI:0008:01:00): 79, pid=1, off\n"
        "NVRM: GPU 01:00.0: GPU has fallen off the bus.\n"
    )
    assert len(parse_kernel_log(one)) == 1
    two = one + "NVRM: Xid (PCI:0009:01:00): 79, pid=1, off\n"
    assert [x.pci_bus_id for x in parse_kernel_log(two)] == ["0008:01:00", "0009:01:00", "01:00"]


def test_the_lines_read_are_those_a_test_of_every_line_would_read() -> None:
    """The words are found in the whole text at once; the lines kept are exactly those of
    text.splitlines() that _wanted keeps, whatever the separators (\\r, \\x0b, U+2028, ...)."""
    import random

    parts = ["Xid", "NVIDIA GPU", "fallen off the bus", "arrier", "ARRIER", "Xi", "d", "eth0 "]
    parts += ["\n", "\r", "\r\n", "\x0b", "\x85", "\u2028", " 79, ", "x"]
    chance = random.Random(54)
    for _ in range(3000):
        text = "".join(chance.choice(parts) for _ in range(chance.randint(0, 40)))
        every_line = [raw for raw in text.splitlines() if kernel_log._wanted(raw)]
        assert list(kernel_log._wanted_lines(text)) == every_line, repr(text)


def test_a_saved_log_unchanged_since_the_last_poll_is_not_read_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`watch` read and searched a 32 MiB kern.log every poll (0.26 s of CPU, 2.6% of a core at
    10 s); an unchanged file is read once, a changed one again."""
    log = tmp_path / "kern.log"
    log.write_text("2026-11-29T01:00:00,000000+00:00 h kernel: NVRM: Xid (PCI:0000:18:00): 79\n")
    settled = time.time() - 60
    os.utime(log, (settled, settled))
    monkeypatch.setenv("GPUACCEPT_KERNEL_LOG", str(log))
    reads: list[str] = []
    real = kernel_log.read_kernel_log_file
    monkeypatch.setattr(
        kernel_log, "read_kernel_log_file", lambda path: reads.append(path) or real(path)
    )
    first, again = scan_kernel_log(), scan_kernel_log()
    assert len(reads) == 1
    assert [x.xid for x in first.xids] == [x.xid for x in again.xids] == [79]
    with log.open("a") as stream:  # a new line: the file is read again
        stream.write("2026-11-29T01:00:05,000000+00:00 h kernel: NVRM: Xid (PCI:0000:2a:00): 48\n")
    assert [x.xid for x in scan_kernel_log().xids] == [79, 48]
    assert len(reads) == 2
    # a file changed within the last second is read again, same size or not (a coarse clock)
    log.write_text(log.read_text().replace("0000:2a:00): 48", "0000:2a:00): 63"))
    assert [x.xid for x in scan_kernel_log().xids] == [79, 63]
