"""Azure's aznhc (Azure/azurehpc-health-checks@0e0a1ac26a64b32ac4dd7632a529638505d3314a), case by
case: customTests/azure_gpu_xid.nhc check_gpu_xid fails a syslog XID of its list (line 10,
XID_EC) seen within 2 hours (line 18) and skips an older one (line 51: "Xid older than ...
Skipping"); customTests/azure_ib_link_flapping.nhc counts `lost carrier` lines per device in its
window (24 h by default, line 73) and fails at its threshold (5 by default, line 74; `-ge`, line
145). Each input is a syslog line as those scripts grep
it; ours is the events (or fabric) check's verdict under the built-in tables."""

from __future__ import annotations

import time
from datetime import datetime
from typing import NamedTuple

import pytest

from gpuaccept.checks import events
from gpuaccept.checks.fabric import judge_link_flaps
from gpuaccept.checks.judging import Findings
from gpuaccept.probe.kernel_log import KernelLogScan, parse_kernel_log, parse_link_flaps

AZNHC_XIDS = (48, 56, 57, 58, 62, 63, 64, 65, 68, 69, 73, 74, 79, 80, 81, 92, 119, 120)
NOW = time.time()


def _syslog(minutes_ago: float, message: str) -> str:
    stamp = datetime.fromtimestamp(NOW - minutes_ago * 60).strftime("%b %d %H:%M:%S")
    return f"{stamp} node1 kernel: [ 1234.5] {message}"


def _xid(xid: int) -> str:
    return f"NVRM: Xid (PCI:0000:cb:00): {xid}, pid=1, name=python, error"


class Case(NamedTuple):
    name: str
    line: str
    aznhc: str  # fail or pass
    ours: str  # fail, warn or ignore
    why: str = ""


CASES = [
    *(Case(f"XID {x} 10 minutes ago", _syslog(10, _xid(x)), "fail", "fail") for x in AZNHC_XIDS),
    Case(
        "XID 79 three hours ago",
        _syslog(180, _xid(79)),
        "pass",
        "warn",
        "older than the 2 h window: not failed, as aznhc; said as a warning, not skipped silently",
    ),
    Case(
        "XID 46 10 minutes ago (not in aznhc's list)",
        _syslog(10, _xid(46)),
        "pass",
        "fail",
        "NVIDIA's catalogue: RESET_GPU takes the GPU out of service",
    ),
    Case(
        "XID 13 10 minutes ago (not in aznhc's list)",
        _syslog(10, _xid(13)),
        "pass",
        "warn",
        "the catalogue's RESTART_APP: said, not failed",
    ),
]


@pytest.mark.parametrize("case", CASES, ids=lambda case: case.name)
def test_aznhc_case(case: Case) -> None:
    findings = Findings("events", "HEALTH")
    scan = KernelLogScan(True, "syslog", tuple(parse_kernel_log(case.line, NOW)))
    events.judge_kernel_log(scan, findings, now=NOW)
    verdict = "fail" if findings.failures else "warn" if findings.warnings else "ignore"
    assert verdict == case.ours
    assert (case.aznhc == case.ours) or case.why, "a difference from aznhc needs its reason"


@pytest.mark.parametrize(("count", "verdict"), [(5, "fail"), (4, "warn")])
def test_link_flaps_in_a_dated_syslog(count: int, verdict: str) -> None:
    """aznhc fails at five lost-carrier lines of one device in its window; so does gpuaccept."""
    lines = "\n".join(_syslog(30 + i, "mlx5_core ib0: lost carrier") for i in range(count))
    findings = Findings("fabric", "FABRIC")
    scan = KernelLogScan(True, "syslog", flaps=tuple(parse_link_flaps(lines, NOW)))
    judge_link_flaps(scan, findings, now=NOW)
    assert ("fail" if findings.failures else "warn") == verdict
