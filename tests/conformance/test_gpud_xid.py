"""gpud's XID reading (leptonai/gpud@4a8de33a3f02e207f39e9023d67125592d599731), case by case.

Each input is a line of gpud's own tests, components/accelerator/nvidia/xid/kmsg_test.go
(TestExtractNVRMXid, TestMatch), or a line in the form they use; gpud's verdict is the event type
its xid.go gives the XID (`details`, the line cited) or the NVLink rule it decodes to
(detailFromNVLinkInfo, xid.go:2954-2994: the rule's Severity column, raised by the line's own
Fatal/Nonfatal), read as its health_state.go:80-86 reads it: Fatal is unhealthy (our fail),
Warning healthy with an event (our warn), Info nothing (our ignore). Ours is the events check's
verdict under the built-in tables. Where they differ, `why` says why on purpose; where gpud and
NVIDIA's catalogue disagree we follow the catalogue's resolution bucket (issue #50 §6)."""

from __future__ import annotations

from typing import NamedTuple

import pytest

from gpuaccept.checks import events
from gpuaccept.checks.judging import Findings
from gpuaccept.probe.kernel_log import KernelLogScan, parse_kernel_log


class Case(NamedTuple):
    name: str
    line: str
    xid: int
    device: str  # gpud's DeviceUUID, domain:bus:device
    gpud: str  # fail, warn, ignore
    ours: str
    why: str = ""
    our_device: str = ""  # ours where it differs from gpud's (then `why` says why)


NETIR = (
    "[171167.620236] NVRM: Xid (PCI:0009:01:00): 149, NETIR_LINK_EVT  Fatal   XC0 i0 Link 01 "
    "(0x021425c6 0x00000000 0x00000000 0x00000000 0x00000000 0x00000000)"
)
CASES = [
    Case(
        "kmsg_test.go:34 error example with PCI prefix (xid.go:1666 79 Fatal)",
        "[111111111.111] NVRM: Xid (PCI:0000:05:00): 79, pid='<unknown>', name=<unknown>, GPU has "
        "fallen off the bus.",
        79,
        "0000:05:00",
        "fail",
        "fail",
    ),
    Case(
        "kmsg_test.go:44 error example with channel (xid.go:298 14 Warning)",
        "[...] NVRM: Xid (0000:03:00): 14, Channel 00000001",
        14,
        "0000:03:00",
        "warn",
        "ignore",
        "the catalogue's bucket for 14 is IGNORE (catalog_generated.go:21): said in the details, "
        "never a warning",
    ),
    Case(
        "kmsg_test.go TestMatch multiline fallen-off-bus fallback without explicit Xid",
        "NVRM: The NVIDIA GPU 0000:18:00.0\nNVRM: (PCI ID: 10de:2901) installed in this system "
        "has\nNVRM: fallen off the bus and is not responding to commands.",
        79,
        "0000:18:00",
        "fail",
        "fail",
    ),
    Case(
        "kmsg_test.go TestMatch single-line fallen-off-bus normalizes missing PCI domain",
        "NVRM: GPU 18:00.0: GPU has fallen off the bus.",
        79,
        "0000:18:00",
        "fail",
        "fail",
        "gpud gives a line without a domain 0000 (normalizePCIBDF); here it keeps none "
        "(issue #50 §5): on a GB200 tray each GPU has its own domain, so 0000 could name "
        "another GPU, and probe.pci_address matches it only to the one GPU at 18:00",
        our_device="18:00",
    ),
    Case(
        "kmsg_test.go TestMatch XID 149 NETIR_LINK_EVT Fatal error (rule line 263, Link Fatal)",
        NETIR,
        149,
        "0009:01:00",
        "fail",
        "fail",
    ),
    Case(
        "kmsg_test.go TestMatch XID 154 GPU recovery action changed (xid.go:2792 154 Warning)",
        "[171167.621162] NVRM: Xid (PCI:0009:01:00): 154, GPU recovery action changed from 0x0 "
        "(None) to 0x4 (Drain and Reset)",
        154,
        "0009:01:00",
        "warn",
        "fail",
        "the line names the action NVIDIA asks for: drain and reset takes the GPU out of service; "
        "DCGM fails it too (DcgmHealthWatch::MonitorGpuRecoveryAction, probe/xid.py)",
    ),
    Case(
        "kmsg_test.go TestMatch XID 154 with different recovery action",
        "[171167.897562] NVRM: Xid (PCI:0019:01:00): 154, GPU recovery action changed from 0x4 "
        "(Drain and Reset) to 0x1 (GPU Reset Required)",
        154,
        "0019:01:00",
        "warn",
        "fail",
        "GPU Reset Required: a reset takes the GPU out of service (as above)",
    ),
    Case(
        "testdata/dmesg-with-xid-119.log:3 (dmesg -T; TestMatchDmesgWithXid119; xid.go:2217 Fatal)",
        "[Sun Feb 23 16:24:18 2025] NVRM: Xid (PCI:0000:9b:00): 119, pid=2024380, name=nvidia-smi, "
        "Timeout after 6s of waiting for RPC response from GPU4 GSP! Expected function 103 "
        "(GSP_RM_ALLOC) (0x2081 0x4).",
        119,
        "0000:9b:00",
        "fail",
        "fail",
    ),
    Case(
        "a contained ECC error (xid.go:1893 94 Fatal)",
        "NVRM: Xid (PCI:0000:01:00): 94, pid=7194, Contained: CE User Channel (0x9).",
        94,
        "0000:01:00",
        "fail",
        "fail",
    ),
    Case(
        "a high single-bit ECC rate (xid.go:1834 92 Warning)",
        "NVRM: Xid (PCI:0000:01:00): 92, High single-bit ECC error rate",
        92,
        "0000:01:00",
        "warn",
        "fail",
        "aznhc's check_gpu_xid fails it (customTests/azure_gpu_xid.nhc:10 at 0e0a1ac)",
    ),
    Case(
        "a graphics exception (xid.go:251 13 Warning)",
        "NVRM: Xid (PCI:0000:01:00): 13, pid=7, Graphics Exception",
        13,
        "0000:01:00",
        "warn",
        "warn",
    ),
    Case(
        "an NVLink remote translation error (xid.go:2108 108 Warning)",
        "NVRM: Xid (PCI:0000:01:00): 108, pid=7, NVLink remote translation",
        108,
        "0000:01:00",
        "warn",
        "ignore",
        "the catalogue's bucket for 108 is IGNORE (catalog_generated.go:115)",
    ),
    Case(
        "a power-smoothing notice (xid.go:2852 162 Info)",
        "NVRM: Xid (PCI:0000:01:00): 162, Power Smoothing HW Circuitry capability reengaged",
        162,
        "0000:01:00",
        "ignore",
        "ignore",
    ),
    Case(
        "nvlink_logs_test.go:41 146 TLW_CTRL Fatal (status 4): gpud Fatal",
        "NVRM: Xid (PCI:0000:04:00): 146, TLW_CTRL Fatal XC0 i0 Link 00 (0x00000009 0x00000004 "
        "0x00000000 0x00000000)",
        146,
        "0000:04:00",
        "fail",
        "fail",
    ),
    Case(
        "nvlink_logs_test.go:43 146 TLW_RX/TLW_RX_PIPE0 Fatal (status 4): gpud Warning",
        "NVRM: Xid (PCI:0000:04:00): 146, TLW_RX/TLW_RX_PIPE0 Fatal XC0 i0 Link 00 (0x0000000a "
        "0x00000004 0x00000000 0x00000000)",
        146,
        "0000:04:00",
        "warn",
        "fail",
        "NVIDIA's XID 144-150 decode sheet gives TLW_RX/TLW_RX_PIPE0 with error status 4 the "
        "bucket RESET_GPU, severity Fatal (data/nvlink5_decode.toml, the sheet's line 229), and "
        "the line itself says Fatal; gpud's test expects a warning for it: where gpud and "
        "NVIDIA's catalogue disagree we follow the catalogue (an operator's review, 2026-11-28)",
    ),
]


def _ours(line: str) -> tuple[str, list[tuple[int, str]]]:
    found = parse_kernel_log(line)
    findings = Findings("events", "HEALTH")
    # judged a minute after a dated line: gpud's verdict on the line, not on its age
    dates = [x.at for x in found if x.at is not None]
    now = max(dates) + 60 if dates else None
    scan = KernelLogScan(True, "saved.log", tuple(found))
    ignored = events.judge_kernel_log(scan, findings, now=now)
    verdict = "fail" if findings.failures else "warn" if findings.warnings else "ignore"
    assert findings.failures or findings.warnings or ignored  # nothing silently dropped
    return verdict, [(x.xid, x.pci_bus_id) for x in found]


@pytest.mark.parametrize("case", CASES, ids=lambda case: case.name)
def test_gpud_case(case: Case) -> None:
    verdict, found = _ours(case.line)
    assert found == [(case.xid, case.our_device or case.device)]
    assert verdict == case.ours
    assert (case.gpud == case.ours) or case.why, "a difference from gpud needs its reason"
    assert not case.our_device or case.why, "a difference from gpud needs its reason"


def test_lines_gpud_reads_as_no_xid_are_none_here() -> None:
    """kmsg_test.go TestMatch: no XID, a non-numeric one, a fallen-off-bus text without a valid
    address."""
    for line in (
        "Regular log content without Xid errors",
        "NVRM: Xid error: xyz, invalid data",
        "NVRM: The NVIDIA GPU invalid-bdf.0\nNVRM: fallen off the bus and is not responding to "
        "commands.",
    ):
        assert parse_kernel_log(line) == []
