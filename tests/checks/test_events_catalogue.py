"""events judged by the action tables' rows (issue #50 §1-4): every XID as its row says, a site's
row over it, SXids bound to their switch, the NVLink5 decode, XID 154's recovery action, and the
time of every line."""

from __future__ import annotations

import time
from dataclasses import replace
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from gpuaccept.actions import (
    Action,
    ActionRules,
    builtin_rules,
    load_rules,
    plan_actions,
)
from gpuaccept.checks import events
from gpuaccept.checks.judging import Findings
from gpuaccept.probe.kernel_log import KernelLogScan, parse_kernel_log, parse_sxids
from gpuaccept.results import CheckResult, Status
from tests.checks.conftest import gpu_context, h100_sxm


def _xid_line(xid: int, pci: str = "0000:cb:00", rest: str = "pid=1, x") -> str:
    return f"NVRM: Xid (PCI:{pci}): {xid}, {rest}"


def _judge(log: str, rules: ActionRules | None = None, now: float | None = None) -> Findings:
    findings = Findings("events", "HEALTH")
    scan = KernelLogScan(
        True, "saved.log", tuple(parse_kernel_log(log, now)), sxids=tuple(parse_sxids(log, now))
    )
    events.judge_kernel_log(scan, findings, rules, now)
    return findings


def _run(monkeypatch: pytest.MonkeyPatch, fake_gpus: Any, log: str, rules: Any = None) -> Any:
    scan = KernelLogScan(
        True, "saved.log", tuple(parse_kernel_log(log)), sxids=tuple(parse_sxids(log))
    )
    monkeypatch.setattr(events, "scan_kernel_log", lambda: scan)
    fake_gpus({"gpus": [h100_sxm()]})
    return events.run(replace(gpu_context(), action_rules=rules))


def _bounded(action: Action, status: Status) -> Action:
    if status is Status.FAIL:
        return max(action, Action.RERUN, key=lambda a: a.severity)
    return min(action, Action.MONITOR, key=lambda a: a.severity)


def test_every_xid_of_the_catalogue_gets_the_verdict_and_action_its_row_gives(
    monkeypatch: pytest.MonkeyPatch, fake_gpus: Any
) -> None:
    """Issue #50: with every XID 1-172 in the log, each one is judged by its row (before, 37 of
    162 were)."""
    rules = builtin_rules()
    log = "\n".join(_xid_line(x, f"0000:{x:02x}:00") for x in range(1, 173))
    result = _run(monkeypatch, fake_gpus, log)
    plan = plan_actions([result])
    judged: dict[int, tuple[Status, Action]] = {}
    for recommendation in plan.recommendations:
        xid = int(recommendation.finding.split("XID ", 1)[1].split(" ", 1)[0])
        judged[xid] = (recommendation.status, recommendation.action)
    ignored = {int(text.split("XID ", 1)[1].split(" ", 1)[0]) for text in result.details["ignored"]}
    for xid in range(1, 173):
        row = rules.xid[str(xid)]
        if row.verdict == "ignore":
            assert xid in ignored, xid
            assert xid not in judged, xid
            continue
        status = Status.FAIL if row.verdict == "fail" else Status.WARN
        assert judged[xid] == (status, _bounded(row.action, status)), xid
    assert judged[145] == (Status.FAIL, Action.RESET_GPU)  # WORKFLOW_NVLINK5_ERR
    assert judged[46] == (Status.FAIL, Action.RESET_GPU)  # RESET_GPU: failed nowhere before
    assert judged[94] == (Status.FAIL, Action.RERUN)  # gpuaccept's departure, RESTART_APP
    assert {108, 160, 162} <= ignored


def test_a_sites_row_decides_fail_or_warn_too(tmp_path: Path) -> None:
    site = tmp_path / "rules.toml"
    site.write_text('[xid]\n145 = { action = "drain" }\n79 = { action = "monitor" }\n')
    rules = load_rules(site)
    findings = _judge(f"{_xid_line(145)}\n{_xid_line(79, '0000:1b:00')}", rules)
    assert [f.code for f in findings.failures] == ["145"]
    assert [w.code for w in findings.warnings] == ["79"]
    result = findings.conclude("ok")
    plan = plan_actions([result], rules)
    assert plan.action is Action.DRAIN
    assert "site rules.toml" in plan.recommendations[0].cause
    # a site's 13 = none: ignored, said, never a warning
    site.write_text('[xid]\n13 = { action = "none" }\n')
    assert not _judge(_xid_line(13), load_rules(site)).warnings


def test_a_three_day_old_xid_in_a_dated_syslog_is_said_and_not_failed() -> None:
    now = time.time()
    old = datetime.fromtimestamp(now - 3 * 86400).strftime("%b %d %H:%M:%S")
    findings = _judge(f"{old} node1 kernel: {_xid_line(79)}\n", now=now)
    assert findings.failures == []
    assert "the last 72.0 h ago: older than aznhc's 2 h window, not judged" in findings.warnings[0]
    recent = datetime.fromtimestamp(now - 600).strftime("%b %d %H:%M:%S")
    assert _judge(f"{recent} node1 kernel: {_xid_line(79)}\n", now=now).failures


def test_a_per_xid_repeat_rule_reads_the_syslog_dates(tmp_path: Path) -> None:
    site = tmp_path / "rules.toml"
    site.write_text(
        '[xid.79]\naction = "reboot-node"\n'
        'repeat = { count = 3, hours = 1, action = "replace", source = "ours" }\n'
    )
    rules = load_rules(site)
    now = time.time()
    lines = "".join(
        datetime.fromtimestamp(now - minutes * 60).strftime("%b %d %H:%M:%S")
        + f" node1 kernel: {_xid_line(79)}\n"
        for minutes in (40, 20, 5)
    )
    findings = _judge(lines, rules, now)
    (failure,) = findings.failures
    assert (failure.times, round(failure.span_hours or 0, 2)) == (3, round(35 / 60, 2))
    assert plan_actions([findings.conclude("ok")], rules).action is Action.REPLACE


def test_sxids_are_judged_and_bound_to_their_switch(tmp_path: Path) -> None:
    log = (
        "nvidia-nvswitch3: SXid (PCI:0000:05:00.0): 24007, Fatal, Link 30 sourcetrack timeout "
        "error\n"
        "nvidia-nvswitch1: SXid (PCI:0000:07:00.0): 11012, Non-fatal, Link 2 single bit ECC\n"
    )
    findings = _judge(log)
    (failure,) = findings.failures
    assert "NVSwitch nvidia-nvswitch3 (PCI 0000:05:00.0): SXid 24007" in failure
    assert (failure.kind, failure.code) == ("sxid", "24007")
    assert "SXid 11012" in findings.warnings[0]
    plan = plan_actions([findings.conclude("ok")])
    assert plan.action is Action.REBOOT_NODE  # the guide: restart (the host, on bare metal)
    site = tmp_path / "rules.toml"
    site.write_text('[sxid]\n24007 = { action = "monitor" }\n')
    assert not _judge(log, load_rules(site)).failures
    # a line the driver prints Fatal fails even where the guide's table says non-fatal
    fatal = log.replace("11012, Non-fatal", "11012, Fatal")
    assert len(_judge(fatal).failures) == 2


def _intrinfo(pattern: str) -> int:
    return int(pattern.replace("-", "0"), 2)


def test_nvlink5_xids_are_decoded_by_unit_and_error_status() -> None:
    ber = _intrinfo("------000000-------------0010011")  # NETIR_BER_EVENT: IGNORE
    saw = _intrinfo("------000000-------------0000001")  # SAW_MVB
    nonfatal_ignored = f"149, NETIR_BER_EVENT  Nonfatal XC0 i0 Link 03 (0x{ber:08x} 0x00000001)"
    nonfatal_reset = f"144, SAW_MVB  Nonfatal XC0 i0 Link 03 (0x{saw:08x} 0x00000002)"
    printed_fatal = f"149, NETIR_BER_EVENT  Fatal XC0 i0 Link 03 (0x{ber:08x} 0x00000001)"
    undecoded = f"147, TREX  Nonfatal XC0 i0 Link 03 (0x{saw:08x} 0x00000040)"

    def verdict(rest: str) -> str:
        findings = _judge(f"NVRM: Xid (PCI:0008:01:00): {rest}")
        return "fail" if findings.failures else "warn" if findings.warnings else "ignore"

    assert verdict(nonfatal_ignored) == "ignore"
    assert verdict(nonfatal_reset) == "fail"  # the sheet: SAW_MVB status 0x2 RESET_GPU
    assert verdict(printed_fatal) == "fail"  # the line says Fatal (gpud's maxEventType)
    assert verdict(undecoded) == "warn"  # no rule, and the line says Nonfatal
    # a site's row for the XID is its word for every line of it
    rules = builtin_rules().merged(
        ActionRules.model_validate({"xid": {"149": {"action": "drain"}}}), "site s.toml"
    )
    findings = _judge(f"NVRM: Xid (PCI:0008:01:00): {nonfatal_ignored}", rules)
    assert [f.code for f in findings.failures] == ["149"]


@pytest.mark.parametrize(
    ("changed_to", "status", "action"),
    [
        ("0x1 (GPU Reset Required)", Status.FAIL, Action.RESET_GPU),
        ("0x2 (Node Reboot Required)", Status.FAIL, Action.REBOOT_NODE),
        ("0x4 (Drain and Reset)", Status.FAIL, Action.RESET_GPU),
        ("0x3 (Drain P2P)", Status.WARN, Action.MONITOR),
    ],
)
def test_xid_154_in_a_saved_log_acts_on_the_recovery_action_it_names(
    changed_to: str, status: Status, action: Action
) -> None:
    line = _xid_line(
        154, "0019:01:00", f"GPU recovery action changed from 0x0 (None) to {changed_to}"
    )
    findings = _judge(line)
    result: CheckResult = findings.conclude("ok")
    assert result.status is status
    plan = plan_actions([result])
    assert plan.action is action
    assert plan.recommendations[0].gpu == "PCI 0019:01:00"
    # without a recovery action named, 154 is only said (a warning, nothing to do)
    assert _judge(_xid_line(154)).warnings


def test_a_log_with_no_times_says_so_once(monkeypatch: pytest.MonkeyPatch, fake_gpus: Any) -> None:
    log = f"{_xid_line(79)}\n{_xid_line(13, '0000:1b:00')}\n"
    scan = KernelLogScan(True, "saved.log", tuple(parse_kernel_log(log)), undated=2)
    monkeypatch.setattr(events, "scan_kernel_log", lambda: scan)
    fake_gpus({"gpus": [h100_sxm()]})
    result = events.run(gpu_context())
    said = [note for note in result.details["notes"] if "carry no time" in note]
    assert said == [
        "2 kernel-log line(s) in saved.log carry no time that can be read (no stamp, or seconds "
        "since another boot): judged as recent"
    ]
    assert result.status is Status.FAIL  # judged as recent


def test_a_sites_row_keeps_a_builtin_departure_only_while_it_keeps_the_action(
    tmp_path: Path,
) -> None:
    site = tmp_path / "rules.toml"
    site.write_text(
        '[xid.94]\naction = "rerun"\nrepeat = { count = 3, hours = 1, action = "reset-gpu" }\n'
    )
    assert load_rules(site).xid["94"].verdict == "fail"  # still gpuaccept's departure
    assert _judge(_xid_line(94), load_rules(site)).failures
    site.write_text('[xid]\n94 = { action = "monitor" }\n')
    assert load_rules(site).xid["94"].verdict == "warn"  # the site's action, its verdict
    site.write_text('[xid]\n94 = { action = "rerun", judge = "ignore", why = "ours" }\n')
    assert not _judge(_xid_line(94), load_rules(site)).warnings


def test_nvml_xid_events_follow_the_runs_rows(tmp_path: Path) -> None:
    from gpuaccept.probe.nvml_events import GpuEvent

    def event(xid: int) -> GpuEvent:
        return GpuEvent("xid", "GPU-a", "2026-11-28T10:00:00+00:00", xid, "compute")

    findings = Findings("events", "HEALTH")
    ignored = events.judge_events([event(43), event(46), event(13)], findings)
    assert [f.code for f in findings.failures] == ["46"]  # RESET_GPU
    assert [w.code for w in findings.warnings] == ["13"]  # RESTART_APP
    assert "XID 43" in ignored[0]  # IGNORE: said, never judged
    site = tmp_path / "rules.toml"
    site.write_text('[xid]\n13 = { action = "drain" }\n')
    findings = Findings("events", "HEALTH")
    events.judge_events([event(13)], findings, load_rules(site))
    assert [f.code for f in findings.failures] == ["13"]
