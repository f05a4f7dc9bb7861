"""events: XIDs and counter growth over a run, judged at its end."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from gpuaccept.checks import events
from gpuaccept.checks.judging import Findings
from gpuaccept.probe.kernel_log import KernelLogScan, parse_kernel_log
from gpuaccept.probe.nvml_events import GpuEvent
from gpuaccept.probe.nvml_health import CounterSnapshot, ErrorCounters, read_snapshot
from gpuaccept.results import Status
from gpuaccept.suite.runner import run_suite
from gpuaccept.suite.selection import CHECKS, LEVELS, CheckSpec
from tests.checks.conftest import cpu_context, gpu_context, h100_sxm

UUID = "GPU-00000000-0000-0000-0000-000000000000"


def _xid(xid: int) -> GpuEvent:
    return GpuEvent("xid", UUID, "2026-11-23T06:00:00.000+00:00", xid, "compute")


@pytest.fixture(autouse=True)
def _unreadable_kernel_log(monkeypatch: pytest.MonkeyPatch) -> None:
    """This machine's own kernel log stays out of the verdicts."""
    monkeypatch.setattr(
        events, "scan_kernel_log", lambda: KernelLogScan(False, "kernel log not readable here")
    )


@pytest.mark.parametrize(
    ("xid", "status"), [(79, Status.FAIL), (48, Status.FAIL), (119, Status.FAIL), (13, Status.WARN)]
)
def test_critical_xids_fail_and_others_warn(fake_gpus: Any, xid: int, status: Status) -> None:
    fake_gpus({"gpus": [h100_sxm()]})
    result = events.run(replace(gpu_context(), events=(_xid(xid), _xid(xid))))
    assert result.status is status
    assert f"XID {xid}:" in result.message
    assert "(2 times)" in result.message
    assert "during compute" in result.message


def test_kernel_log_xids_since_boot_are_judged_the_same() -> None:
    log = (
        "[  12.5] NVRM: Xid (PCI:0000:cb:00): 79, pid=123, GPU has fallen off the bus.\n"
        "[  13.0] NVRM: Xid (PCI:0000:1b:00): 13, pid=77, Graphics Exception\n"
    )
    findings = Findings("events", "HEALTH")
    events.judge_kernel_log(KernelLogScan(True, "dmesg", tuple(parse_kernel_log(log))), findings)
    assert findings.failures == [
        "kernel log since boot: XID 79 (GPU has fallen off the bus) on PCI 0000:cb:00"
    ]
    assert findings.warnings[0].startswith("kernel log since boot: XID 13")


def _counters(**kwargs: Any) -> ErrorCounters:
    base: dict[str, Any] = {
        "uuid": UUID,
        "index": 0,
        "pcie_replays": 0,
        "pcie_gen_max": 5,
        "pcie_width_max": 16,
        "ecc_corrected_volatile": 0,
        "ecc_uncorrected_volatile": 0,
        "nvlink": {0: (0, 0, 0), 1: (0, 0, 0)},
    }
    return ErrorCounters(**(base | kwargs))


@pytest.mark.parametrize(
    ("end", "failure"),
    [
        ({"nvlink": {0: (0, 3, 0), 1: (0, 0, 0)}}, "NVLink 0 replay errors grew by 3"),
        ({"nvlink": {0: (0, 0, 0), 1: (0, 0, 1)}}, "NVLink 1 recovery errors grew by 1"),
        ({"nvlink": {0: (6000, 0, 0), 1: (0, 0, 0)}}, "at or above DCGM's 100/s"),
        ({"ecc_uncorrected_volatile": 2}, "2 uncorrectable ECC error(s) in the run"),
    ],
)
def test_counter_growth_fails(end: dict[str, Any], failure: str) -> None:
    findings = Findings("events", "HEALTH")
    events.judge_growth(
        CounterSnapshot(0.0, (_counters(),)), CounterSnapshot(60.0, (_counters(**end),)), findings
    )
    assert any(failure in text for text in findings.failures), findings.failures


def test_slow_crc_growth_warns_and_a_vanished_gpu_fails() -> None:
    findings = Findings("events", "HEALTH")
    start = CounterSnapshot(0.0, (_counters(), _counters(uuid="GPU-b", index=1)))
    end = CounterSnapshot(60.0, (_counters(nvlink={0: (50, 0, 0), 1: (0, 0, 0)}),))
    growth = events.judge_growth(start, end, findings)
    assert findings.warnings == [f"NVML GPU 0 ({UUID}): NVLink 0 CRC errors grew by 50 (0.8/s)"]
    assert findings.failures == [
        "NVML GPU 1 (GPU-b) was read at the start but not at the end (lost?)"
    ]
    assert growth == [{"uuid": UUID, "index": 0, "grew": {"nvlink0_crc": 50}}]


def test_a_growing_nvlink_replay_counter_read_through_nvml_fails(fake_gpus: Any) -> None:
    links = [{"active": True, "version": 4} for _ in range(18)]
    links[5] = {"active": True, "version": 4, "replay": [0, 5]}
    fake_gpus({"gpus": [h100_sxm(nvlink=links)]})
    start = read_snapshot()
    assert start is not None
    result = events.run(replace(gpu_context(), start_counters=start))
    assert result.status is Status.FAIL
    assert result.message == f"NVML GPU 0 ({UUID}): NVLink 5 replay errors grew by 5 in the run"


def test_a_growing_pcie_replay_counter_read_through_nvml_warns(fake_gpus: Any) -> None:
    fake_gpus({"gpus": [h100_sxm(pcie_replay=[0, 100])]})
    start = read_snapshot()
    assert start is not None
    result = events.run(replace(gpu_context(), start_counters=start))
    assert result.status is Status.WARN
    assert "100 PCIe replays in the run, above DCGM's 31/min for Gen5 x16" in result.message


def test_without_nvml_or_xids_it_is_skip_not_pass(no_gpu: None) -> None:
    result = events.run(cpu_context())
    assert result.status is Status.SKIP
    assert "NVML unavailable" in result.message


def test_the_events_check_runs_last_at_every_level() -> None:
    assert CHECKS[-1].name == "events"
    assert CHECKS[-1].final
    assert CHECKS[-1].levels == frozenset(LEVELS)


def test_a_critical_xid_mid_run_fails_the_node(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The real suite in CPU mode: slot 0's worker watches every GPU fake NVML lists, the XID
    arrives while a check sleeps, and the final check fails the run with its number."""
    started = tmp_path / "burn-started"
    scenario = {
        "gpus": [h100_sxm()],
        "events": [{"gpu": 0, "type": "xid", "data": 79, "after_file": str(started)}],
    }
    (tmp_path / "nvml.json").write_text(json.dumps(scenario))
    monkeypatch.setenv("FAULT_STARTED_FILE", str(started))
    monkeypatch.setenv("GPUACCEPT_NVML_MODULE", "tests.fake_nvml")
    monkeypatch.setenv("FAKE_NVML_SCENARIO", str(tmp_path / "nvml.json"))
    (tmp_path / "kernel.log").write_text("")  # this machine's own log stays out
    monkeypatch.setenv("GPUACCEPT_KERNEL_LOG", str(tmp_path / "kernel.log"))
    burn = CheckSpec("burn", "FAKE", "tests.faults:check_sleeps", frozenset(LEVELS), "node", False)
    results, seen, _ = run_suite([burn, CHECKS[-1]], cpu_context(), 60, [])
    final = results[-1]
    assert final.name == "events"
    assert final.status is Status.FAIL, final.message
    assert "XID 79: GPU has fallen off the bus during burn" in final.message
    assert [e.xid for e in seen] == [79]


def test_a_critical_xid_older_than_aznhc_window_warns_a_recent_one_fails() -> None:
    log = (
        "[  100.0] NVRM: Xid (PCI:0000:cb:00): 79, pid=123, GPU has fallen off the bus.\n"
        "[ 9000.0] NVRM: Xid (PCI:0000:1b:00): 48, pid=77, DBE\n"
    )
    scan = KernelLogScan(True, "dmesg", tuple(parse_kernel_log(log)), uptime_seconds=10_000.0)
    findings = Findings("events", "HEALTH")
    events.judge_kernel_log(scan, findings)
    assert [f.split(" (")[0] for f in findings.failures] == ["kernel log since boot: XID 48"]
    assert "older than aznhc's 2 h window" in findings.warnings[0]
    assert "XID 79" in findings.warnings[0]
    # a saved log's stamps may be another boot's: judged as recent
    unknown = KernelLogScan(True, "/saved.log", tuple(parse_kernel_log(log)))
    findings = Findings("events", "HEALTH")
    events.judge_kernel_log(unknown, findings)
    assert len(findings.failures) == 2


@pytest.mark.parametrize(("xid", "critical"), [(140, True), (94, True), (64, True), (144, False)])
def test_the_critical_set_holds_dcgm_s_failing_xids(xid: int, critical: bool) -> None:
    from gpuaccept.probe.xid import describe_xid, is_critical

    assert is_critical(xid) is critical
    assert "not in gpuaccept's table" not in describe_xid(xid)


@pytest.mark.parametrize(
    ("event_type", "recovery_action", "kind", "fails"),
    [
        ("dbe", None, "ecc_double_bit", True),
        ("unavailable", None, "gpu_unavailable", True),
        ("retirement_failure", None, "dram_retirement_failure", True),
        ("fatal_poison", None, "fatal_poison", True),
        ("recovery_action", 1, "recovery_action", True),  # GPU reset
        ("recovery_action", 4, "recovery_action", True),  # drain and reset
        ("recovery_action", 3, "recovery_action", False),  # drain P2P: DCGM warns
        ("sbe", None, "ecc_single_bit", False),
    ],
)
def test_every_event_kind_the_rules_judge_arrives_and_is_judged(
    event_type: str, recovery_action: int | None, kind: str, fails: bool
) -> None:
    import time

    from gpuaccept.probe.nvml_events import EventWatcher
    from tests import fake_nvml

    gpu = h100_sxm(recovery_action=recovery_action)
    fake_nvml.use({"gpus": [gpu], "events": [{"gpu": 0, "type": event_type, "data": 0}]})
    fake_nvml.nvmlInit()
    watcher = EventWatcher(lambda: fake_nvml)
    watcher.start()
    deadline = time.monotonic() + 10
    seen: list[GpuEvent] = []
    while not seen and time.monotonic() < deadline:
        time.sleep(0.05)
        seen = watcher.drain()
    watcher.stop()
    fake_nvml.use(None)
    assert [event.kind for event in seen] == [kind], watcher.problem
    assert seen[0].fails_node is fails
    findings = Findings("events", "HEALTH")
    events.judge_events(seen, findings)
    assert bool(findings.failures) is fails
