"""NVIDIA's NVSentinel syslog health monitor, case by case, from its own tests (read through the
search index; the repository could not be fetched here):
- health-monitors/syslog-health-monitor/pkg/sxid/sxid_handler_test.go @422b688
  (TestExtractInfoFromNVSwitchErrorMsg): the line's Fatal/Non-fatal word is the event's
  IsFatal; a line without `Link N` gives no event;
- pkg/gpufallen/gpufallen_handler_test.go @1275b0c (TestParseGPUFallenError, TestProcessLine):
  the three-line "fallen off the bus" message is a fatal RESTART_BM event for the GPU's PCI
  address; with an Xid line for it, the Xid handler reports it instead;
- pkg/xid/xid_handler_test.go @422b688 (TestDetermineFatality): UPDATE_SWFW is fatal,
  APPLICATION_RESTART is not.
NVSentinel's verdict: fatal (our fail), non-fatal (our warn), no event (our ignore). Ours: the
events check under the built-in tables."""

from __future__ import annotations

from typing import NamedTuple

import pytest

from gpuaccept.actions import Action, builtin_rules, plan_actions
from gpuaccept.checks import events
from gpuaccept.checks.judging import Findings
from gpuaccept.probe.kernel_log import KernelLogScan, parse_kernel_log, parse_sxids


class Case(NamedTuple):
    name: str
    line: str
    nvsentinel: str
    ours: str
    why: str = ""


NO_LINK = (
    "NVSentinel needs `Link N` to name the port; gpuaccept says every SXid the driver prints, "
    "bound to its switch (an SXid with no row warns)"
)
SXID_CASES = [
    Case(
        "Non-fatal error",
        "[123] nvidia-nvswitch3: SXid (PCI:0000:c1:00.0): 28006, Non-fatal, Link 46 MC TS "
        "crumbstore MCTO (First)",
        "warn",
        "warn",
    ),
    Case(
        "Another non-fatal error",
        "[73309.599396] nvidia-nvswitch0: SXid (PCI:0000:06:00.0): 20009, Non-fatal, Link 04 RX "
        "Short Error Rate",
        "warn",
        "warn",
    ),
    Case(
        "Fatal error",
        "[ 1108.858286] nvidia-nvswitch0: SXid (PCI:0000:c3:00.0): 24007, Fatal, Link 28 "
        "sourcetrack timeout error (First)",
        "fail",
        "fail",
    ),
    Case(
        "Invalid message 1: Link absent",
        "nvidia-nvswitch0: SXid (PCI:0004:00:00.0): 26008, SOE Watchdog error",
        "ignore",
        "warn",
        NO_LINK,
    ),
    Case(
        "Invalid message 2: Link absent",
        "nvidia-nvswitch0: SXid (PCI:0004:00:00.0): 26006, SOE HALTED",
        "ignore",
        "warn",
        NO_LINK,
    ),
    Case(
        "Invalid message 5: Truncated",
        "[38889.018130] nvidia-nvswitch1: SXid (PCI:0000:06:00.0): 20009, Non-fatal, Li",
        "ignore",
        "warn",
        NO_LINK,
    ),
]


def _verdict(findings: Findings) -> str:
    return "fail" if findings.failures else "warn" if findings.warnings else "ignore"


@pytest.mark.parametrize("case", SXID_CASES, ids=lambda case: case.name)
def test_sxid_case(case: Case) -> None:
    findings = Findings("events", "HEALTH")
    scan = KernelLogScan(True, "syslog", sxids=tuple(parse_sxids(case.line)))
    events.judge_kernel_log(scan, findings)
    assert _verdict(findings) == case.ours
    assert (case.nvsentinel == case.ours) or case.why


FALLEN = (
    "[ 1843.308145] NVRM: The NVIDIA GPU 0000:b3:00.0\n"
    "               NVRM: (PCI ID: 10de:26b5) installed in this system has\n"
    "               NVRM: fallen off the bus and is not responding to commands."
)


@pytest.mark.parametrize(
    ("name", "log", "without_xid"),
    [
        ("Complete GPU Fallen Error with PCI ID", FALLEN, True),
        ("GPU Fallen Error without PCI ID", FALLEN.replace("(PCI ID: 10de:26b5) ", ""), True),
        (
            "GPU Fallen Error with XID following",
            FALLEN + "\nNVRM: Xid (PCI:0000:b3:00.0): 79, pid=12345, GPU has fallen off the bus.",
            False,
        ),
    ],
)
def test_gpu_fallen_case(name: str, log: str, without_xid: bool) -> None:
    """One fatal event for the GPU, RESTART_BM (our reboot-node), read as XID 79; beside an Xid
    79 line for the same GPU, that line is the one event."""
    (found,) = parse_kernel_log(log)
    assert (found.xid, found.pci_bus_id, found.without_xid) == (79, "0000:b3:00", without_xid)
    findings = Findings("events", "HEALTH")
    events.judge_kernel_log(KernelLogScan(True, "syslog", (found,)), findings)
    assert _verdict(findings) == "fail"
    assert plan_actions([findings.conclude("ok")]).action is Action.REBOOT_NODE


def test_a_message_with_no_fallen_gpu_is_nothing() -> None:
    assert parse_kernel_log("Some other NVRM message") == []


@pytest.mark.parametrize(("bucket", "fatal"), [("UPDATE_SWFW", True), ("RESTART_APP", False)])
def test_determine_fatality(bucket: str, fatal: bool) -> None:
    """A bucket NVSentinel calls fatal fails here, one it does not warns (XIDs 78 and 13)."""
    xid = {"UPDATE_SWFW": "78", "RESTART_APP": "13"}[bucket]
    row = builtin_rules().xid[xid]
    assert row.catalog == bucket
    assert (row.verdict == "fail") is fatal
