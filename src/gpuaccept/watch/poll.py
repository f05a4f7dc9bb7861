"""One poll of the node between jobs, judged by the rules `accept` judges with; no rule of its own
is written here (issue #54 §1: one source of truth).

- Each GPU's NVML health (ECC, row remapping, page retirement, the recovery action, NVLinks down,
  fabric registration, the PCIe link at rest): `checks.health.judge_health`, as accept's health
  check judges it at the start of a run.
- Clock-event reasons, the temperature and the PCIe link while the GPU is busy:
  `checks.load_judging.judge_load`, as accept judges the samples taken under load (above the
  GPU's maximum operating temperature fails, as in DCGM's diagnostic; hardware slowdown,
  hardware thermal slowdown and the power brake, 0x80, fail; software thermal slowdown warns;
  the software power cap, 0x04, is how the power limit is enforced and never a finding). Busy
  and idle are told apart by NVML's own
  clock-event reason GpuIdle (0x1): an idle GPU is judged at rest (a reason warns, as accept's
  health check says it) and its link generation is not judged at all, because an idle GPU trains
  its link down to save power. The link under load is the best reading of the last `window` busy
  polls against the model's (accept's rule: "a healthy link trains up as soon as data moves, a
  downtrained one never reaches the model's"); idle polls neither fill nor clear that window.
- The kernel log since boot: `checks.events.judge_kernel_log` (the XID and SXid tables, aznhc's
  2-hour window), and InfiniBand link flaps: `checks.fabric.judge_link_flaps` (24 hours, 5 fail).
- What happened between two polls: NVML events (`checks.events.judge_events`) and the growing
  counters (`checks.events.judge_growth`: NVLink replay/recovery errors, the CRC rate, ECC), and
  each InfiniBand/RoCE port's error counters (`checks.fabric.judge_counter_growth`, the rule
  accept's `fabric-errors` judges a run's growth by: `link_downed` and the other physical-link
  errors fail, the minor ones and congestion warn, a port gone fails). These are events, not
  states: each is kept `EVENT_HOLD_SECONDS` after it was last seen.

A poll never raises: NVML unavailable (no driver, a driver being reloaded) or a GPU it cannot
read leaves its findings unjudged for that poll, said in `Poll.unjudged`.
"""

from __future__ import annotations

import os
import re
import time
from collections import deque
from dataclasses import dataclass, replace
from typing import Any

from gpuaccept.actions import ActionRules, Cause, builtin_rules
from gpuaccept.checks.events import (
    KERNEL_LOG_WINDOW_SECONDS,
    judge_events,
    judge_growth,
    judge_kernel_log,
)
from gpuaccept.checks.fabric import (
    judge_counter_growth,
    judge_link_flaps,
    says_what_a_reading_cannot,
    shown_ports,
)
from gpuaccept.checks.health import judge_health
from gpuaccept.checks.judging import Findings
from gpuaccept.checks.load_judging import TEMP_VIOLATION, judge_load
from gpuaccept.probe.fabric import read_port_counters
from gpuaccept.probe.hardware import load_nvml, nvml_missing_reason
from gpuaccept.probe.kernel_log import KernelLogScan, KernelSxid, KernelXid, scan_kernel_log
from gpuaccept.probe.load_sampler import LoadSample, LoadTrace, take_sample
from gpuaccept.probe.nvml_events import EventWatcher
from gpuaccept.probe.nvml_health import (
    CounterSnapshot,
    ErrorCounters,
    GpuHealth,
    GpuNotFound,
    counters_with_links,
    read_gpu_health,
    read_or_none,
    read_throttle_mask,
)
from gpuaccept.probe.sysfs import sysfs_root
from gpuaccept.references import ReferenceTable, load_shipped_references

# The checks of accept whose rules judge each finding: the action tables plan by them.
HEALTH, EVENTS, FABRIC = "health", "events", "fabric"
WATCHED_CHECKS = (HEALTH, EVENTS, FABRIC)
# An event (an XID by NVML, counters that grew between two polls) is kept this long after it was
# last seen: aznhc's window, the one accept's kernel-log rule judges XIDs by.
EVENT_HOLD_SECONDS = KERNEL_LOG_WINDOW_SECONDS
# the kernel log's lines a poller remembers past a rotation (an XID storm keeps the newest)
KERNEL_LINES_KEPT = 4096
# Scopes a finding belongs to: all NVML, one GPU's NVML readings, the kernel log, the ports.
NVML, KERNEL, PORTS = "nvml", "kernel", "ports"
_NUMBER = re.compile(r"(?<![A-Za-z_.:])\d+(?:\.\d+)?")


def gpu_scope(uuid: str | None, index: int) -> str:
    return f"gpu:{uuid or index}"


@dataclass(frozen=True)
class Finding:
    """What one poll found. `key` names it across polls (its counts and ages masked): the
    debounce counts a key's consecutive polls. `lasting`: a state read at each poll, debounced;
    otherwise an event, raised when seen. `held`: already judged over several polls."""

    key: str
    check: str
    fails: bool
    text: str
    scope: str
    lasting: bool = True
    held: bool = False
    gpu: str = ""  # the GPU's UUID, a PCI address, or "" for the node
    seen: float | None = None  # an event: the poll that last saw it happen (a repeat is news)


@dataclass(frozen=True)
class GpuReading:
    """The figures a scrape shows of one GPU (never judged here: the findings are)."""

    index: int
    uuid: str | None
    name: str
    temperature_c: float | None = None
    power_w: float | None = None
    sm_clock_mhz: float | None = None
    reasons_mask: int | None = None
    busy: bool | None = None  # None: NVML gave no clock-event reasons
    pcie_gen: int | None = None
    pcie_gen_max: int | None = None
    pcie_width: int | None = None
    pcie_width_max: int | None = None


@dataclass(frozen=True)
class Poll:
    at: float
    seconds: float
    nvml_up: bool
    nvml_problem: str | None
    gpus: tuple[GpuReading, ...]
    findings: tuple[Finding, ...]
    # scopes ("nvml", "gpu:<uuid>", "kernel") and keys this poll could not judge: their findings
    # neither start nor end a streak (a gap in the readings is no reading)
    unjudged: frozenset[str]
    kernel_log_readable: bool
    kernel_log_source: str
    notes: tuple[str, ...] = ()
    ports_readable: bool = True  # the InfiniBand/RoCE ports' counters could be read


def key_of(check: str, scope: str, text: str) -> str:
    """A finding's name across polls: its cause where it names one, and its text with the
    numbers that change between polls (counts, ages, rates) masked."""
    masked = _NUMBER.sub("#", str(text))
    if isinstance(text, Cause):
        return f"{check}|{scope}|{text.kind}|{text.code}|{text.gpu or ''}|{masked}"
    return f"{check}|{scope}|{masked}"


def findings_of(
    found: Findings, scope: str, *, lasting: bool = True, held: bool = False, gpu: str = ""
) -> list[Finding]:
    out = []
    for fails, texts in ((True, found.failures), (False, found.warnings)):
        for text in texts:
            named = gpu or (getattr(text, "gpu", None) or "")
            out.append(
                Finding(
                    key_of(found.name, scope, text),
                    found.name,
                    fails,
                    text,
                    scope,
                    lasting,
                    held,
                    named,
                )
            )
    return out


def _idle_bit(nvml: Any) -> int:
    bit: Any = getattr(nvml, "nvmlClocksEventReasonGpuIdle", None)
    if bit is None:
        bit = getattr(nvml, "nvmlClocksThrottleReasonGpuIdle", 0x1)
    return int(bit)


class Poller:
    """Reads and judges the node once per `poll()`; keeps what spans polls: the counters read
    last, the NVML event watcher, the busy samples of each GPU, the events seen."""

    def __init__(
        self,
        rules: ActionRules | None = None,
        references: ReferenceTable | None = None,
        window: int = 3,
        events: bool = True,
        kernel_log: Any = None,
    ) -> None:
        self.rules = rules or builtin_rules()
        self.references = references or load_shipped_references()
        self.window = window
        self._want_events = events
        self._watcher: EventWatcher | None = None
        self._counters: CounterSnapshot | None = None
        self._ports: dict[str, dict[str, int | None]] | None = None  # the ports' counters last read
        self.ports_readable = True
        self._present: set[str] = set()  # the ports read at the last poll
        self._busy: dict[str, deque[LoadSample]] = {}
        self._events: dict[str, tuple[Finding, float]] = {}
        self._read_now: list[ErrorCounters] = []  # this poll's counters, from its health reads
        self._unread: list[str] = []
        self._read_kernel_log = kernel_log  # None: dmesg or GPUACCEPT_KERNEL_LOG
        # dated XID and SXid lines read by earlier polls, while aznhc's window holds them
        self._kernel_lines: dict[tuple[str, float | None], KernelXid | KernelSxid] = {}

    def close(self) -> None:
        if self._watcher is not None:
            self._watcher.stop()
            self._watcher = None

    def poll(self, now: float | None = None) -> Poll:
        started = time.monotonic()
        now = time.time() if now is None else now
        findings: list[Finding] = []
        unjudged: set[str] = set()
        notes: list[str] = []
        nvml = load_nvml()
        gpus: list[GpuReading] = []
        problem = None
        if nvml is None:
            problem = nvml_missing_reason()
        else:
            try:
                gpus, problem = self._nvml_poll(nvml, now, findings, unjudged)
            except Exception as error:  # a GPU gone between two calls, a driver going away
                gpus, problem = [], f"NVML failed mid-poll: {type(error).__name__}: {error}"
            finally:
                shutdown = getattr(nvml, "nvmlShutdown", None)
                if shutdown is not None:
                    read_or_none(shutdown)  # each poll's nvmlInit is paired: NVML counts them
        if problem is not None and not gpus:
            # NVML down (a driver reload, no driver): no GPU finding starts or ends, the events'
            # watcher and the counters start again once it is back (a reload resets counters)
            unjudged.add(NVML)
            self._counters = None
            self.close()
        scan = scan_kernel_log(self._read_kernel_log, now)
        if scan.readable:
            findings += self._kernel_findings(self._with_remembered(scan, now), now)
        else:
            unjudged.add(KERNEL)
            notes.append(scan.source)
        findings += self._judge_ports(now, unjudged, notes)
        findings += self._held_events(now)
        return Poll(
            at=now,
            seconds=time.monotonic() - started,
            nvml_up=nvml is not None and problem is None,
            nvml_problem=problem,
            gpus=tuple(gpus),
            findings=tuple(_unique(findings)),
            unjudged=frozenset(unjudged),
            kernel_log_readable=scan.readable,
            kernel_log_source=scan.source,
            notes=tuple(notes),
            ports_readable=self.ports_readable,
        )

    # -- NVML --------------------------------------------------------------------------------

    def _nvml_poll(
        self, nvml: Any, now: float, findings: list[Finding], unjudged: set[str]
    ) -> tuple[list[GpuReading], str | None]:
        try:
            count = int(nvml.nvmlDeviceGetCount())
        except Exception as error:
            return [], f"NVML cannot count the GPUs: {error}"
        if self._want_events and self._watcher is None:
            self._watcher = EventWatcher(load_nvml)
            self._watcher.start()
        gpus = []
        self._read_now, self._unread = [], []
        for index in range(count):
            reading = self._gpu_poll(nvml, index, count, findings, unjudged)
            if reading is not None:
                gpus.append(reading)
        self._judge_between_polls(now)
        return gpus, None

    def _gpu_poll(
        self, nvml: Any, index: int, count: int, findings: list[Finding], unjudged: set[str]
    ) -> GpuReading | None:
        try:
            health = read_gpu_health(nvml, index)
        except GpuNotFound as error:
            scope = gpu_scope(None, index)
            found = Findings(HEALTH, "HEALTH")
            said = f"gpu{index}: {error}; its health could not be read"
            self._unread.append(said)
            if error.lost:
                found.failures.append(Cause(said, "cause", "lost-gpu", None))
            else:
                found.warnings.append(said)
                unjudged.add(scope)
            findings += findings_of(found, scope)
            return None
        scope = gpu_scope(health.uuid, index)
        handle = nvml.nvmlDeviceGetHandleByIndex(index)
        # the links just read, not read again: they are most of a poll's NVML calls
        uuid = health.uuid or f"NVML GPU {index}"
        self._read_now.append(counters_with_links(nvml, handle, uuid, index, health.nvlinks))
        mask = read_throttle_mask(nvml, handle)
        busy = None if mask is None else not mask & _idle_bit(nvml)
        sample = take_sample(nvml, handle, 0.0)
        key = self.references.model_for(health.name, health.pci_device_id)
        model = self.references.models.get(key) if key is not None else None
        tag = f"gpu{index}"
        at_rest = health
        if busy:
            # judged below by the rules for a GPU under load, not twice
            at_rest = replace(
                health, throttle_reasons=[], pcie_width_current=None, temperature_c=None
            )
        found = Findings(HEALTH, "HEALTH")
        failures, warnings = judge_health(at_rest, model, alone=count == 1, rules=self.rules)
        found.failures += failures
        found.warnings += warnings
        # the temperature under load and at rest are a state each across polls: a busy poll
        # neither raises nor clears the one at rest, an idle poll the one under load (an idle
        # GPU cools), as they leave the link under load
        keys = {when: f"{HEALTH}|{scope}|temperature-{when}" for when in ("under-load", "at-rest")}
        if busy:
            trace = LoadTrace(
                [sample],
                temperature_limit_c=health.temperature_limit_c,
                temperature_limit_kind=health.temperature_limit_kind,
            )
            now_verdict = judge_load(trace, model, tag, clocks=False, rules=self.rules)
            found.failures += now_verdict.failures
            found.warnings += now_verdict.warnings
        unjudged.add(keys["at-rest" if busy else "under-load"])
        hot_key = keys["under-load" if busy else "at-rest"]
        findings += [
            replace(f, key=hot_key) if getattr(f.text, "code", None) == str(TEMP_VIOLATION) else f
            for f in findings_of(found, scope, gpu=health.uuid or "")
        ]
        findings += self._link_under_load(health, sample, busy, model, tag, scope, unjudged)
        gen_max = _smallest(health.pcie_gen_max_gpu, health.pcie_gen_max_system)
        return GpuReading(
            index=index,
            uuid=health.uuid,
            name=health.name,
            temperature_c=sample.temperature_c,
            power_w=sample.power_w,
            sm_clock_mhz=sample.sm_clock_mhz,
            reasons_mask=mask,
            busy=busy,
            pcie_gen=health.pcie_gen_current,
            pcie_gen_max=gen_max,
            pcie_width=health.pcie_width_current,
            pcie_width_max=health.pcie_width_max,
        )

    def _link_under_load(
        self,
        health: GpuHealth,
        sample: LoadSample,
        busy: bool | None,
        model: Any,
        tag: str,
        scope: str,
        unjudged: set[str],
    ) -> list[Finding]:
        """The PCIe link of the last `window` busy polls against the model's (accept's rule for
        a link under transfer load); idle polls leave the window and its finding as they are."""
        window = self._busy.setdefault(scope, deque(maxlen=self.window))
        # one key per aspect of the link (its numbers change between polls): with one key for
        # both, a link down in generation and in width kept only one of the two findings
        link_keys = {
            aspect: f"{HEALTH}|{scope}|pcie-under-load|{aspect}"
            for aspect in ("generation", "width")
        }
        if not busy:
            unjudged.update(link_keys.values())
            return []
        window.append(replace(sample, reasons=()))
        if len(window) < self.window:
            unjudged.update(link_keys.values())
            return []
        trace = LoadTrace(
            samples=list(window),
            pcie_gen_slot=health.pcie_gen_max_system,
            pcie_width_slot=health.pcie_width_max,
        )
        verdict = judge_load(trace, model, tag, clocks=False, pcie_loaded=True)
        found = Findings(HEALTH, "HEALTH", failures=verdict.failures, warnings=verdict.warnings)

        def keyed(finding: Finding) -> Finding:
            if not finding.fails:
                return finding
            # checks.load_judging._judge_pcie says a width as "PCIe x8", a generation "PCIe Gen3"
            aspect = "width" if "PCIe x" in str(finding.text) else "generation"
            return replace(finding, key=link_keys[aspect])

        return [keyed(f) for f in findings_of(found, scope, held=True, gpu=health.uuid or "")]

    def _judge_between_polls(self, now: float) -> None:
        """NVML's events since the last poll and the counters' growth since then, as events."""
        events = Findings(EVENTS, "HEALTH")
        if self._watcher is not None:
            judge_events(self._watcher.drain(), events, self.rules)
        snapshot = CounterSnapshot(now, tuple(self._read_now), tuple(self._unread))
        if self._counters is not None:
            judge_growth(self._counters, snapshot, events, self.rules)
        self._counters = snapshot
        self._note_events(findings_of(events, NVML, lasting=False), now)

    def _judge_ports(self, now: float, unjudged: set[str], notes: list[str]) -> list[Finding]:
        """The ports' error counters against the last good reading of each: growth, a reset and
        a port's going are events (a port that goes and comes back between two polls leaves
        `link_downed` grown: the flap is still seen; one that vanishes every other poll is
        raised at each going); a port away, a counter unread or at its top, are states that
        hold while they do. The reader's own trouble is never a failure: a poll that cannot
        read the ports keeps the last reading as the baseline, a counter unreadable at one poll
        keeps its last value, and a port whose directory is still there but cannot be listed (a
        loop, a refusal) is unread, not gone; each makes `ports_readable` false."""
        try:
            read = read_port_counters()
        except Exception as error:  # a tree the sysfs reader gave up on: no reading, no verdict
            unjudged.add(PORTS)
            notes.append(f"InfiniBand/RoCE counters not read: {type(error).__name__}: {error}")
            self.ports_readable = False
            return []
        gone: list[str] = []
        unlisted: list[str] = []
        for port, before in (self._ports or {}).items():
            if port in read:
                continue
            if _port_is_gone(port):
                gone.append(port)
            else:  # there, but not listed: every counter unread this poll
                read[port] = dict.fromkeys(before)
                unlisted.append(port)
        partly = [
            port
            for port, values in read.items()
            if any(v is None for v in values.values())
            and any(v is not None for v in values.values())
        ]
        self.ports_readable = not unlisted and not partly
        if not self.ports_readable:
            unread = sorted({*unlisted, *partly})
            notes.append(f"InfiniBand/RoCE counters not all read: {shown_ports(unread)}")
        found = Findings(FABRIC, "FABRIC")
        if self._ports is not None:
            # a port gone since the last poll is judged (accept's rule for a port gone in a run:
            # an event); one gone before it is the state below
            still = {p: v for p, v in self._ports.items() if p not in gone or p in self._present}
            judge_counter_growth(still, read, found, span="polls")
        self._present = set(read)
        states = Findings(FABRIC, "FABRIC")
        states.warnings = [w for w in found.warnings if says_what_a_reading_cannot(w)]
        found.warnings = [w for w in found.warnings if not says_what_a_reading_cannot(w)]
        self._note_events(findings_of(found, PORTS, lasting=False), now)
        # the baseline: each counter's last value read, a gone port's until it comes back
        kept = dict(self._ports or {})
        for port, values in read.items():
            last = kept.get(port, {})
            kept[port] = {name: last.get(name) if v is None else v for name, v in values.items()}
        self._ports = kept
        states.failures += [
            Cause(f"{port} was read at an earlier poll and is gone now", "cause", "port-down")
            for port in gone
        ]
        return findings_of(states, PORTS)

    def _note_events(self, findings: list[Finding], now: float) -> None:
        for finding in findings:
            self._events[finding.key] = (replace(finding, seen=now), now)

    def _held_events(self, now: float) -> list[Finding]:
        for key, (_, seen) in list(self._events.items()):
            if now - seen > EVENT_HOLD_SECONDS:
                del self._events[key]
        return [finding for finding, _ in self._events.values()]

    # -- the kernel log ----------------------------------------------------------------------

    def _with_remembered(self, scan: KernelLogScan, now: float) -> KernelLogScan:
        """The scan with the dated XID and SXid lines an earlier poll read and this one no longer
        finds, while aznhc's window still holds them: a kern.log rotated away, a ring buffer a
        chatty driver overwrote or `dmesg -c` must not clear an XID NVIDIA says to act on (it
        did: the node read fit again). Each is kept until its own time leaves the window, when the
        scan would have aged it too; undated lines cannot age and are not remembered."""
        lines: list[KernelXid | KernelSxid] = [*scan.xids, *scan.sxids]
        for line in lines:
            if line.at is not None:
                self._kernel_lines[(line.line, line.seconds_since_boot)] = line
        for key, line in list(self._kernel_lines.items()):
            if line.at is None or now - line.at > KERNEL_LOG_WINDOW_SECONDS:
                del self._kernel_lines[key]
        while len(self._kernel_lines) > KERNEL_LINES_KEPT:  # an XID storm: the newest are kept
            del self._kernel_lines[next(iter(self._kernel_lines))]
        read = {(line.line, line.seconds_since_boot) for line in lines}
        lost = [line for key, line in self._kernel_lines.items() if key not in read]
        if not lost:
            return scan
        return replace(
            scan,
            xids=(*scan.xids, *(x for x in lost if isinstance(x, KernelXid))),
            sxids=(*scan.sxids, *(x for x in lost if isinstance(x, KernelSxid))),
        )

    def _kernel_findings(self, scan: KernelLogScan, now: float) -> list[Finding]:
        events = Findings(EVENTS, "HEALTH")
        judge_kernel_log(scan, events, self.rules, now)
        fabric = Findings(FABRIC, "FABRIC")
        judge_link_flaps(scan, fabric, now)
        return findings_of(events, KERNEL) + findings_of(fabric, KERNEL)


def _port_is_gone(port: str) -> bool:
    """Whether a port ('mlx5_0:1') is absent from sysfs, as against there but unreadable: only
    "no such file" at its directory or a directory above it is absence."""
    device, _, number = port.rpartition(":")
    where = sysfs_root() / "sys" / "class" / "infiniband" / device / "ports" / number
    try:
        os.lstat(where)
    except FileNotFoundError:
        return True
    except OSError:  # a loop, a refusal: the reader's trouble
        return False
    return False


def _smallest(*values: int | None) -> int | None:
    known = [value for value in values if value is not None]
    return min(known) if known else None


def _unique(findings: list[Finding]) -> list[Finding]:
    """One finding per key (the first: a failure before a warning of the same key)."""
    seen: dict[str, Finding] = {}
    for finding in findings:
        if finding.key not in seen or (finding.fails and not seen[finding.key].fails):
            seen[finding.key] = finding
    return list(seen.values())
