"""events: what happened to the hardware during the run, judged once at its end.

- NVML events watched in every worker for the whole run: an XID fails, warns or is ignored as its
  row of the run's action tables says (data/actions.toml `[xid]`, a site's `--rules` over it); an
  event that condemns a GPU fails the node with its number and meaning.
- `NVRM: Xid` lines (and "fallen off the bus" messages without one, as XID 79), NVSwitch `SXid`
  lines and XID 154's recovery action in the kernel log since boot, judged by the same rows and
  each dated by its own stamp (a note when the log is not readable here, as in most containers).
- Error counters read at the start of the run and again now (DCGM health-watch rules): NVLink
  replay or recovery errors that grew fail; CRC errors fail at 100/s or more and otherwise warn;
  uncorrectable ECC errors that grew fail; PCIe replays above DCGM's rate for the link warn. A
  GPU read at the start that cannot be read now fails (fallen off the bus?).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import asdict, dataclass
from typing import Any

from gpuaccept.actions import (
    ActionRules,
    Cause,
    CauseKind,
    Judge,
    builtin_rules,
    judge_of,
    sxid_row_is_builtin,
    sxid_verdict,
    xid_row_is_builtin,
    xid_verdict,
)
from gpuaccept.checks.context import CheckContext
from gpuaccept.checks.judging import Findings
from gpuaccept.checks.load_judging import replay_rate_limit
from gpuaccept.probe.hardware import nvml_missing_reason
from gpuaccept.probe.kernel_log import KernelLogScan, KernelSxid, KernelXid, scan_kernel_log
from gpuaccept.probe.nvml_events import GpuEvent
from gpuaccept.probe.nvml_health import CounterSnapshot, ErrorCounters, read_snapshot
from gpuaccept.probe.pci_address import one_name_per_gpu
from gpuaccept.probe.xid import (
    FAILING_RECOVERY_ACTIONS,
    XID_SOURCE,
    decode_nvlink5,
    describe_xid,
)
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


def judge_events(
    events: tuple[GpuEvent, ...] | list[GpuEvent],
    findings: Findings,
    rules: ActionRules | None = None,
) -> list[str]:
    """Each distinct NVML event once; an XID by its row of `rules`. The ignored ones, said."""
    rules = rules or builtin_rules()
    seen: Counter[tuple[str, str, str]] = Counter()
    first: dict[tuple[str, str, str], GpuEvent] = {}
    ignored: list[str] = []
    for event in events:
        key = (event.kind, str(event.xid), event.gpu_uuid or "")
        seen[key] += 1
        first.setdefault(key, event)
    for key, count in seen.items():
        event = first[key]
        times = f" ({count} times)" if count > 1 else ""
        text = _event_cause(event, f"NVML event {event.describe()}{times}")
        if event.kind == "xid" and event.xid is not None:
            verdict = xid_verdict(rules, event.xid)
            if verdict == "ignore":
                ignored.append(str(text))
                continue
            (findings.failures if verdict == "fail" else findings.warnings).append(text)
            continue
        (findings.failures if event.fails_node else findings.warnings).append(text)
    return ignored


# aznhc's check_gpu_xid judges only XIDs of the last 2 hours (customTests/azure_gpu_xid.nhc:16-19,
# 44-53 at Azure/azurehpc-health-checks 0e0a1ac: "Xid older than $time_threshold hours ...
# Skipping"), so an XID from days ago does not fail every run until the next reboot. Here an older
# one that would fail is said, as a warning, and not failed; one whose age cannot be known (a line
# without any stamp, seconds since another boot) is judged as recent, and the log says so once.
# Every line's time is read the same way for every rule (the window, the per-XID repeats, the
# link flaps): its own date, or its seconds since boot dated from the boot time.
KERNEL_LOG_WINDOW_SECONDS = 2 * 3600.0


@dataclass(frozen=True)
class _LineVerdict:
    verdict: Judge
    kind: CauseKind  # the action tables' kind: xid or recovery-action
    code: str
    why: str  # "" when the row's verdict stands as written


def _xid_line_verdict(found: KernelXid, rules: ActionRules) -> _LineVerdict:
    """One kernel-log XID line's verdict: its row, refined where the line says more (XID 154's
    recovery action; the NVLink5 decode of 144-150 while the row is the built-in one)."""
    code = str(found.xid)
    if found.xid == 154 and found.recovery_action is not None:
        name = found.recovery_action
        action = rules.recovery_action.get(name)
        if action is None:
            return _LineVerdict("warn", "recovery-action", name, "an unknown recovery action")
        verdict = judge_of(action)
        builtin = builtin_rules().recovery_action.get(name) == action
        if verdict == "fail" and builtin and name not in FAILING_RECOVERY_ACTIONS:
            verdict = "warn"  # drain P2P: DCGM warns (probe.xid FAILING_RECOVERY_ACTIONS)
        return _LineVerdict(verdict, "recovery-action", name, f"recovery action: {name}")
    row = rules.xid.get(code)
    if (
        144 <= found.xid <= 150
        and found.unit
        and found.intrinfo is not None
        and found.error_status is not None
        and xid_row_is_builtin(rules, found.xid)
    ):
        rule = decode_nvlink5(found.xid, found.unit, found.intrinfo, found.error_status)
        said = f"{found.unit} {found.severity} status 0x{found.error_status:08x}"
        if found.severity == "Fatal":
            return _LineVerdict("fail", "xid", code, f"{said}: the line says Fatal")
        if rule is None:
            return _LineVerdict(
                "warn", "xid", code, f"{said}: no rule of the decode sheet; the line says Nonfatal"
            )
        decoded: Judge = "warn"  # XID_154_EVAL: the XID 154 line beside it says what to do
        if rule.bucket in ("IGNORE", "RESET_GPU"):
            decoded = "ignore" if rule.bucket == "IGNORE" else "fail"
        return _LineVerdict(decoded, "xid", code, f"{said}: decode sheet {rule.bucket}")
    if row is not None and row.judge is not None:
        return _LineVerdict(row.verdict, "xid", code, row.why)
    return _LineVerdict(xid_verdict(rules, found.xid), "xid", code, "")


def _sxid_verdict(found: KernelSxid, rules: ActionRules) -> Judge:
    """An SXid's row; a line the driver printed `Fatal` fails while the row is the built-in one
    (a site's row is its word), and one without a row warns unless it says Fatal."""
    if str(found.sxid) in rules.sxid and not sxid_row_is_builtin(rules, found.sxid):
        return sxid_verdict(rules, found.sxid)
    if found.fatal:
        return "fail"
    return sxid_verdict(rules, found.sxid)


def _age_and_span(
    stamps: list[tuple[float | None, float | None]], scan: KernelLogScan, now: float
) -> tuple[float | None, float | None]:
    """The age of the newest of a group of lines and the hours between its first and last, from
    their dates, else their seconds since boot when the log is this boot's; None: unknown."""
    dates = [at for at, _ in stamps]
    if all(at is not None for at in dates):
        known = [at for at in dates if at is not None]
        return now - max(known), (max(known) - min(known)) / 3600
    since = [boot for _, boot in stamps]
    if all(boot is not None for boot in since):
        known = [boot for boot in since if boot is not None]
        span = (max(known) - min(known)) / 3600
        if scan.uptime_seconds is None:
            return None, span
        return scan.uptime_seconds - max(known), span
    return None, None


def judge_kernel_log(
    scan: KernelLogScan,
    findings: Findings,
    rules: ActionRules | None = None,
    now: float | None = None,
) -> list[str]:
    """The kernel log's XIDs and SXids, grouped per GPU (or switch), code and verdict; the lines
    their rows ignore are returned, to be said, never failed."""
    import time

    rules = rules or builtin_rules()
    now = time.time() if now is None else now
    groups: dict[tuple[str, int, _LineVerdict], list[KernelXid]] = {}
    gpu_of = one_name_per_gpu([found.pci_bus_id for found in scan.xids])
    for found in scan.xids:
        judged = _xid_line_verdict(found, rules)
        groups.setdefault((gpu_of[found.pci_bus_id], found.xid, judged), []).append(found)
    ignored: list[str] = []
    for (pci, xid, judged), lines in sorted(groups.items(), key=lambda item: item[0][:2]):
        count = len(lines)
        times = f", {count} times" if count > 1 else ""
        meaning = describe_xid(xid) if not lines[0].without_xid else "GPU has fallen off the bus"
        without = " (no Xid printed: read as XID 79)" if lines[0].without_xid else ""
        # a row's reason without its citation (the row in data/actions.toml keeps that)
        why = f"; {judged.why.split(' (', 1)[0]}" if judged.why else ""
        said = f"kernel log since boot: XID {xid} ({meaning}) on PCI {pci}{without}{why}{times}"
        if judged.verdict == "ignore":
            ignored.append(said)
            continue
        age, span = _age_and_span([(x.at, x.seconds_since_boot) for x in lines], scan, now)
        text = Cause(said, judged.kind, judged.code, f"PCI {pci}", count, span)
        _file(
            findings, text, judged.verdict, age, Cause(said, judged.kind, judged.code, f"PCI {pci}")
        )
    switch_groups: dict[tuple[str, str, int, Judge], list[KernelSxid]] = {}
    for sxid in scan.sxids:
        key = (sxid.switch, sxid.pci_bus_id, sxid.sxid, _sxid_verdict(sxid, rules))
        switch_groups.setdefault(key, []).append(sxid)
    for (switch, pci, code, verdict), switch_lines in sorted(switch_groups.items()):
        row = rules.sxid.get(str(code))
        name = f" ({row.name})" if row is not None and row.name else ""
        printed = {True: ", Fatal", False: ", Non-fatal", None: ""}[switch_lines[0].fatal]
        times = f", {len(switch_lines)} times" if len(switch_lines) > 1 else ""
        where = f"{switch} (PCI {pci})" if switch else f"PCI {pci}"
        said = f"kernel log since boot: NVSwitch {where}: SXid {code}{name}{printed}{times}"
        if verdict == "ignore":
            ignored.append(said)
            continue
        age, _ = _age_and_span([(x.at, x.seconds_since_boot) for x in switch_lines], scan, now)
        _file(findings, Cause(said, "sxid", code), verdict, age, Cause(said, "sxid", code))
    return ignored


def _file(findings: Findings, text: Cause, verdict: Judge, age: float | None, old: Cause) -> None:
    """A failing line older than the window is said, as a warning, and not failed (aznhc)."""
    if verdict == "fail" and age is not None and age > KERNEL_LOG_WINDOW_SECONDS:
        findings.warnings.append(
            Cause(
                f"{old}, the last {age / 3600:.1f} h ago: older than aznhc's 2 h window, "
                "not judged (reboot to clear it)",
                old.kind,
                old.code,
                old.gpu,
            )
        )
        return
    (findings.failures if verdict == "fail" else findings.warnings).append(text)


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
    rules = context.action_rules
    ignored = judge_events(context.events, findings, rules)
    scan = scan_kernel_log()
    ignored += judge_kernel_log(scan, findings, rules)
    notes = [] if scan.readable else [scan.source]
    if scan.undated:
        notes.append(
            f"{scan.undated} kernel-log line(s) in {scan.source} carry no time that can be read "
            "(no stamp, or seconds since another boot): judged as recent"
        )
    if ignored:
        notes.append(f"{len(ignored)} finding(s) the action tables ignore (see details)")
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
        "kernel_sxids": [asdict(sxid) for sxid in scan.sxids],
        "ignored": ignored,
        "counter_growth": growth,
        "xid_source": XID_SOURCE,
        "notes": notes,
    }
    watched = end is not None or context.events
    if not watched and not scan.xids and not scan.sxids and not findings.failures:
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
        f"no failing XID or SXid or error growth in the run; {len(context.events)} NVML "
        f"event(s){note}"
    )
