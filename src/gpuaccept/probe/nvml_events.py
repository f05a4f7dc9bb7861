"""NVML events (XIDs, ECC, power source, MIG changes) watched on a thread for a whole run.

Each suite worker watches its own GPU from start to end, so an XID raised while any check runs
is caught with the name of the check that was running. Performance-state and clock events are
left out: they fire constantly on a healthy GPU and mean nothing alone.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from gpuaccept.probe.xid import FAILING_RECOVERY_ACTIONS, describe_xid, is_critical

_WAIT_MILLISECONDS = 200

# (pynvml constant, kind) in the order a kind is reported when several bits are set
_EVENT_KINDS = (
    ("nvmlEventTypeXidCriticalError", "xid"),
    ("nvmlEventTypeDoubleBitEccError", "ecc_double_bit"),
    ("nvmlEventTypeSingleBitEccError", "ecc_single_bit"),
    ("nvmlEventTypeSingleBitEccErrorStorm", "ecc_single_bit_storm"),
    ("nvmlEventTypeDramRetirementEvent", "dram_retirement"),
    ("nvmlEventTypeDramRetirementFailure", "dram_retirement_failure"),
    ("nvmlEventTypeFatalPoisonError", "fatal_poison"),
    ("nvmlEventTypeNonFatalPoisonError", "non_fatal_poison"),
    ("nvmlEventTypeGpuUnavailableError", "gpu_unavailable"),
    ("nvmlEventTypeGpuRecoveryAction", "recovery_action"),
    ("nvmlEventTypePowerSourceChange", "power_source_change"),
    ("nvmlEventMigConfigChange", "mig_config_change"),
)
# Kinds that fail the node on their own; an XID fails only when it is a critical one.
FAILING_KINDS = frozenset(
    {"ecc_double_bit", "dram_retirement_failure", "fatal_poison", "gpu_unavailable"}
)


@dataclass(frozen=True)
class GpuEvent:
    """One NVML event, with the GPU it came from and the check that was running."""

    kind: str
    gpu_uuid: str | None
    at: str  # ISO 8601 UTC
    xid: int | None = None
    during: str | None = None  # the check running in the watching worker, if any
    action: str | None = None  # a recovery_action event's action, read when it arrived

    @property
    def fails_node(self) -> bool:
        if self.kind == "xid":
            return self.xid is not None and is_critical(self.xid)
        if self.kind == "recovery_action":
            return self.action in FAILING_RECOVERY_ACTIONS
        return self.kind in FAILING_KINDS

    def describe(self) -> str:
        what = f"XID {self.xid}: {describe_xid(self.xid)}" if self.xid is not None else self.kind
        if self.kind == "recovery_action":
            what = f"recovery action: {self.action or 'unknown (the field could not be read)'}"
        where = f" during {self.during}" if self.during else ""
        return f"{self.gpu_uuid or 'unknown GPU'}: {what}{where} at {self.at}"


def _uuid(nvml: Any, handle: Any) -> str | None:
    try:
        raw = nvml.nvmlDeviceGetUUID(handle)
    except Exception:
        return None
    return raw.decode() if isinstance(raw, bytes) else str(raw)


def _kind(nvml: Any, event_type: int) -> str:
    for constant, kind in _EVENT_KINDS:
        bit = int(getattr(nvml, constant, 0))
        if bit and event_type & bit:
            return kind
    return f"event 0x{event_type:x}"


class EventWatcher:
    """Registers for NVML events on the given GPUs (all when `uuids` is None) and records them.

    Everything, NVML's initialisation included, happens on the watcher's own thread: a driver
    that hangs in NVML must not hang the worker that hosts the watcher. `during` names the check
    that is running; the worker sets it before each job.
    """

    def __init__(self, load_nvml: Callable[[], Any], uuids: list[str] | None = None) -> None:
        self._load_nvml = load_nvml
        self._uuids = uuids
        self._events: list[GpuEvent] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.during: str | None = None
        self.watching: list[str] = []
        self.problem: str | None = None  # why some GPU (or NVML itself) could not be watched

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="nvml-events", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        nvml = self._load_nvml()
        if nvml is None:
            self.problem = "NVML unavailable"
            return
        self._nvml = nvml
        try:
            event_set = self._register(nvml)
        except Exception as error:
            self.problem = f"could not register for events: {error}"
            return
        self._loop(event_set)

    def _register(self, nvml: Any) -> Any:
        wanted = 0
        for constant, _ in _EVENT_KINDS:
            wanted |= int(getattr(nvml, constant, 0))
        if self._uuids is None:
            handles = [nvml.nvmlDeviceGetHandleByIndex(i) for i in range(nvml.nvmlDeviceGetCount())]
        else:
            from gpuaccept.probe.nvml_health import find_gpu

            # a MIG instance's events (XIDs included) are its parent GPU's
            handles = [find_gpu(nvml, -1, uuid)[0] for uuid in self._uuids]
        event_set = nvml.nvmlEventSetCreate()
        problems = []
        for handle in handles:
            uuid = _uuid(nvml, handle)
            try:
                supported = int(nvml.nvmlDeviceGetSupportedEventTypes(handle))
                nvml.nvmlDeviceRegisterEvents(handle, supported & wanted, event_set)
            except Exception as error:  # e.g. NVML_ERROR_NOT_SUPPORTED on some boards
                problems.append(f"{uuid}: {error}")
                continue
            self.watching.append(uuid or "unknown GPU")
        self.problem = "; ".join(problems) or None
        return event_set

    def _loop(self, event_set: Any) -> None:
        nvml = self._nvml
        timeout_code = getattr(nvml, "NVML_ERROR_TIMEOUT", 10)
        try:
            while not self._stop.is_set():
                try:
                    data = nvml.nvmlEventSetWait_v2(event_set, _WAIT_MILLISECONDS)
                except Exception as error:
                    if getattr(error, "value", None) == timeout_code:
                        continue
                    self.problem = f"event wait failed: {error}"
                    time.sleep(_WAIT_MILLISECONDS / 1000)
                    continue
                kind = _kind(nvml, int(data.eventType))
                action = None
                if kind == "recovery_action":
                    from gpuaccept.probe.nvml_health import read_recovery_action

                    action = read_recovery_action(nvml, data.device)
                event = GpuEvent(
                    kind=kind,
                    gpu_uuid=_uuid(nvml, data.device),
                    at=datetime.now(UTC).isoformat(timespec="milliseconds"),
                    xid=int(data.eventData) if kind == "xid" else None,
                    during=self.during,
                    action=action,
                )
                with self._lock:
                    self._events.append(event)
        finally:
            with contextlib.suppress(Exception):
                nvml.nvmlEventSetFree(event_set)

    def drain(self) -> list[GpuEvent]:
        """The events seen since the last drain."""
        with self._lock:
            events, self._events = self._events, []
        return events

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=2 * _WAIT_MILLISECONDS / 1000 + 1)
