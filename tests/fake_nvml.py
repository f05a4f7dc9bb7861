"""A scripted stand-in for pynvml: GPUs, counters, events and samples that tests decide.

gpuaccept loads it instead of pynvml when GPUACCEPT_NVML_MODULE=tests.fake_nvml, in the test
process and in the suite's worker processes alike. The scenario comes from the JSON file named by
FAKE_NVML_SCENARIO (so spawned workers see it too), or from `use(scenario)` in-process.

A scenario is a dict:
  init: "ok" | "hang" | "fail"
  driver: "580.95.05", cuda_driver: 13000
  gpus: [ {uuid, name, pci_device_id, ...per-GPU facts below...} ]
  events: [ {after_seconds, gpu, type, data, after_file} ], type one of xid, dbe, sbe,
          retirement_failure, fatal_poison, unavailable, recovery_action
          (after_seconds from nvmlInit; with after_file, not before that file exists either)

Per-GPU facts (all optional; a missing one raises NVML_ERROR_NOT_SUPPORTED like a real board):
  lost: true                         every query of this GPU raises NVML_ERROR_GPU_IS_LOST
  ecc: {"volatile": {"uncorrected": {"dram": 0, "sram": 0}, "corrected": {...}}, "aggregate": ..}
  remapped_rows: [corrected, uncorrected, pending, failure]
  retired_pages: {"sbe": 0, "dbe": 0, "pending": false}
  throttle: mask, or a list of masks returned call after call (the last one repeats)
  power_mw, power_limit_mw, temperature_c, sm_clock_mhz, sm_clock_max_mhz: value or list
  pcie: {gen, gen_max_gpu, gen_max_system, width, width_max}, each value or list
  pcie_replay: value or list
  nvlink: [ {"active": true, "version": 4, "crc": 0, "replay": 0, "recovery": 0}, ... ]
          ("state": 0-3 instead of "active" gives NVML_NVLINK_STATE_* as is; a counter null
          raises NVML_ERROR_NOT_SUPPORTED, as NVLink5 boards do)
  nvlink5_recoveries: [[successful, failed], ...] fields 213/214 over all links, one pair per
          read (the last repeats); missing: not supported
  recovery_action: 0-7 (NVML_FI_DEV_GET_GPU_RECOVERY_ACTION; missing: not supported)
  fabric: {"state": 3, "status": 0, "clique": 1, "health_mask": 0} ({"error": N}: NVML error N)
  mig: {"current": 1, "pending": 1, "instances": ["MIG-<uuid digits>", ...]}
  persistence: 1
  compute_mode: 0-3 (NVML_COMPUTEMODE_*)
Scenario-wide: field_value_type: 0-6 the NVML_VALUE_TYPE_* of every field value (default 1,
          unsigned int); the union's other bytes hold garbage
Scenario-wide: old_driver: true   the versioned calls (temperature, fabric) raise
          NVML_ERROR_FUNCTION_NOT_FOUND, as pynvml does on a driver that predates them
"""

from __future__ import annotations

import ctypes
import json
import os
import threading
import time
from typing import Any

# --- constants as pynvml names them -------------------------------------------------------------
NVML_SUCCESS = 0
NVML_ERROR_INVALID_ARGUMENT = 2
NVML_ERROR_NOT_SUPPORTED = 3
NVML_ERROR_NOT_FOUND = 6
NVML_ERROR_FUNCTION_NOT_FOUND = 13
NVML_ERROR_TIMEOUT = 10
NVML_ERROR_GPU_IS_LOST = 15
NVML_ERROR_UNKNOWN = 999
NVML_MEMORY_ERROR_TYPE_CORRECTED = 0
NVML_MEMORY_ERROR_TYPE_UNCORRECTED = 1
NVML_VOLATILE_ECC = 0
NVML_AGGREGATE_ECC = 1
NVML_MEMORY_LOCATION_DRAM = 2
NVML_MEMORY_LOCATION_DEVICE_MEMORY = 2
NVML_MEMORY_LOCATION_SRAM = 7
NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS = 0
NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR = 1
NVML_TEMPERATURE_GPU = 0
NVML_TEMPERATURE_THRESHOLD_SLOWDOWN = 1
NVML_TEMPERATURE_THRESHOLD_GPU_MAX = 3
NVML_CLOCK_SM = 1
NVML_NVLINK_MAX_LINKS = 18
NVML_NVLINK_ERROR_DL_REPLAY = 0
NVML_NVLINK_ERROR_DL_RECOVERY = 1
NVML_NVLINK_ERROR_DL_CRC_FLIT = 2
NVML_NVLINK_ERROR_DL_CRC_DATA = 3
NVML_FEATURE_ENABLED = 1
NVML_DEVICE_MIG_ENABLE = 1
NVML_GPU_FABRIC_STATE_NOT_SUPPORTED = 0
NVML_GPU_FABRIC_STATE_NOT_STARTED = 1
NVML_GPU_FABRIC_STATE_IN_PROGRESS = 2
NVML_GPU_FABRIC_STATE_COMPLETED = 3

nvmlEventTypeSingleBitEccError = 0x1
nvmlEventTypeDoubleBitEccError = 0x2
nvmlEventTypePState = 0x4
nvmlEventTypeXidCriticalError = 0x8
nvmlEventTypeClock = 0x10
nvmlEventTypePowerSourceChange = 0x80
nvmlEventMigConfigChange = 0x100

nvmlClocksThrottleReasonGpuIdle = 0x1
nvmlClocksThrottleReasonApplicationsClocksSetting = 0x2
nvmlClocksThrottleReasonSwPowerCap = 0x4
nvmlClocksThrottleReasonHwSlowdown = 0x8
nvmlClocksThrottleReasonSyncBoost = 0x10
nvmlClocksThrottleReasonSwThermalSlowdown = 0x20
nvmlClocksThrottleReasonHwThermalSlowdown = 0x40
nvmlClocksThrottleReasonHwPowerBrakeSlowdown = 0x80
nvmlClocksEventReasonGpuIdle = nvmlClocksThrottleReasonGpuIdle
nvmlClocksEventReasonSwPowerCap = nvmlClocksThrottleReasonSwPowerCap
nvmlClocksEventReasonHwSlowdown = nvmlClocksThrottleReasonHwSlowdown
nvmlClocksEventReasonSwThermalSlowdown = nvmlClocksThrottleReasonSwThermalSlowdown
nvmlClocksEventReasonHwThermalSlowdown = nvmlClocksThrottleReasonHwThermalSlowdown
nvmlClocksEventReasonHwPowerBrakeSlowdown = nvmlClocksThrottleReasonHwPowerBrakeSlowdown

nvmlEventTypeDramRetirementFailure = 0x800
nvmlEventTypeFatalPoisonError = 0x2000
nvmlEventTypeGpuUnavailableError = 0x4000
nvmlEventTypeGpuRecoveryAction = 0x8000

_EVENT_TYPES = {
    "xid": nvmlEventTypeXidCriticalError,
    "dbe": nvmlEventTypeDoubleBitEccError,
    "sbe": nvmlEventTypeSingleBitEccError,
    "retirement_failure": nvmlEventTypeDramRetirementFailure,
    "fatal_poison": nvmlEventTypeFatalPoisonError,
    "unavailable": nvmlEventTypeGpuUnavailableError,
    # the action itself is read from the field, as NVML gives it (gpu's recovery_action)
    "recovery_action": nvmlEventTypeGpuRecoveryAction,
}


class NVMLError(Exception):
    def __init__(self, value: int) -> None:
        self.value = value
        super().__init__(
            {
                NVML_ERROR_NOT_SUPPORTED: "Not Supported",
                NVML_ERROR_TIMEOUT: "Timeout",
                NVML_ERROR_GPU_IS_LOST: "GPU is lost",
                NVML_ERROR_NOT_FOUND: "Not Found",
            }.get(value, f"NVML error {value}")
        )


NVMLError_NotSupported = NVMLError
NVMLError_Timeout = NVMLError
NVMLError_GPUIsLost = NVMLError

_state: dict[str, Any] = {"scenario": None, "started": None, "calls": {}}
_lock = threading.Lock()


def use(scenario: dict[str, Any] | None) -> None:
    """Set the scenario for this process (tests that call gpuaccept code in-process)."""
    _state.update(scenario=scenario, started=None, calls={})


def _scenario() -> dict[str, Any]:
    if _state["scenario"] is None:
        path = os.environ.get("FAKE_NVML_SCENARIO")
        if not path:
            raise NVMLError(NVML_ERROR_UNKNOWN)
        with open(path, encoding="utf-8") as stream:
            _state["scenario"] = json.load(stream)
    scenario: dict[str, Any] = _state["scenario"]
    return scenario


class _Handle:
    def __init__(self, index: int) -> None:
        self.index = index

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Handle) and other.index == self.index

    def __hash__(self) -> int:
        return self.index


def _gpu(handle: _Handle) -> dict[str, Any]:
    gpu: dict[str, Any] = _scenario()["gpus"][handle.index]
    if gpu.get("lost"):
        raise NVMLError(NVML_ERROR_GPU_IS_LOST)
    return gpu


def _fact(handle: _Handle, key: str, *path: Any) -> Any:
    """A scripted fact; a list is a sequence of readings (one per call, the last repeats)."""
    value: Any = _gpu(handle).get(key)
    for part in path:
        if value is None:
            break
        value = value.get(part) if isinstance(value, dict) else value[part]
    if value is None:
        raise NVMLError(NVML_ERROR_NOT_SUPPORTED)
    if isinstance(value, list) and key not in ("remapped_rows", "nvlink"):
        with _lock:
            call = (handle.index, key, path)
            count = _state["calls"].get(call, 0)
            _state["calls"][call] = count + 1
        return value[min(count, len(value) - 1)]
    return value


# --- the pynvml functions gpuaccept calls ---------------------------------------------------
def nvmlInit() -> None:
    scenario = _scenario()
    if scenario.get("init") == "hang":
        time.sleep(3600)
    if scenario.get("init") == "fail":
        raise NVMLError(NVML_ERROR_UNKNOWN)
    if _state["started"] is None:
        _state["started"] = time.monotonic()


def nvmlShutdown() -> None:
    pass


def nvmlSystemGetDriverVersion() -> str:
    return str(_scenario().get("driver", "580.95.05"))


def nvmlSystemGetCudaDriverVersion() -> int:
    return int(_scenario().get("cuda_driver", 13000))


def nvmlDeviceGetCount() -> int:
    return len(_scenario()["gpus"])


def nvmlDeviceGetHandleByIndex(index: int) -> _Handle:
    if not 0 <= index < nvmlDeviceGetCount():
        raise NVMLError(NVML_ERROR_UNKNOWN)
    handle = _Handle(index)
    _gpu(handle)
    return handle


class _MigHandle:
    def __init__(self, parent: int, uuid: str) -> None:
        self.parent = parent
        self.uuid = uuid


def nvmlDeviceGetHandleByUUID(uuid: str | bytes) -> _Handle | _MigHandle:
    wanted = uuid.decode() if isinstance(uuid, bytes) else uuid
    for index, gpu in enumerate(_scenario()["gpus"]):
        if gpu["uuid"] == wanted:
            return nvmlDeviceGetHandleByIndex(index)
        if wanted in (gpu.get("mig") or {}).get("instances", []):
            return _MigHandle(index, wanted)
    raise NVMLError(NVML_ERROR_NOT_FOUND)


def nvmlDeviceGetDeviceHandleFromMigDeviceHandle(mig: _MigHandle) -> _Handle:
    return nvmlDeviceGetHandleByIndex(mig.parent)


def nvmlDeviceGetUUID(handle: _Handle) -> str:
    """A board whose scenario gives no UUID answers NOT_SUPPORTED."""
    return str(_fact(handle, "uuid"))


def nvmlDeviceGetSerial(handle: _Handle) -> str:
    """The board's serial; a scenario without one plays a board that does not report it."""
    serial = _gpu(handle).get("serial")
    if serial is None:
        raise NVMLError(NVML_ERROR_NOT_SUPPORTED)
    return str(serial)


def nvmlDeviceGetBoardPartNumber(handle: _Handle) -> str:
    part = _gpu(handle).get("board_part_number")
    if part is None:
        raise NVMLError(NVML_ERROR_NOT_SUPPORTED)
    return str(part)


def nvmlDeviceGetName(handle: _Handle) -> str:
    return str(_gpu(handle).get("name", "NVIDIA H100 80GB HBM3"))


class _PciInfo:
    def __init__(self, gpu: dict[str, Any], index: int) -> None:
        self.pciDeviceId = int(gpu.get("pci_device_id", 0x233010DE))
        self.pciSubSystemId = int(gpu.get("pci_subsystem_id", 0))
        self.busId = gpu.get("pci_bus_id", f"00000000:{0x18 + index:02X}:00.0")


def nvmlDeviceGetPciInfo(handle: _Handle) -> _PciInfo:
    return _PciInfo(_gpu(handle), handle.index)


def nvmlDeviceGetPersistenceMode(handle: _Handle) -> int:
    return int(_fact(handle, "persistence"))


def nvmlDeviceGetComputeMode(handle: _Handle) -> int:
    return int(_fact(handle, "compute_mode"))


def _enum(value: Any, names: dict[int, str]) -> str:
    """An NVML enum argument: one NVML's enum does not define is refused here
    (NVML_ERROR_INVALID_ARGUMENT), never read as the nearest one, so a reader passing the wrong
    argument reads nothing instead of another counter's value."""
    if isinstance(value, bool) or not isinstance(value, int) or value not in names:
        raise NVMLError(NVML_ERROR_INVALID_ARGUMENT)
    return names[value]


_ERROR_TYPES = {
    NVML_MEMORY_ERROR_TYPE_CORRECTED: "corrected",
    NVML_MEMORY_ERROR_TYPE_UNCORRECTED: "uncorrected",
}
_ECC_COUNTERS = {NVML_VOLATILE_ECC: "volatile", NVML_AGGREGATE_ECC: "aggregate"}
_LOCATIONS = {NVML_MEMORY_LOCATION_DRAM: "dram", NVML_MEMORY_LOCATION_SRAM: "sram"}


def nvmlDeviceGetTotalEccErrors(handle: _Handle, error_type: int, counter: int) -> int:
    kind = _enum(error_type, _ERROR_TYPES)
    scope = _enum(counter, _ECC_COUNTERS)
    by_location = _fact(handle, "ecc", scope, kind)
    return int(sum(by_location.values()))


def nvmlDeviceGetMemoryErrorCounter(
    handle: _Handle, error_type: int, counter: int, location: int
) -> int:
    kind = _enum(error_type, _ERROR_TYPES)
    scope = _enum(counter, _ECC_COUNTERS)
    where = _enum(location, _LOCATIONS)
    return int(_fact(handle, "ecc", scope, kind, where))


def nvmlDeviceGetRemappedRows(handle: _Handle) -> tuple[int, int, int, int]:
    rows = _fact(handle, "remapped_rows")
    return tuple(int(v) for v in rows)  # type: ignore[return-value]


def nvmlDeviceGetRetiredPages(handle: _Handle, cause: int) -> list[int]:
    key = _enum(
        cause,
        {
            NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS: "sbe",
            NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR: "dbe",
        },
    )
    return list(range(int(_fact(handle, "retired_pages", key))))


def nvmlDeviceGetRetiredPagesPendingStatus(handle: _Handle) -> int:
    return int(bool(_fact(handle, "retired_pages", "pending")))


def nvmlDeviceGetCurrentClocksThrottleReasons(handle: _Handle) -> int:
    return int(_fact(handle, "throttle"))


nvmlDeviceGetCurrentClocksEventReasons = nvmlDeviceGetCurrentClocksThrottleReasons


def nvmlDeviceGetPowerUsage(handle: _Handle) -> int:
    return int(_fact(handle, "power_mw"))


def nvmlDeviceGetEnforcedPowerLimit(handle: _Handle) -> int:
    return int(_fact(handle, "power_limit_mw"))


def _old_driver() -> bool:
    """A driver older than the versioned calls: the binding has them, the driver's library not
    (pynvml raises NVML_ERROR_FUNCTION_NOT_FOUND when one is made)."""
    return bool(_scenario().get("old_driver"))


def nvmlDeviceGetTemperature(handle: _Handle, sensor: int) -> int:
    # deprecated in NVML (goes in CUDA 14): gpuaccept must read the versioned call below, and
    # this one only where the driver has no other
    if not _old_driver():
        raise NVMLError(NVML_ERROR_UNKNOWN)
    return int(_fact(handle, "temperature_c"))


def nvmlDeviceGetTemperatureV(handle: _Handle, sensor: int) -> int:
    """The versioned call gpuaccept reads (the deprecated one above fails here)."""
    if _old_driver():
        raise NVMLError(NVML_ERROR_FUNCTION_NOT_FOUND)
    return int(_fact(handle, "temperature_c"))


def nvmlDeviceGetTemperatureThreshold(handle: _Handle, threshold: int) -> int:
    """A scenario's `temperature_thresholds` by name ("gpu_max", "slowdown"); one it leaves out
    is NOT_SUPPORTED, as on a board that reports no such threshold."""
    name = {
        NVML_TEMPERATURE_THRESHOLD_GPU_MAX: "gpu_max",
        NVML_TEMPERATURE_THRESHOLD_SLOWDOWN: "slowdown",
    }
    if threshold not in name:
        raise NVMLError(NVML_ERROR_INVALID_ARGUMENT)
    return int(_fact(handle, "temperature_thresholds", name[threshold]))


def nvmlDeviceGetClockInfo(handle: _Handle, clock: int) -> int:
    return int(_fact(handle, "sm_clock_mhz"))


def nvmlDeviceGetMaxClockInfo(handle: _Handle, clock: int) -> int:
    return int(_fact(handle, "sm_clock_max_mhz"))


def nvmlDeviceGetCurrPcieLinkGeneration(handle: _Handle) -> int:
    return int(_fact(handle, "pcie", "gen"))


def nvmlDeviceGetGpuMaxPcieLinkGeneration(handle: _Handle) -> int:
    return int(_fact(handle, "pcie", "gen_max_gpu"))


def nvmlDeviceGetMaxPcieLinkGeneration(handle: _Handle) -> int:
    return int(_fact(handle, "pcie", "gen_max_system"))


def nvmlDeviceGetCurrPcieLinkWidth(handle: _Handle) -> int:
    return int(_fact(handle, "pcie", "width"))


def nvmlDeviceGetMaxPcieLinkWidth(handle: _Handle) -> int:
    return int(_fact(handle, "pcie", "width_max"))


def nvmlDeviceGetPcieReplayCounter(handle: _Handle) -> int:
    return int(_fact(handle, "pcie_replay"))


def _link(handle: _Handle, link: int) -> dict[str, Any]:
    links = _fact(handle, "nvlink")
    if link >= len(links):
        raise NVMLError(NVML_ERROR_NOT_SUPPORTED)
    entry: dict[str, Any] = links[link]
    return entry


def _reading(entry: dict[str, Any], key: str, handle: _Handle, link: int) -> int:
    value = entry.get(key, 0)
    if value is None:  # an NVLink5 board: the DL error counters are not read there
        raise NVMLError(NVML_ERROR_NOT_SUPPORTED)
    if isinstance(value, list):
        with _lock:
            call = (handle.index, "nvlink", link, key)
            count = _state["calls"].get(call, 0)
            _state["calls"][call] = count + 1
        value = value[min(count, len(value) - 1)]
    return int(value)


def nvmlDeviceGetNvLinkState(handle: _Handle, link: int) -> int:
    entry = _link(handle, link)
    if "state" in entry:  # NVML_NVLINK_STATE_*: 0 inactive, 1 active, 2 sleep, 3 no traffic
        return int(entry["state"])
    return int(bool(entry.get("active", True)))


def nvmlDeviceGetNvLinkVersion(handle: _Handle, link: int) -> int:
    return int(_link(handle, link).get("version", 4))


def nvmlDeviceGetNvLinkErrorCounter(handle: _Handle, link: int, counter: int) -> int:
    key = {
        NVML_NVLINK_ERROR_DL_REPLAY: "replay",
        NVML_NVLINK_ERROR_DL_RECOVERY: "recovery",
        NVML_NVLINK_ERROR_DL_CRC_FLIT: "crc",
        NVML_NVLINK_ERROR_DL_CRC_DATA: "crc_data",
    }[counter]
    return _reading(_link(handle, link), key, handle, link)


class c_nvmlGpuFabricInfo_t:
    def __init__(self) -> None:
        self.state = NVML_GPU_FABRIC_STATE_NOT_SUPPORTED
        self.status = 0
        self.cliqueId = 0
        self.clusterUuid = b"\x00" * 16


def byref(value: Any) -> Any:
    """pynvml re-exports ctypes.byref; here the 'pointer' is the object itself."""
    return value


def nvmlDeviceGetGpuFabricInfo(handle: _Handle, info: c_nvmlGpuFabricInfo_t) -> int:
    fabric = _fact(handle, "fabric")
    if "error" in fabric:
        raise NVMLError(int(fabric["error"]))
    info.state = int(fabric.get("state", NVML_GPU_FABRIC_STATE_COMPLETED))
    info.status = int(fabric.get("status", 0))
    info.cliqueId = int(fabric.get("clique", 0))
    return NVML_SUCCESS


class c_nvmlGpuFabricInfo_v2_t(c_nvmlGpuFabricInfo_t):
    def __init__(self) -> None:
        super().__init__()
        self.version = 0x02000024
        self.healthMask = 0


def nvmlDeviceGetGpuFabricInfoV(handle: _Handle, info: c_nvmlGpuFabricInfo_v2_t) -> int:
    """The versioned call; fabric "health_mask" is nvmlGpuFabricInfo_v2's healthMask."""
    if _old_driver():
        raise NVMLError(NVML_ERROR_FUNCTION_NOT_FOUND)
    nvmlDeviceGetGpuFabricInfo(handle, info)
    info.healthMask = int(_fact(handle, "fabric").get("health_mask", 0))
    return NVML_SUCCESS


def nvmlDeviceGetMigMode(handle: _Handle) -> tuple[int, int]:
    mig = _fact(handle, "mig")
    return int(mig["current"]), int(mig["pending"])


class _Value(ctypes.Union):
    """pynvml's c_nvmlValue_t (pynvml.py:1514-1523, nvidia-ml-py 13.615.71): one value, read
    through the member its valueType names (NVML_VALUE_TYPE_*, pynvml.py:289-295)."""

    _fields_ = [
        ("dVal", ctypes.c_double),
        ("uiVal", ctypes.c_uint),
        ("ulVal", ctypes.c_ulong),
        ("ullVal", ctypes.c_ulonglong),
        ("sllVal", ctypes.c_longlong),
        ("siVal", ctypes.c_int),
        ("usVal", ctypes.c_ushort),
    ]


_MEMBERS = {0: "dVal", 1: "uiVal", 2: "ulVal", 3: "ullVal", 4: "sllVal", 5: "siVal", 6: "usVal"}


class _FieldValue:
    """c_nvmlFieldValue_t as NVML fills it: the return code, the value type and the union. The
    union's bytes the type does not cover hold garbage here, so a reader that reads another
    member than the type names reads nonsense, never the value by chance."""

    def __init__(self, field_id: int, value: int | None, value_type: int = 1) -> None:
        self.fieldId = field_id
        self.nvmlReturn = NVML_SUCCESS if value is not None else NVML_ERROR_NOT_SUPPORTED
        self.valueType = value_type
        self.value = _Value()
        self.value.ullVal = 0xA5A5A5A5A5A5A5A5
        member = _MEMBERS[value_type]
        setattr(self.value, member, float(value or 0) if member == "dVal" else (value or 0))


NVML_FI_DEV_GET_GPU_RECOVERY_ACTION = 230


NVML_FI_DEV_NVLINK_COUNT_LINK_RECOVERY_SUCCESSFUL_EVENTS = 213
NVML_FI_DEV_NVLINK_COUNT_LINK_RECOVERY_FAILED_EVENTS = 214
_ALL_LINKS = 0xFFFFFFFF


def nvmlDeviceGetFieldValues(
    handle: _Handle, field_ids: list[int | tuple[int, int]]
) -> list[_FieldValue]:
    """pynvml's form: a field id, or (field id, scope id); NVLink5's recovery counts are given
    for the scope of all links only, as DCGM reads them."""
    gpu = _gpu(handle)
    recoveries = gpu.get("nvlink5_recoveries")
    values = []
    for entry in field_ids:
        field, scope = entry if isinstance(entry, tuple) else (entry, 0)
        value = gpu.get("recovery_action") if field == NVML_FI_DEV_GET_GPU_RECOVERY_ACTION else None
        if recoveries is not None and scope == _ALL_LINKS and field in (213, 214):
            with _lock:
                call = (handle.index, "field", field)
                count = _state["calls"].get(call, 0)
                _state["calls"][call] = count + 1
            pair = recoveries[min(count, len(recoveries) - 1)]
            value = int(pair[field - 213])
        values.append(_FieldValue(field, value, int(_scenario().get("field_value_type", 1))))
    return values


# --- events ---------------------------------------------------------------------------------
class _EventSet:
    def __init__(self) -> None:
        self.handles: list[_Handle] = []
        self.delivered: set[int] = set()


class _EventData:
    def __init__(self, handle: _Handle, event_type: int, data: int) -> None:
        self.device = handle
        self.eventType = event_type
        self.eventData = data
        self.gpuInstanceId = 0xFFFFFFFF
        self.computeInstanceId = 0xFFFFFFFF


def nvmlEventSetCreate() -> _EventSet:
    return _EventSet()


def nvmlDeviceGetSupportedEventTypes(handle: _Handle) -> int:
    _gpu(handle)
    supported = nvmlEventTypeSingleBitEccError | nvmlEventTypePState | nvmlEventTypeClock
    for bit in _EVENT_TYPES.values():
        supported |= bit
    return supported


def nvmlDeviceRegisterEvents(handle: _Handle, types: int, event_set: _EventSet) -> None:
    event_set.handles.append(handle)


def nvmlEventSetWait_v2(event_set: _EventSet, timeout_ms: int) -> _EventData:
    deadline = time.monotonic() + timeout_ms / 1000
    while True:
        elapsed = time.monotonic() - (_state["started"] or time.monotonic())
        for number, event in enumerate(_scenario().get("events", [])):
            handle = _Handle(int(event.get("gpu", 0)))
            due = elapsed >= float(event.get("after_seconds", 0))
            if "after_file" in event:
                due = due and os.path.exists(event["after_file"])
            if due and number not in event_set.delivered and handle in event_set.handles:
                event_set.delivered.add(number)
                return _EventData(handle, _EVENT_TYPES[event["type"]], int(event.get("data", 0)))
        if time.monotonic() >= deadline:
            raise NVMLError(NVML_ERROR_TIMEOUT)
        time.sleep(0.02)


nvmlEventSetWait = nvmlEventSetWait_v2


def nvmlEventSetFree(event_set: _EventSet) -> None:
    pass
