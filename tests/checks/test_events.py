"""events: XIDs and counter growth over a run, judged at its end."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from gpuaccept.actions import finding_records
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
    assert findings.warnings == [
        f"NVML GPU 0 ({UUID}): NVLink CRC errors grew by 50 (0.8/s; link 0 +50)"
    ]
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


def _nvlink5(**kwargs: Any) -> ErrorCounters:
    """A GPU whose active links NVML reads no DL error counter of (NVLink5)."""
    uncounted = {"nvlink": {0: (None, None, None), 1: (None, None, None)}}
    return _counters(**(uncounted | {"nvlink_uncounted": (0, 1)} | kwargs))


@pytest.mark.parametrize(
    ("start", "end", "failures", "warnings"),
    [
        ((0, 0), (0, 1), ["1 failed NVLink link recovery in the run (DCGM fails any)"], []),
        ((0, 0), (1, 0), [], ["NVLink links recovered 1 time(s) in the run (DCGM warns)"]),
        ((0, 0), (2, 2), ["2 failed NVLink link recoveries"], ["recovered 2 time(s)"]),
        ((5, 2), (8, 2), [], ["recovered 3 time(s)"]),  # each count against its own start
        ((2, 5), (2, 7), ["2 failed NVLink link recoveries"], []),
        ((5, 5), (5, 5), [], []),  # no growth
        ((5, 5), (4, 4), [], []),  # counters that went back (a driver reload) are no growth
    ],
)
def test_nvlink5_link_recoveries_are_judged_as_dcgm_judges_them(
    start: tuple[int, int], end: tuple[int, int], failures: list[str], warnings: list[str]
) -> None:
    findings = Findings("events", "HEALTH")
    growth = events.judge_growth(
        CounterSnapshot(0.0, (_nvlink5(nvlink_recoveries=start),)),
        CounterSnapshot(60.0, (_nvlink5(nvlink_recoveries=end),)),
        findings,
    )
    assert len(findings.failures) == len(failures)
    assert len(findings.warnings) == len(warnings)
    found_all = findings.failures + findings.warnings
    for expected, found in zip(failures + warnings, found_all, strict=True):
        assert expected in found
        assert found.startswith(f"NVML GPU 0 ({UUID}): ")
        # the action tables read the cause: an NVLink error of this GPU
        assert (found.kind, found.code, found.gpu) == ("cause", "nvlink-errors", UUID)
    grew = growth[0]["grew"] if growth else {}
    assert grew.get("nvlink_recovery_failed", 0) == (end[1] - start[1] if failures else 0)
    assert grew.get("nvlink_recovery_successful", 0) == (end[0] - start[0] if warnings else 0)


def test_nvlink5_links_whose_errors_nvml_cannot_read_are_said_unjudged() -> None:
    findings = Findings("events", "HEALTH")
    events.judge_growth(
        CounterSnapshot(0.0, (_nvlink5(),)), CounterSnapshot(60.0, (_nvlink5(),)), findings
    )
    assert findings.failures == []
    assert findings.warnings == [
        f"NVML GPU 0 ({UUID}): NVLink 0, 1: NVML reads no error counter of these links and no "
        "link recovery count: their errors in the run were not judged"
    ]
    # one link, said of one link; counts read at one end only are no count of the run
    findings = Findings("events", "HEALTH")
    one: dict[str, Any] = {"nvlink": {0: (None, None, None)}, "nvlink_uncounted": (0,)}
    events.judge_growth(
        CounterSnapshot(0.0, (_counters(**one, nvlink_recoveries=(0, 0)),)),
        CounterSnapshot(60.0, (_counters(**one),)),
        findings,
    )
    assert findings.warnings == [
        f"NVML GPU 0 ({UUID}): NVLink 0: NVML reads no error counter of this link and no link "
        "recovery count: their errors in the run were not judged"
    ]
    # a link uncounted at either end is one whose errors were not counted over the run
    findings = Findings("events", "HEALTH")
    events.judge_growth(
        CounterSnapshot(0.0, (_nvlink5(),)), CounterSnapshot(60.0, (_counters(),)), findings
    )
    assert [w.split(": ")[1] for w in findings.warnings] == ["NVLink 0, 1"]
    # counters read per link (before NVLink5) are judged as they were, and nothing is added
    findings = Findings("events", "HEALTH")
    events.judge_growth(
        CounterSnapshot(0.0, (_counters(),)), CounterSnapshot(60.0, (_counters(),)), findings
    )
    assert findings.warnings == []
    assert findings.failures == []


def test_nvlink5_recoveries_read_through_nvml(fake_gpus: Any) -> None:
    blackwell = {"active": True, "version": 5, "crc": None, "crc_data": None}
    blackwell |= {"replay": None, "recovery": None}
    links = [dict(blackwell) for _ in range(18)]
    links[17] = {"active": False, "version": 5, "crc": None, "crc_data": None}  # not in use
    gpu = h100_sxm(nvlink=links, nvlink5_recoveries=[[7, 0], [7, 1]])
    fake_gpus({"gpus": [gpu]})
    start = read_snapshot()
    assert start is not None
    assert start.counters[0].nvlink_uncounted == tuple(range(17))
    assert start.counters[0].nvlink_recoveries == (7, 0)
    result = events.run(replace(gpu_context(), start_counters=start))
    assert result.status is Status.FAIL
    assert result.message == (
        f"NVML GPU 0 ({UUID}): 1 failed NVLink link recovery in the run (DCGM fails any)"
    )
    # a driver that gives neither: said, not passed in silence
    fake_gpus({"gpus": [h100_sxm(nvlink=links)]})
    start = read_snapshot()
    assert start is not None
    assert start.counters[0].nvlink_recoveries is None
    result = events.run(replace(gpu_context(), start_counters=start))
    assert result.status is Status.WARN
    assert "NVLink 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16: NVML reads no" in (
        result.message
    )
    # links whose counters read (Hopper) never ask for the fields
    hopper = [{"active": True} for _ in range(18)]
    fake_gpus({"gpus": [h100_sxm(nvlink=hopper, nvlink5_recoveries=[[0, 9]])]})
    start = read_snapshot()
    assert start is not None
    assert start.counters[0].nvlink_uncounted == ()
    assert start.counters[0].nvlink_recoveries is None


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


@pytest.mark.parametrize(
    ("xid", "critical"),
    [(140, True), (94, True), (64, True), (144, True), (13, False), (108, False)],
)
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


def _grow(
    start: dict[str, Any], end: dict[str, Any], seconds: float = 60.0, rules: Any = None
) -> Findings:
    findings = Findings("events", "HEALTH")
    growth = events.judge_growth(
        CounterSnapshot(0.0, (_counters(**start),)),
        CounterSnapshot(seconds, (_counters(**end),)),
        findings,
        rules,
    )
    findings.details = {"growth": growth}
    return findings


@pytest.mark.parametrize(
    ("start", "end", "failures", "grew"),
    [
        # counters that did not start at zero: the growth is the difference
        (
            {"ecc_uncorrected_volatile": 5},
            {"ecc_uncorrected_volatile": 7},
            [f"NVML GPU 0 ({UUID}): 2 uncorrectable ECC error(s) in the run"],
            {"ecc_uncorrected": 2},
        ),
        ({"ecc_uncorrected_volatile": 7}, {"ecc_uncorrected_volatile": 7}, [], None),
        ({"ecc_corrected_volatile": 10}, {"ecc_corrected_volatile": 14}, [], {"ecc_corrected": 4}),
        ({"pcie_replays": 40}, {"pcie_replays": 41}, [], {"pcie_replays": 1}),
        (
            {"nvlink": {0: (0, 2, 1), 1: (0, 0, 0)}},
            {"nvlink": {0: (0, 5, 1), 1: (0, 0, 0)}},
            [f"NVML GPU 0 ({UUID}): NVLink 0 replay errors grew by 3 in the run"],
            {"nvlink0_replay": 3},
        ),
        (
            {"nvlink": {0: (0, 0, 4), 1: (0, 0, 0)}},
            {"nvlink": {0: (0, 0, 6), 1: (0, 0, 0)}},
            [f"NVML GPU 0 ({UUID}): NVLink 0 recovery errors grew by 2 in the run"],
            {"nvlink0_recovery": 2},
        ),
    ],
)
def test_growth_is_the_difference_from_the_start(
    start: dict[str, Any], end: dict[str, Any], failures: list[str], grew: dict[str, int] | None
) -> None:
    findings = _grow(start, end)
    assert findings.failures == failures
    expected = [] if grew is None else [{"uuid": UUID, "index": 0, "grew": grew}]
    assert findings.details["growth"] == expected


def test_crc_is_judged_on_the_gpu_total_at_dcgm_s_rate() -> None:
    # 3000 + 3000 over 60 s = 100/s for the GPU: each link alone is 50/s
    findings = _grow(
        {"nvlink": {0: (1000, 0, 0), 1: (1000, 0, 0)}},
        {"nvlink": {0: (4000, 0, 0), 1: (4000, 0, 0)}},
    )
    assert findings.failures == [
        f"NVML GPU 0 ({UUID}): NVLink CRC errors grew by 6000 (100.0/s; link 0 +3000, "
        "link 1 +3000), at or above DCGM's 100/s"
    ]
    below = _grow(
        {"nvlink": {0: (1000, 0, 0), 1: (0, 0, 0)}}, {"nvlink": {0: (6999, 0, 0), 1: (0, 0, 0)}}
    )
    assert below.failures == []
    # 99.98/s: below DCGM's limit, though it prints as 100.0
    assert below.warnings == [
        f"NVML GPU 0 ({UUID}): NVLink CRC errors grew by 5999 (100.0/s; link 0 +5999)"
    ]


def test_a_sites_crc_limit_is_the_rate_that_fails() -> None:
    """Issue #31 §1: the counter velocity is a row of the action tables a site sets."""
    from gpuaccept.actions import ActionRules, LimitRow, builtin_rules

    site = builtin_rules().merged(
        ActionRules.model_validate({"limit": {"nvlink_crc_per_second": LimitRow(value=10)}}),
        "site strict.toml",
    )
    # 600 over 60 s = 10/s: a warning by DCGM's 100/s, a failure by the site's 10/s
    start, end = {"nvlink": {0: (0, 0, 0)}}, {"nvlink": {0: (600, 0, 0)}}
    assert _grow(start, end).failures == []
    assert _grow(start, end, rules=site).failures == [
        f"NVML GPU 0 ({UUID}): NVLink CRC errors grew by 600 (10.0/s; link 0 +600), at or "
        "above the limit 10 of site strict.toml"
    ]


@pytest.mark.parametrize(
    ("replays", "seconds", "warns"),
    [(31, 60.0, False), (32, 60.0, True), (62, 120.0, False), (32, 10.0, True)],
)
def test_pcie_replays_are_judged_per_minute_against_dcgm_s_limit(
    replays: int, seconds: float, warns: bool
) -> None:
    """DCGM's limit for Gen5 x16 is 31 per minute; a run shorter than a minute counts as one."""
    start = CounterSnapshot(0.0, (_counters(pcie_replays=100),))
    end = CounterSnapshot(seconds, (_counters(pcie_replays=100 + replays),))
    findings = Findings("events", "HEALTH")
    growth = events.judge_growth(start, end, findings)
    events._judge_replay_growth(growth, end, seconds, findings)
    text = f"{replays} PCIe replays in the run, above DCGM's 31/min for Gen5 x16"
    expected = [f"NVML GPU 0 ({UUID}): {text}"] if warns else []
    assert findings.warnings == expected
    assert [_cause(w) for w in findings.warnings] == [("cause", "pcie-replays", UUID)] * warns


def test_the_kernel_log_window_is_two_hours_and_repeats_are_counted() -> None:
    line = "[ {stamp}] NVRM: Xid (PCI:0000:cb:00): 79, pid=1, GPU has fallen off the bus.\n"
    log = line.format(stamp="2800.0") + line.format(stamp="3000.0")
    # the newest of the two is exactly 2 h old: still inside the window, so it fails
    scan = KernelLogScan(True, "dmesg", tuple(parse_kernel_log(log)), uptime_seconds=10_200.0)
    findings = Findings("events", "HEALTH")
    events.judge_kernel_log(scan, findings)
    assert findings.failures == [
        "kernel log since boot: XID 79 (GPU has fallen off the bus) on PCI 0000:cb:00, 2 times"
    ]
    old = KernelLogScan(True, "dmesg", tuple(parse_kernel_log(log)), uptime_seconds=10_800.0)
    findings = Findings("events", "HEALTH")
    events.judge_kernel_log(old, findings)
    assert findings.failures == []
    assert findings.warnings == [
        "kernel log since boot: XID 79 (GPU has fallen off the bus) on PCI 0000:cb:00, 2 times, "
        "the last 2.2 h ago: older than aznhc's 2 h window, not judged (reboot to clear it)"
    ]
    # a line without dmesg's stamp makes the age unknown: judged as recent
    mixed = log + "NVRM: Xid (PCI:0000:cb:00): 79, pid=1, GPU has fallen off the bus.\n"
    scan = KernelLogScan(True, "dmesg", tuple(parse_kernel_log(mixed)), uptime_seconds=99_999.0)
    findings = Findings("events", "HEALTH")
    events.judge_kernel_log(scan, findings)
    assert len(findings.failures) == 1


def test_one_xid_on_two_gpus_is_two_findings() -> None:
    other = GpuEvent(kind="xid", gpu_uuid="GPU-b", at="2026-11-01T08:00:00+00:00", xid=79)
    findings = Findings("events", "HEALTH")
    events.judge_events([_xid(79), other], findings)
    assert len(findings.failures) == 2
    assert not any("times" in text for text in findings.failures)


def test_without_nvml_the_skip_says_why_in_full(
    no_gpu: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    result = events.run(cpu_context())
    assert (result.name, result.area, result.status) == ("events", "HEALTH", Status.SKIP)
    assert result.message == (
        "no NVIDIA GPU to watch (NVML unavailable); kernel log not readable here"
    )
    assert result.details["kernel_log"] == {
        "readable": False,
        "source": "kernel log not readable here",
    }
    assert result.details["notes"][0] == "kernel log not readable here"
    assert result.details["notes"][1].startswith("counters not read: NVML unavailable (")
    monkeypatch.setattr(events, "scan_kernel_log", lambda: KernelLogScan(True, "dmesg"))
    result = events.run(cpu_context())
    assert result.message == "no NVIDIA GPU to watch (NVML unavailable); no XID in the kernel log"


def test_a_clean_run_reads_in_full(fake_gpus: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    log = "[ 5.0] NVRM: Xid (PCI:0000:1b:00): 13, pid=7, Graphics Exception\n"
    scan = KernelLogScan(True, "dmesg", tuple(parse_kernel_log(log)))
    monkeypatch.setattr(events, "scan_kernel_log", lambda: scan)
    fake_gpus({"gpus": [h100_sxm()]})
    start = read_snapshot()
    result = events.run(replace(gpu_context(), start_counters=start, events=(_xid(13),)))
    assert (result.name, result.area, result.status) == ("events", "HEALTH", Status.WARN)
    assert sorted(result.details) == [
        "counter_growth",
        "events",
        "findings",
        "ignored",
        "kernel_log",
        "kernel_sxids",
        "kernel_xids",
        "notes",
        "xid_source",
    ]
    # both XID 13s keep their cause for the action tables: the NVML event names its GPU's
    # UUID, the kernel log its PCI address
    assert [(f["kind"], f["code"], f["status"]) for f in result.details["findings"]] == [
        ("xid", "13", "warn"),
        ("xid", "13", "warn"),
    ]
    assert result.details["findings"][1]["gpu"] == "PCI 0000:1b:00"
    assert result.details["events"][0]["xid"] == 13
    assert result.details["kernel_xids"][0]["xid"] == 13
    assert result.details["kernel_log"] == {"readable": True, "source": "dmesg"}
    assert result.details["notes"] == []
    assert result.details["counter_growth"] == []
    clean = events.run(replace(gpu_context(), start_counters=start))
    assert clean.status is Status.WARN  # the kernel log's XID 13 still warns
    monkeypatch.setattr(events, "scan_kernel_log", lambda: KernelLogScan(True, "dmesg"))
    clean = events.run(replace(gpu_context(), start_counters=start))
    assert (clean.status, clean.message) == (
        Status.PASS,
        "no failing XID or SXid or error growth in the run; 0 NVML event(s)",
    )
    unstarted = events.run(gpu_context())
    assert unstarted.message == (
        "no failing XID or SXid or error growth in the run; 0 NVML event(s) "
        "(no counters from the start of the run to compare with)"
    )


def test_a_lost_gpu_does_not_stop_the_others_being_judged() -> None:
    findings = Findings("events", "HEALTH")
    start = CounterSnapshot(
        0.0, (_counters(uuid="GPU-a", index=0), _counters(uuid="GPU-b", index=1))
    )
    end = CounterSnapshot(60.0, (_counters(uuid="GPU-b", index=1, ecc_uncorrected_volatile=1),))
    events.judge_growth(start, end, findings)
    assert findings.failures == [
        "NVML GPU 0 (GPU-a) was read at the start but not at the end (lost?)",
        "NVML GPU 1 (GPU-b): 1 uncorrectable ECC error(s) in the run",
    ]


def test_a_counter_unknown_at_either_end_is_not_growth() -> None:
    for start, end in (
        ({"ecc_uncorrected_volatile": None}, {"ecc_uncorrected_volatile": 3}),
        ({"ecc_corrected_volatile": None}, {"ecc_corrected_volatile": 3}),
        ({"pcie_replays": None}, {"pcie_replays": 3}),
        ({"pcie_replays": 3}, {"pcie_replays": None}),
        ({"nvlink": {0: (5, 5, 5)}}, {"nvlink": {}}),  # the link is gone: no reading, no growth
    ):
        findings = _grow(start, end)
        assert findings.failures == []
        assert findings.details["growth"] == []


def test_a_crc_rate_over_a_short_run_uses_the_run_s_own_seconds() -> None:
    findings = _grow(
        {"nvlink": {0: (10, 0, 0), 1: (0, 0, 0)}}, {"nvlink": {0: (110, 0, 0), 1: (0, 0, 0)}}, 1.0
    )
    assert findings.failures == [
        f"NVML GPU 0 ({UUID}): NVLink CRC errors grew by 100 (100.0/s; link 0 +100), at or "
        "above DCGM's 100/s"
    ]
    assert findings.details["growth"] == [{"uuid": UUID, "index": 0, "grew": {"nvlink0_crc": 100}}]


def test_a_gpu_without_replay_growth_or_link_facts_is_not_rated() -> None:
    findings = Findings("events", "HEALTH")
    end = CounterSnapshot(60.0, (_counters(pcie_gen_max=None),))
    growth = [{"uuid": UUID, "index": 0, "grew": {"pcie_replays": 500}}]
    events._judge_replay_growth(growth, end, 60.0, findings)
    assert findings.warnings == []
    other = [{"uuid": "GPU-x", "index": 1, "grew": {"pcie_replays": 500}}]
    events._judge_replay_growth(
        other + growth, CounterSnapshot(60.0, (_counters(),)), 60.0, findings
    )
    assert len(findings.warnings) == 1  # GPU-x has no facts; GPU 0 is still judged
    findings = Findings("events", "HEALTH")
    events._judge_replay_growth(
        [{"uuid": UUID, "index": 0, "grew": {"ecc_corrected": 9}}],
        CounterSnapshot(60.0, (_counters(),)),
        60.0,
        findings,
    )
    assert findings.warnings == []


def test_two_xids_on_one_gpu_are_two_findings_and_one_reads_in_full() -> None:
    findings = Findings("events", "HEALTH")
    events.judge_events([_xid(79), _xid(48)], findings)
    assert len(findings.failures) == 2
    assert findings.failures[0] == f"NVML event {_xid(79).describe()}"


def test_the_newest_occurrence_decides_the_age_whatever_the_order() -> None:
    line = "[ {stamp}] NVRM: Xid (PCI:0000:cb:00): 79, pid=1, GPU has fallen off the bus.\n"
    log = line.format(stamp="9000.0") + line.format(stamp="100.0")  # newest first
    scan = KernelLogScan(True, "dmesg", tuple(parse_kernel_log(log)), uptime_seconds=10_000.0)
    findings = Findings("events", "HEALTH")
    events.judge_kernel_log(scan, findings)
    assert len(findings.failures) == 1  # 1000 s old, not 9900


def test_an_old_critical_xid_does_not_hide_a_recent_one_on_another_gpu() -> None:
    log = (
        "[  100.0] NVRM: Xid (PCI:0000:1b:00): 79, pid=1, GPU has fallen off the bus.\n"
        "[ 9900.0] NVRM: Xid (PCI:0000:cb:00): 79, pid=1, GPU has fallen off the bus.\n"
    )
    scan = KernelLogScan(True, "dmesg", tuple(parse_kernel_log(log)), uptime_seconds=10_000.0)
    findings = Findings("events", "HEALTH")
    events.judge_kernel_log(scan, findings)
    assert [f.rsplit(" ", 1)[-1] for f in findings.failures] == ["0000:cb:00"]
    assert len(findings.warnings) == 1


def test_growth_is_timed_from_the_start_snapshot_and_small_corrected_growth_counts() -> None:
    findings = Findings("events", "HEALTH")
    start = CounterSnapshot(1000.0, (_counters(nvlink={0: (0, 0, 0)}, ecc_corrected_volatile=3),))
    end = CounterSnapshot(1060.0, (_counters(nvlink={0: (6000, 0, 0)}, ecc_corrected_volatile=4),))
    growth = events.judge_growth(start, end, findings)
    assert findings.failures[0].endswith("(100.0/s; link 0 +6000), at or above DCGM's 100/s")
    assert growth[0]["grew"]["ecc_corrected"] == 1
    findings = Findings("events", "HEALTH")
    same = CounterSnapshot(1060.0, (_counters(ecc_corrected_volatile=3),))
    assert (
        events.judge_growth(
            CounterSnapshot(1000.0, (_counters(ecc_corrected_volatile=3),)), same, findings
        )
        == []
    )


def test_notes_are_joined_and_growth_is_a_list_without_start_counters(
    fake_gpus: Any,
) -> None:
    fake_gpus({"gpus": [h100_sxm()]})
    result = events.run(gpu_context())
    assert result.details["counter_growth"] == []
    assert result.message.endswith(
        "(kernel log not readable here; no counters from the start of the run to compare with)"
    )


def test_a_repeated_xid_carries_how_often_and_over_how_long() -> None:
    """The action tables' per-XID repeat rules read a finding's count and span (first to last
    sighting by dmesg's stamps); lines without stamps give no span."""
    line = "[{:>12.6f}] NVRM: Xid (PCI:0000:cb:00): 94, pid=1, Contained ECC error."
    log = "\n".join(line.format(t) for t in (100.0, 1000.0, 1900.0))
    findings = Findings("events", "HEALTH")
    scan = KernelLogScan(True, "dmesg", tuple(parse_kernel_log(log)), uptime_seconds=2000.0)
    events.judge_kernel_log(scan, findings)
    (found,) = findings.failures
    assert (found.times, found.span_hours) == (3, 0.5)
    assert found.endswith(", 3 times")
    records = finding_records(findings.failures, [])
    assert (records[0]["count"], records[0]["span_hours"]) == (3, 0.5)
    unstamped = "NVRM: Xid (PCI:0000:cb:00): 94, pid=1, x\n" * 2
    plain = Findings("events", "HEALTH")
    events.judge_kernel_log(KernelLogScan(True, "file", tuple(parse_kernel_log(unstamped))), plain)
    assert (plain.failures[0].times, plain.failures[0].span_hours) == (2, None)
    twice = Findings("events", "HEALTH")
    two = "\n".join(line.format(t) for t in (10.0, 370.0))
    events.judge_kernel_log(KernelLogScan(True, "dmesg", tuple(parse_kernel_log(two))), twice)
    assert finding_records(twice.failures, [])[0]["count"] == 2
    assert finding_records(twice.failures, [])[0]["span_hours"] == 0.1
    # one sighting: nothing to repeat, the record stays as before repeat rules
    single = Findings("events", "HEALTH")
    events.judge_kernel_log(
        KernelLogScan(True, "dmesg", tuple(parse_kernel_log(line.format(5.0)))), single
    )
    assert "count" not in finding_records(single.failures, [])[0]


def test_an_xid_older_than_the_window_keeps_its_cause() -> None:
    """A critical XID from days ago is a warning, still named as the XID it is (its action:
    the catalogue's, bounded to monitor for a warning)."""
    log = "[   100.000000] NVRM: Xid (PCI:0000:cb:00): 79, pid=1, fell off the bus."
    findings = Findings("events", "HEALTH")
    scan = KernelLogScan(True, "dmesg", tuple(parse_kernel_log(log)), uptime_seconds=100_000.0)
    events.judge_kernel_log(scan, findings)
    (record,) = finding_records([], findings.warnings)
    assert (record["kind"], record["code"], record["gpu"]) == ("xid", "79", "PCI 0000:cb:00")


def _cause(found: str) -> tuple[Any, Any, Any]:
    return (getattr(found, "kind", None), getattr(found, "code", None), getattr(found, "gpu", None))


@pytest.mark.parametrize(
    ("event", "cause"),
    [
        (GpuEvent("xid", UUID, "t", 79), ("xid", "79", UUID)),
        (GpuEvent("xid", UUID, "t", 31), ("xid", "31", UUID)),  # a warning keeps its cause too
        (GpuEvent("xid", UUID, "t", None), (None, None, None)),  # no number: no XID row to read
        (
            GpuEvent("recovery_action", UUID, "t", action="GPU reset"),
            ("recovery-action", "GPU reset", UUID),
        ),
        (GpuEvent("recovery_action", UUID, "t"), (None, None, None)),  # the field unreadable
        (GpuEvent("ecc_double_bit", UUID, "t"), ("cause", "ecc-uncorrectable", UUID)),
        (GpuEvent("fatal_poison", None, "t"), ("cause", "ecc-uncorrectable", None)),
        (GpuEvent("dram_retirement", UUID, "t"), ("cause", "remap-pending", UUID)),
        (GpuEvent("dram_retirement_failure", UUID, "t"), ("cause", "remap-failure", UUID)),
        (GpuEvent("gpu_unavailable", UUID, "t"), ("cause", "lost-gpu", UUID)),
        (GpuEvent("clock_change", UUID, "t"), (None, None, None)),
    ],
)
def test_each_event_names_the_cause_the_action_tables_read(
    event: GpuEvent, cause: tuple[Any, Any, Any]
) -> None:
    findings = Findings("events", "HEALTH")
    events.judge_events([event], findings)
    (found,) = findings.failures + findings.warnings
    assert _cause(found) == cause
    assert found == f"NVML event {event.describe()}"


@pytest.mark.parametrize(
    ("end", "cause"),
    [
        ({"ecc_uncorrected_volatile": 1}, ("cause", "ecc-uncorrectable", UUID)),
        ({"nvlink": {0: (0, 2, 0), 1: (0, 0, 0)}}, ("cause", "nvlink-errors", UUID)),
        ({"nvlink": {0: (0, 0, 0), 1: (0, 0, 4)}}, ("cause", "nvlink-errors", UUID)),
        ({"nvlink": {0: (9000, 0, 0), 1: (0, 0, 0)}}, ("cause", "nvlink-errors", UUID)),  # fails
        ({"nvlink": {0: (10, 0, 0), 1: (0, 0, 0)}}, ("cause", "nvlink-errors", UUID)),  # warns
    ],
)
def test_each_counter_growth_names_its_cause_and_gpu(
    end: dict[str, Any], cause: tuple[Any, Any, Any]
) -> None:
    findings = Findings("events", "HEALTH")
    events.judge_growth(
        CounterSnapshot(0.0, (_counters(),)), CounterSnapshot(60.0, (_counters(**end),)), findings
    )
    (found,) = findings.failures + findings.warnings
    assert _cause(found) == cause


def test_a_run_judges_its_counters_by_the_sites_action_tables(fake_gpus: Any) -> None:
    """`accept --rules`: the site's CRC limit is the one the run's events check applies."""
    from gpuaccept.actions import ActionRules, LimitRow, builtin_rules

    lenient = builtin_rules().merged(
        ActionRules.model_validate({"limit": {"nvlink_crc_per_second": LimitRow(value=1e15)}}),
        "site lenient.toml",
    )
    links = [{"active": True, "version": 4} for _ in range(18)]
    links[3] = {"active": True, "version": 4, "crc": [0, 600]}
    for rules, status in ((None, Status.FAIL), (lenient, Status.WARN)):
        fake_gpus({"gpus": [h100_sxm(nvlink=links)]})
        start = read_snapshot()
        assert start is not None
        context = replace(gpu_context(), start_counters=start, action_rules=rules)
        result = events.run(context)
        assert result.status is status, result.message
        assert "NVLink CRC errors grew by 600" in result.message


def test_a_run_of_a_minute_or_less_counts_as_one_minute_at_any_link() -> None:
    """Gen6 x16: DCGM's 3.84/min per lane gives 62/min; 63 replays in 60 s are above it (a
    minute is a minute, not 61 s: 63 / (61/60) would be 61.97)."""
    start = CounterSnapshot(0.0, (_counters(pcie_replays=0, pcie_gen_max=6),))
    end = CounterSnapshot(60.0, (_counters(pcie_replays=63, pcie_gen_max=6),))
    findings = Findings("events", "HEALTH")
    events._judge_replay_growth(events.judge_growth(start, end, findings), end, 60.0, findings)
    assert findings.warnings == [
        f"NVML GPU 0 ({UUID}): 63 PCIe replays in the run, above DCGM's 62/min for Gen6 x16"
    ]


def test_one_gpu_spelled_two_ways_is_one_finding_and_gb200_domains_are_four() -> None:
    """Issue #50 §5: XIDs are grouped by domain:bus:device, the domain a number."""
    from gpuaccept.probe.kernel_log import KernelXid

    line = "NVRM: Xid (PCI:0008:01:00): 79, pid=1, GPU has fallen off the bus."
    spelled = (
        KernelXid(79, "0008:01:00", line),
        KernelXid(79, "00000008:01:00.0", line),  # NVML's busId of the same GPU
    )
    findings = Findings("events", "HEALTH")
    events.judge_kernel_log(KernelLogScan(True, "saved.log", spelled), findings)
    (only,) = findings.failures
    assert "PCI 0008:01:00" in only
    assert "2 times" in only
    assert getattr(only, "gpu", None) == "PCI 0008:01:00"
    tray = "".join(
        f"NVRM: Xid (PCI:{pci}): 79, pid=1, GPU has fallen off the bus.\n"
        for pci in ("0008:01:00", "0009:01:00", "0018:01:00", "0019:01:00")
    )
    findings = Findings("events", "HEALTH")
    events.judge_kernel_log(KernelLogScan(True, "x", tuple(parse_kernel_log(tray))), findings)
    assert sorted(getattr(f, "gpu", None) for f in findings.failures) == [
        "PCI 0008:01:00",
        "PCI 0009:01:00",
        "PCI 0018:01:00",
        "PCI 0019:01:00",
    ]
