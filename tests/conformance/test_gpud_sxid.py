"""gpud's NVSwitch SXid reading (leptonai/gpud@4a8de33a3f02e207f39e9023d67125592d599731), case by
case: each input a line of gpud's components/accelerator/nvidia/sxid/kmsg_test.go or
component_test.go, gpud's verdict the event type its sxid.go gives the SXid (`details`; an SXid
with no entry gives no event: sxid.go Match returns nil), Fatal read as unhealthy (our fail),
Warning as a warning. Ours is the events check's verdict under the built-in [sxid] table, which
is generated from the same file with the Fabric Manager guide's class (data/actions.toml)."""

from __future__ import annotations

from typing import NamedTuple

import pytest

from gpuaccept.actions import builtin_rules
from gpuaccept.checks import events
from gpuaccept.checks.judging import Findings
from gpuaccept.probe.kernel_log import KernelLogScan, parse_sxids


class Case(NamedTuple):
    name: str
    line: str
    sxid: int
    switch: str
    gpud: str
    ours: str
    why: str = ""


CASES = [
    Case(
        "kmsg_test.go:17 valid NVSwitch SXid error (sxid.go:511 12028 Fatal)",
        "[111111111.111] nvidia-nvswitch3: SXid (PCI:0000:05:00.0): 12028, Non-fatal, Link 32 "
        "egress non-posted PRIV error (First)",
        12028,
        "nvidia-nvswitch3",
        "fail",
        "fail",
    ),
    Case(
        "kmsg_test.go:22 another valid NVSwitch SXid error (sxid.go:1540 20034 Fatal)",
        "[131453.740743] nvidia-nvswitch0: SXid (PCI:0000:00:00.0): 20034, Fatal, Link 30 LTSSM "
        "Fault Up",
        20034,
        "nvidia-nvswitch0",
        "fail",
        "fail",
    ),
    Case(
        "component_test.go:655 a non-fatal Minion interrupt (sxid.go:559 22013 Warning)",
        "nvidia-nvswitch1: SXid (PCI:0000:0a:00.0): 22013, Non-fatal, Link 57 Minion Link DLREQ "
        "interrupt",
        22013,
        "nvidia-nvswitch1",
        "warn",
        "warn",
    ),
    Case(
        "component_test.go:634 an SXid gpud has no entry for",
        "nvidia-nvswitch3: SXid (PCI:0000:05:00.0): 20123, Unknown error",
        20123,
        "nvidia-nvswitch3",
        "ignore",
        "warn",
        "nothing the driver reports is silently dropped: an SXid with no row is said as a warning",
    ),
    Case(
        "the issue's line: sourcetrack timeout (sxid.go:1678 24007 Fatal)",
        "nvidia-nvswitch3: SXid (PCI:0000:05:00.0): 24007, Fatal, Link 30 sourcetrack timeout "
        "error",
        24007,
        "nvidia-nvswitch3",
        "fail",
        "fail",
    ),
]


@pytest.mark.parametrize("case", CASES, ids=lambda case: case.name)
def test_gpud_case(case: Case) -> None:
    (found,) = parse_sxids(case.line)
    assert (found.sxid, found.switch) == (case.sxid, case.switch)
    findings = Findings("events", "HEALTH")
    events.judge_kernel_log(KernelLogScan(True, "saved.log", sxids=(found,)), findings)
    verdict = "fail" if findings.failures else "warn" if findings.warnings else "ignore"
    assert verdict == case.ours
    assert case.switch in (findings.failures or findings.warnings)[0]
    assert (case.gpud == case.ours) or case.why, "a difference from gpud needs its reason"


def test_where_the_guide_and_gpud_differ_the_guides_fatal_class_fails() -> None:
    """The guide lists some SXids as fatal that gpud only warns on: gpuaccept fails them (a
    fatal SXid needs the guest VM, on bare metal the node, restarted); gpud's fatal ones among
    the guide's non-fatal list are followed (gpud = "fatal" rows reboot)."""
    rows = builtin_rules().sxid.values()
    assert all(row.verdict == "fail" for row in rows if row.class_ in ("fatal", "always-fatal"))
    assert all(row.verdict == "fail" for row in rows if row.gpud == "fatal")
    assert all(
        row.verdict == "warn"
        for row in rows
        if row.class_ in ("non-fatal", "other") and row.gpud != "fatal"
    )


def test_a_data_line_details_the_sxid_before_it() -> None:
    lines = (
        "nvidia-nvswitch3: SXid (PCI:0000:05:00.0): 24007, Fatal, Link 30 sourcetrack timeout\n"
        "nvidia-nvswitch3: SXid (PCI:0000:05:00.0): 24007, Data {0x00000000, 0x00000001}\n"
    )
    assert len(parse_sxids(lines)) == 1
