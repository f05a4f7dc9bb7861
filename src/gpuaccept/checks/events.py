"""events: what happened to the hardware during the run, judged once at its end.

- NVML events watched in every worker for the whole run: a critical XID (probe.xid) or an event
  that condemns a GPU fails the node with its number and meaning; any other XID warns.
- `NVRM: Xid` lines in the kernel log since boot, read the same way (a note when the log is not
  readable here, as in most containers).
- Error counters read at the start of the run and again now (DCGM health-watch rules): NVLink
  replay or recovery errors that grew fail; CRC errors fail at 100/s or more and otherwise warn;
  uncorrectable ECC errors that grew fail; PCIe replays above DCGM's rate for the link warn. A
  GPU read at the start that cannot be read now fails (fallen off the bus?).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import asdict
from typing import Any

from gpuaccept.actions import ActionRules, Cause, builtin_rules
from gpuaccept.checks.context import CheckContext
from gpuaccept.checks.judging import Findings
from gpuaccept.checks.load_judging import replay_rate_limit
from gpuaccept.probe.hardware import nvml_missing_reason
from gpuaccept.probe.kernel_log import KernelLogScan, scan_kernel_log
from gpuaccept.probe.nvml_events import GpuEvent
from gpuaccept.probe.nvml_health import CounterSnapshot, ErrorCounters, read_snapshot
from gpuaccept.probe.xid import XID_SOURCE, describe_xid, is_critical
from gpuaccept.results import CheckResult, Status

# An NVML event kind as the cause the action tables know it by (gpuaccept.actions)
_EVENT_CAUSES = {
    "ecc_double_bit": "ecc-uncorrectable",
    "fatal_poison": "ecc-uncorrectable",
    "dram_retirement": "remap-pending",
    "dram_retirement_failure": "remap-failure",
    "gpu_unavailable": "lost-gpu",
}


def _event_cause(event: GpuEvent, text: str) -> str:
    if event.kind == "xid" and event.xid is not None:
        return Cause(text, "xid", event.xid, event.gpu_uuid)
    if event.kind == "recovery_action" and event.action:
        return Cause(text, "recovery-action", event.action, event.gpu_uuid)
    if event.kind in _EVENT_CAUSES:
        return Cause(text, "cause", _EVENT_CAUSES[event.kind], event.gpu_uuid)
    return text


def judge_events(events: tuple[GpuEvent, ...] | list[GpuEvent], findings: Findings) -> None:
    seen: Counter[tuple[str, str, str]] = Counter()
    first: dict[tuple[str, str, str], GpuEvent] = {}
    for event in events:
        key = (event.kind, str(event.xid), event.gpu_uuid or "")
        seen[key] += 1
        first.setdefault(key, event)
    for key, count in seen.items():
        event = first[key]
        times = f" ({count} times)" if count > 1 else ""
        text = _event_cause(event, f"NVML event {event.describe()}{times}")
        (findings.failures if event.fails_node else findings.warnings).append(text)


# aznhc's check_gpu_xid judges only XIDs of the last 2 hours (customTests/azure_gpu_xid.nhc:16-19,
# 40-41), so an XID from days ago does not fail every run until the next reboot. Here an older
# critical XID still shows, as a warning; one whose age is unknown (a saved log, a line without
# dmesg's stamp) is judged as recent.
KERNEL_LOG_WINDOW_SECONDS = 2 * 3600.0


def judge_kernel_log(scan: KernelLogScan, findings: Findings) -> None:
    counts = Counter((xid.pci_bus_id, xid.xid) for xid in scan.xids)
    newest: dict[tuple[str, int], float | None] = {}
    oldest: dict[tuple[str, int], float | None] = {}
    for found in scan.xids:
        key = (found.pci_bus_id, found.xid)
        stamps = (newest.get(key, 0.0), found.seconds_since_boot)
        newest[key] = None if None in stamps else max(s for s in stamps if s is not None)
        earliest = (oldest.get(key, found.seconds_since_boot), found.seconds_since_boot)
        oldest[key] = None if None in earliest else min(s for s in earliest if s is not None)
    for (pci, xid), count in sorted(counts.items()):
        times = f", {count} times" if count > 1 else ""
        said = f"kernel log since boot: XID {xid} ({describe_xid(xid)}) on PCI {pci}{times}"
        last, first = newest[(pci, xid)], oldest[(pci, xid)]
        # first to last sighting, for the action tables' per-XID repeat rules
        span = None if last is None or first is None else (last - first) / 3600
        text = Cause(said, "xid", xid, f"PCI {pci}", count, span)
        stamp, uptime = newest[(pci, xid)], scan.uptime_seconds
        age = None if stamp is None or uptime is None else uptime - stamp
        if age is not None and age > KERNEL_LOG_WINDOW_SECONDS and is_critical(xid):
            findings.warnings.append(
                Cause(
                    f"{text}, the last {age / 3600:.1f} h ago: older than aznhc's 2 h window, "
                    "not judged (reboot to clear it)",
                    "xid",
                    xid,
                    f"PCI {pci}",
                )
            )
            continue
        (findings.failures if is_critical(xid) else findings.warnings).append(text)


def judge_growth(
    start: CounterSnapshot,
    end: CounterSnapshot,
    findings: Findings,
    rules: ActionRules | None = None,
) -> list[dict[str, Any]]:
    """Compare counters by GPU UUID; the growth per GPU for the report. The NVLink CRC rate that
    fails is the action tables' `limit.nvlink_crc_per_second` (DCGM's 100/s built in)."""
    rules = rules or builtin_rules()
    crc_limit = rules.limit_of("nvlink_crc_per_second")
    seconds = max(end.at - start.at, 1e-3)
    now = {c.uuid: c for c in end.counters}
    growth = []
    for before in start.counters:
        tag = f"NVML GPU {before.index} ({before.uuid})"
        after = now.get(before.uuid)
        if after is None:
            findings.failures.append(
                Cause(
                    f"{tag} was read at the start but not at the end (lost?)",
                    "cause",
                    "lost-gpu",
                    before.uuid,
                )
            )
            continue
        grew: dict[str, int] = {}
        if before.ecc_uncorrected_volatile is not None and after.ecc_uncorrected_volatile:
            delta = after.ecc_uncorrected_volatile - before.ecc_uncorrected_volatile
            if delta > 0:
                grew["ecc_uncorrected"] = delta
                findings.failures.append(
                    Cause(
                        f"{tag}: {delta} uncorrectable ECC error(s) in the run",
                        "cause",
                        "ecc-uncorrectable",
                        before.uuid,
                    )
                )
        if before.ecc_corrected_volatile is not None and after.ecc_corrected_volatile:
            delta = after.ecc_corrected_volatile - before.ecc_corrected_volatile
            if delta > 0:
                grew["ecc_corrected"] = delta  # reported; the health thresholds judge totals
        if before.pcie_replays is not None and after.pcie_replays is not None:
            delta = after.pcie_replays - before.pcie_replays
            if delta > 0:
                grew["pcie_replays"] = delta
        crc_links: list[tuple[int, int]] = []
        for link, (crc0, replay0, recovery0) in sorted(before.nvlink.items()):
            crc1, replay1, recovery1 = after.nvlink.get(link, (None, None, None))
            for name, was, now_value in (
                ("replay", replay0, replay1),
                ("recovery", recovery0, recovery1),
            ):
                if was is not None and now_value is not None and now_value > was:
                    grew[f"nvlink{link}_{name}"] = now_value - was
                    findings.failures.append(
                        Cause(
                            f"{tag}: NVLink {link} {name} errors grew by {now_value - was} in "
                            "the run",
                            "cause",
                            "nvlink-errors",
                            before.uuid,
                        )
                    )
            if crc0 is not None and crc1 is not None and crc1 > crc0:
                grew[f"nvlink{link}_crc"] = crc1 - crc0
                crc_links.append((link, crc1 - crc0))
        # DCGM judges the GPU's FLIT + DATA CRC totals over all its links, not each link alone
        # (DcgmHealthWatch's NVLink CRC rule); a burst on one link counts in the GPU's total
        crc_total = sum(count for _, count in crc_links)
        if crc_total:
            rate = crc_total / seconds
            where = ", ".join(f"link {link} +{count}" for link, count in crc_links)
            text = f"{tag}: NVLink CRC errors grew by {crc_total} ({rate:.1f}/s; {where})"
            above = rate >= crc_limit
            if above:
                text += ", at or above " + rules.limit_said(
                    "nvlink_crc_per_second", "DCGM's {value}/s"
                )
            caused = Cause(text, "cause", "nvlink-errors", before.uuid)
            (findings.failures if above else findings.warnings).append(caused)
        _judge_nvlink_recoveries(tag, before, after, grew, findings)
        if grew:
            growth.append({"uuid": before.uuid, "index": before.index, "grew": grew})
    return growth


def _judge_nvlink_recoveries(
    tag: str, before: ErrorCounters, after: ErrorCounters, grew: dict[str, int], findings: Findings
) -> None:
    """Links whose DL error counters NVML does not read (NVLink5) are judged as DCGM judges them
    there: a failed link recovery in the run fails, a successful one warns (probe/nvml_health.py
    names the source). Where neither can be read, the run says their errors went unjudged."""
    uncounted = sorted(set(before.nvlink_uncounted) | set(after.nvlink_uncounted))
    if not uncounted:
        return
    was, now = before.nvlink_recoveries, after.nvlink_recoveries
    if was is None or now is None:
        findings.warnings.append(
            f"{tag}: NVLink {_links(uncounted)}: NVML reads no error counter of "
            f"{'this link' if len(uncounted) == 1 else 'these links'} and no link recovery "
            "count: their errors in the run were not judged"
        )
        return
    recovered, failed = now[0] - was[0], now[1] - was[1]
    if failed > 0:
        grew["nvlink_recovery_failed"] = failed
        findings.failures.append(
            Cause(
                f"{tag}: {failed} failed NVLink link recover{'y' if failed == 1 else 'ies'} in "
                "the run (DCGM fails any)",
                "cause",
                "nvlink-errors",
                before.uuid,
            )
        )
    if recovered > 0:
        grew["nvlink_recovery_successful"] = recovered
        findings.warnings.append(
            Cause(
                f"{tag}: NVLink links recovered {recovered} time(s) in the run (DCGM warns)",
                "cause",
                "nvlink-errors",
                before.uuid,
            )
        )


def _links(links: list[int]) -> str:
    return ", ".join(str(link) for link in links)


def _judge_replay_growth(
    growth: list[dict[str, Any]], end: CounterSnapshot, seconds: float, findings: Findings
) -> None:
    """PCIe replays over the run against DCGM's rate for the GPU's full link."""
    minutes = max(seconds, 60.0) / 60  # DCGM counts over a minute
    links = {c.uuid: (c.pcie_gen_max, c.pcie_width_max) for c in end.counters}
    for entry in growth:
        replays = entry["grew"].get("pcie_replays", 0)
        gen, width = links.get(entry["uuid"], (None, None))
        if not replays or gen is None or width is None:
            continue
        limit = replay_rate_limit(gen, width)
        if replays / minutes > limit:
            findings.warnings.append(
                Cause(
                    f"NVML GPU {entry['index']} ({entry['uuid']}): {replays} PCIe replays in the "
                    f"run, above DCGM's {limit}/min for Gen{gen} x{width}",
                    "cause",
                    "pcie-replays",
                    entry["uuid"],
                )
            )


def run(context: CheckContext) -> CheckResult:
    findings = Findings("events", "HEALTH")
    judge_events(context.events, findings)
    scan = scan_kernel_log()
    judge_kernel_log(scan, findings)
    notes = [] if scan.readable else [scan.source]
    start = context.start_counters
    end = read_snapshot()
    growth: list[dict[str, Any]] = []
    if end is None:
        notes.append(f"counters not read: NVML unavailable ({nvml_missing_reason()})")
    elif start is None:
        notes.append("no counters from the start of the run to compare with")
    else:
        growth = judge_growth(start, end, findings, context.action_rules)
        _judge_replay_growth(growth, end, end.at - start.at, findings)
        findings.warnings += [f"at the end: {problem}" for problem in end.problems]
    findings.details = {
        "events": [asdict(event) for event in context.events],
        "kernel_log": {"readable": scan.readable, "source": scan.source},
        "kernel_xids": [asdict(xid) for xid in scan.xids],
        "counter_growth": growth,
        "xid_source": XID_SOURCE,
        "notes": notes,
    }
    watched = end is not None or context.events
    if not watched and not scan.xids and not findings.failures:
        return CheckResult(
            name="events",
            area="HEALTH",
            status=Status.SKIP,
            message="no NVIDIA GPU to watch (NVML unavailable); "
            + ("no XID in the kernel log" if scan.readable else scan.source),
            details=findings.details,
        )
    note = f" ({'; '.join(notes)})" if notes else ""
    return findings.conclude(
        f"no critical XID or error growth in the run; {len(context.events)} NVML event(s){note}"
    )
