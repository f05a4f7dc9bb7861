"""One GPU's health as NVML reports it, read without judging: ECC by location, row remapping,
page retirement, throttle reasons, the PCIe link and its replays, every NVLink with its error
counters, fabric registration and MIG mode. Also the growing counters alone (compared at the
start and end of a run) and how a GPU torch numbers is found in NVML.

Every fact a board does not report is None (or an empty list): unknown is not healthy.
"""

from __future__ import annotations

import ctypes
import functools
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from gpuaccept.probe.hardware import load_nvml

NVML_ERROR_GPU_IS_LOST = 15
T = TypeVar("T")


# nvmlDeviceGetNvLinkState: 0 inactive, 1 active, 2 sleep (low power), 3 active with traffic
# disabled (pynvml's NVML_NVLINK_STATE_*). Only 1 carries traffic.
_NVLINK_STATES = {0: "inactive", 1: "active", 2: "sleep", 3: "active, traffic disabled"}

# nvmlDeviceGpuRecoveryAction_t (field NVML_FI_DEV_GET_GPU_RECOVERY_ACTION = 230, what DCGM's
# DCGM_FI_DEV_GPU_RECOVERY_ACTION reads; the NVML form of XID 154).
RECOVERY_ACTIONS = {
    0: "none",
    1: "GPU reset",
    2: "node reboot",
    3: "drain P2P",
    4: "drain and reset",
    5: "recover IMEX domain",
    6: "bus reset",
    7: "system reboot",
}
_RECOVERY_ACTION_FIELD = 230

# NVLink5 (Blackwell on) deprecates the per-link DL error counters (CRC, replay, recovery): DCGM
# watches the GPU's link recovery events instead, successful ones warning and failed ones failing
# (modules/health/DcgmHealthWatch.cpp:1456-1467 and 3786-3795 at NVIDIA/DCGM 72fa3fe), read as
# NVML fields 213 and 214 (pynvml's NVML_FI_DEV_NVLINK_COUNT_LINK_RECOVERY_SUCCESSFUL_EVENTS and
# _FAILED_EVENTS; DCGM's dcgmlib/src/dcgm_fields.cpp:4986-5004) over all links at once, scope
# UINT_MAX (DcgmCacheManager.cpp:8691-8697, DcgmCMUtils.cpp:233-251).
NVLINK5_RECOVERY_FIELDS = (213, 214)
_ALL_LINKS = 0xFFFFFFFF


@dataclass(frozen=True)
class NvLink:
    link: int
    active: bool  # carrying traffic (state 1)
    version: int | None = None
    crc_errors: int | None = None  # flit and data CRC errors together
    replay_errors: int | None = None
    recovery_errors: int | None = None
    state: str = "active"  # _NVLINK_STATES, or "state N" for a value NVML adds later


@dataclass(frozen=True)
class Fabric:
    """The GPU's registration with the NVSwitch fabric manager (nvmlDeviceGetGpuFabricInfoV)."""

    state: str  # "not supported", "unreadable", "not started", "in progress", "completed"
    status: int | None = None  # NVML return code of a completed registration; 0 is success
    clique: int | None = None
    health: tuple[str, ...] = ()  # the health mask's conditions that hold (degraded bandwidth...)
    problem: str | None = None  # why it is unreadable


@dataclass(frozen=True)
class ErrorCounters:
    """Counters that only grow, read at the start and at the end of a run."""

    uuid: str
    index: int | None = None  # NVML's index
    pcie_replays: int | None = None
    pcie_gen_max: int | None = None  # the GPU's own maximum, for the replay-rate limit
    pcie_width_max: int | None = None
    ecc_corrected_volatile: int | None = None
    ecc_uncorrected_volatile: int | None = None
    # link number -> (crc, replay, recovery)
    nvlink: dict[int, tuple[int | None, int | None, int | None]] = field(default_factory=dict)
    # active links none of whose error counters NVML reads (NVLink5 deprecates them) ...
    nvlink_uncounted: tuple[int, ...] = ()
    # ... and, read only then, the GPU's link recovery events over all links: (successful, failed)
    nvlink_recoveries: tuple[int, int] | None = None


@dataclass(frozen=True)
class GpuHealth:
    """One GPU's NVML health facts; None where the GPU or driver does not report it."""

    index: int
    name: str
    uuid: str | None = None
    pci_device_id: int | None = None  # NVML's 32-bit id: device << 16 | vendor
    ecc_uncorrectable_volatile: int | None = None
    # "volatile_uncorrected_dram", "aggregate_corrected_sram", ...: what the board reports
    ecc: dict[str, int] = field(default_factory=dict)
    retired_pages_pending: bool | None = None
    retired_pages_sbe: int | None = None
    retired_pages_dbe: int | None = None
    remapped_rows_pending: bool | None = None
    remapped_rows_failed: bool | None = None
    remapped_rows_correctable: int | None = None
    remapped_rows_uncorrectable: int | None = None
    throttle_reasons: list[str] = field(default_factory=list)
    pcie_gen_current: int | None = None
    pcie_gen_max_gpu: int | None = None
    pcie_gen_max_system: int | None = None
    pcie_width_current: int | None = None
    pcie_width_max: int | None = None
    pcie_replays: int | None = None
    persistence_mode: bool | None = None
    nvlinks: list[NvLink] = field(default_factory=list)
    fabric: Fabric | None = None
    mig_enabled: bool | None = None
    mig_instance: str | None = None  # the MIG instance's UUID when torch's device is one
    recovery_action: str | None = None  # RECOVERY_ACTIONS; None where the driver lacks it
    temperature_c: float | None = None
    temperature_limit_c: float | None = None  # read_temperature_limit
    temperature_limit_kind: str | None = None


class GpuNotFound(Exception):
    """NVML cannot reach the GPU torch named; `lost` when NVML says it fell off the bus."""

    def __init__(self, message: str, lost: bool = False) -> None:
        super().__init__(message)
        self.lost = lost


def read_or_none(call: Any, *args: Any) -> Any:
    """An NVML reading, or None where the board does not report it (or the call fails)."""
    try:
        return call(*args)
    except Exception:
        return None


# pynvml defines every call of its own release whatever the driver; a call the driver's
# libnvidia-ml lacks raises NVML_ERROR_FUNCTION_NOT_FOUND when made (pynvml.py:1121-1136 at
# nvidia-ml-py 13.615.71). A versioned call newer than the driver falls back to the one it
# replaces, so an older driver is read, not taken for a board that reports nothing.
NVML_ERROR_FUNCTION_NOT_FOUND = 13


def newest_of(calls: Sequence[Callable[[], T]]) -> T:
    """The first of `calls`, newest first, that the driver has: one it lacks raises
    NVML_ERROR_FUNCTION_NOT_FOUND and the next is made; any other error is raised."""
    for call in calls[:-1]:
        try:
            return call()
        except Exception as error:
            if getattr(error, "value", None) != NVML_ERROR_FUNCTION_NOT_FOUND:
                raise
    return calls[-1]()


def call_newest(nvml: Any, newer: str, older: str, *args: Any) -> Any:
    """`newer(*args)`, or `older(*args)` where the binding or the driver has no `newer`."""
    named = (getattr(nvml, newer, None), getattr(nvml, older))
    return newest_of([functools.partial(call, *args) for call in named if call is not None])


def _text(raw: Any) -> str:
    return raw.decode() if isinstance(raw, bytes) else str(raw)


def _is_lost(error: BaseException) -> bool:
    return getattr(error, "value", None) == NVML_ERROR_GPU_IS_LOST


def find_gpu(nvml: Any, index: int, uuid: str | None) -> tuple[Any, str | None]:
    """(the NVML handle of the physical GPU, the MIG instance UUID when torch's device is one).

    torch prints every device UUID as GPU-...; NVML names a MIG instance MIG-... with the same
    digits, so a failed lookup is retried as a MIG instance before it is reported.
    """
    if uuid is None:
        try:
            return nvml.nvmlDeviceGetHandleByIndex(index), None
        except Exception as error:
            raise GpuNotFound(f"NVML cannot reach GPU {index}: {error}", _is_lost(error)) from None
    try:
        return nvml.nvmlDeviceGetHandleByUUID(uuid), None
    except Exception as error:
        first = error
    if uuid.startswith("GPU-"):
        mig_uuid = "MIG-" + uuid[4:]
        try:
            mig = nvml.nvmlDeviceGetHandleByUUID(mig_uuid)
            return nvml.nvmlDeviceGetDeviceHandleFromMigDeviceHandle(mig), mig_uuid
        except Exception:
            pass
    raise GpuNotFound(f"NVML cannot reach {uuid}: {first}", _is_lost(first))


# Reasons that mean the GPU is being held back by something wrong (heat, power, the board),
# as opposed to idling or an application clock setting. nvmlClocksEventReason* is the newer
# name of nvmlClocksThrottleReason*; the bits are the same.
BAD_THROTTLE_FLAGS = {
    "HwSlowdown": "hardware slowdown",
    "HwThermalSlowdown": "hardware thermal slowdown",
    "HwPowerBrakeSlowdown": "power brake (external)",
    "SwThermalSlowdown": "software thermal slowdown",
    "SwPowerCap": "software power cap",
}


def throttle_labels(nvml: Any, mask: int | None) -> list[str]:
    if mask is None:
        return []
    labels = []
    for flag, label in BAD_THROTTLE_FLAGS.items():
        bit: Any = getattr(nvml, f"nvmlClocksEventReason{flag}", None)
        if bit is None:
            bit = getattr(nvml, f"nvmlClocksThrottleReason{flag}", 0)
        if mask & int(bit):
            labels.append(label)
    return labels


def read_throttle_mask(nvml: Any, handle: Any) -> int | None:
    for name in (
        "nvmlDeviceGetCurrentClocksEventReasons",
        "nvmlDeviceGetCurrentClocksThrottleReasons",
    ):
        call = getattr(nvml, name, None)
        if call is not None:
            value = read_or_none(call, handle)
            if value is not None:
                return int(value)
    return None


def _ecc_by_location(nvml: Any, handle: Any) -> dict[str, int]:
    counts = {}
    for scope, counter in (("volatile", "NVML_VOLATILE_ECC"), ("aggregate", "NVML_AGGREGATE_ECC")):
        for kind, error_type in (
            ("corrected", "NVML_MEMORY_ERROR_TYPE_CORRECTED"),
            ("uncorrected", "NVML_MEMORY_ERROR_TYPE_UNCORRECTED"),
        ):
            for where, location in (
                ("dram", "NVML_MEMORY_LOCATION_DRAM"),
                ("sram", "NVML_MEMORY_LOCATION_SRAM"),
            ):
                value = read_or_none(
                    nvml.nvmlDeviceGetMemoryErrorCounter,
                    handle,
                    getattr(nvml, error_type),
                    getattr(nvml, counter),
                    getattr(nvml, location, -1),
                )
                if value is not None:
                    counts[f"{scope}_{kind}_{where}"] = int(value)
    return counts


def read_nvlinks(nvml: Any, handle: Any) -> list[NvLink]:
    """Every link NVML reports for the GPU (none on a board without NVLink)."""
    links = []
    for link in range(int(getattr(nvml, "NVML_NVLINK_MAX_LINKS", 18))):
        state = read_or_none(nvml.nvmlDeviceGetNvLinkState, handle, link)
        if state is None:
            continue

        def counter(name: str, link: int = link) -> int | None:
            value = read_or_none(
                nvml.nvmlDeviceGetNvLinkErrorCounter, handle, link, getattr(nvml, name)
            )
            return int(value) if value is not None else None

        flit, data = (
            counter("NVML_NVLINK_ERROR_DL_CRC_FLIT"),
            counter("NVML_NVLINK_ERROR_DL_CRC_DATA"),
        )
        crc = None if flit is None and data is None else (flit or 0) + (data or 0)
        links.append(
            NvLink(
                link=link,
                active=int(state) == 1,
                state=_NVLINK_STATES.get(int(state), f"state {int(state)}"),
                version=read_or_none(nvml.nvmlDeviceGetNvLinkVersion, handle, link),
                crc_errors=crc,
                replay_errors=counter("NVML_NVLINK_ERROR_DL_REPLAY"),
                recovery_errors=counter("NVML_NVLINK_ERROR_DL_RECOVERY"),
            )
        )
    return links


_FABRIC_STATES = {0: "not supported", 1: "not started", 2: "in progress", 3: "completed"}


# The fabric health mask (nvmlGpuFabricInfo_v2+ healthMask; pynvml's
# NVML_GPU_FABRIC_HEALTH_MASK_*): 2-bit fields where 1 means the condition holds.
_HEALTH_FLAGS = {0: "degraded bandwidth", 4: "route unhealthy"}
_NVML_ERROR_NOT_SUPPORTED = 3


def read_fabric(nvml: Any, handle: Any) -> Fabric | None:
    """The GPU's fabric registration through the versioned call (the unversioned
    nvmlDeviceGetGpuFabricInfo is deprecated and goes in CUDA 14), with its health mask; the
    old call where the binding or the driver has no other. "not supported" only when NVML says
    so: any other failure is "unreadable", never a clean bill of health."""
    byref = getattr(nvml, "byref", ctypes.byref)

    def filled(make: Callable[[], Any], call: Callable[..., Any]) -> Callable[[], Any]:
        def read() -> Any:
            info = make()
            call(handle, byref(info))
            return info

        return read

    calls = []
    versioned = getattr(nvml, "c_nvmlGpuFabricInfo_v2_t", None)
    if versioned is not None and hasattr(nvml, "nvmlDeviceGetGpuFabricInfoV"):
        calls.append(filled(versioned, nvml.nvmlDeviceGetGpuFabricInfoV))
    if hasattr(nvml, "c_nvmlGpuFabricInfo_t") and hasattr(nvml, "nvmlDeviceGetGpuFabricInfo"):
        calls.append(filled(nvml.c_nvmlGpuFabricInfo_t, nvml.nvmlDeviceGetGpuFabricInfo))
    if not calls:
        return None
    try:
        info = newest_of(calls)
    except Exception as error:
        if getattr(error, "value", None) == _NVML_ERROR_NOT_SUPPORTED:
            return Fabric(state="not supported")
        return Fabric(state="unreadable", problem=f"{type(error).__name__}: {error}")
    state = _FABRIC_STATES.get(int(info.state), f"state {int(info.state)}")
    mask = int(getattr(info, "healthMask", 0) or 0)
    flags = tuple(name for shift, name in _HEALTH_FLAGS.items() if (mask >> shift) & 0x3 == 1)
    return Fabric(state=state, status=int(info.status), clique=int(info.cliqueId), health=flags)


def read_counters(nvml: Any, handle: Any, uuid: str, index: int | None = None) -> ErrorCounters:
    return counters_with_links(nvml, handle, uuid, index, read_nvlinks(nvml, handle))


def counters_with_links(
    nvml: Any, handle: Any, uuid: str, index: int | None, links: list[NvLink]
) -> ErrorCounters:
    """The growing counters, with the NVLinks already read (a GpuHealth's: `gpuaccept watch`
    reads each GPU's health and its counters at every poll, and the links are most of the
    calls, 108 of them per GPU of 18 links)."""

    def ecc(kind: str) -> int | None:
        value = read_or_none(
            nvml.nvmlDeviceGetTotalEccErrors,
            handle,
            getattr(nvml, kind),
            nvml.NVML_VOLATILE_ECC,
        )
        return int(value) if value is not None else None

    def counts(link: NvLink) -> tuple[int | None, int | None, int | None]:
        return link.crc_errors, link.replay_errors, link.recovery_errors

    replays = read_or_none(nvml.nvmlDeviceGetPcieReplayCounter, handle)
    uncounted = tuple(
        link.link for link in links if link.active and counts(link) == (None, None, None)
    )
    return ErrorCounters(
        uuid=uuid,
        index=index,
        pcie_replays=int(replays) if replays is not None else None,
        pcie_gen_max=read_or_none(nvml.nvmlDeviceGetGpuMaxPcieLinkGeneration, handle),
        pcie_width_max=read_or_none(nvml.nvmlDeviceGetMaxPcieLinkWidth, handle),
        ecc_corrected_volatile=ecc("NVML_MEMORY_ERROR_TYPE_CORRECTED"),
        ecc_uncorrected_volatile=ecc("NVML_MEMORY_ERROR_TYPE_UNCORRECTED"),
        nvlink={link.link: counts(link) for link in links},
        nvlink_uncounted=uncounted,
        nvlink_recoveries=read_nvlink_recoveries(nvml, handle) if uncounted else None,
    )


def read_nvlink_recoveries(nvml: Any, handle: Any) -> tuple[int, int] | None:
    """NVLink5's link recovery events of the GPU, (successful, failed), over all its links; None
    where NVML does not give both."""
    read = getattr(nvml, "nvmlDeviceGetFieldValues", None)
    fields = [(field_id, _ALL_LINKS) for field_id in NVLINK5_RECOVERY_FIELDS]
    values = read_or_none(read, handle, fields) if read else None
    if not values or len(values) != len(fields):
        return None
    counts = []
    for value in values:
        if int(getattr(value, "nvmlReturn", 1)) != 0:
            return None
        counts.append(_field_number(value))
    return counts[0], counts[1]


def _field_number(value: Any) -> int:
    """The number a c_nvmlFieldValue_t holds, from the union member its valueType names."""
    member = {0: "dVal", 1: "uiVal", 2: "ulVal", 3: "ullVal", 4: "sllVal", 5: "siVal", 6: "usVal"}
    return int(getattr(value.value, member.get(int(getattr(value, "valueType", 1)), "uiVal")))


def read_all_counters(nvml: Any) -> tuple[list[ErrorCounters], list[str]]:
    """Counters of every GPU NVML lists; (counters, the GPUs that could not be read, and why)."""
    counters, problems = [], []
    count = read_or_none(nvml.nvmlDeviceGetCount) or 0
    for index in range(int(count)):
        try:
            handle = nvml.nvmlDeviceGetHandleByIndex(index)
            uuid = _text(nvml.nvmlDeviceGetUUID(handle))
        except Exception as error:
            problems.append(f"NVML GPU {index}: {error}")
            continue
        counters.append(read_counters(nvml, handle, uuid, index))
    return counters, problems


@dataclass(frozen=True)
class CounterSnapshot:
    """Every GPU's growing error counters at one moment (wall-clock seconds)."""

    at: float
    counters: tuple[ErrorCounters, ...]
    problems: tuple[str, ...] = ()


def read_snapshot() -> CounterSnapshot | None:
    """Every GPU's counters now; None without NVML."""
    nvml = load_nvml()
    if nvml is None:
        return None
    counters, problems = read_all_counters(nvml)
    return CounterSnapshot(time.time(), tuple(counters), tuple(problems))


def read_temperature(nvml: Any, handle: Any) -> float | None:
    """The GPU die's temperature (°C): the versioned call (nvmlDeviceGetTemperature is
    deprecated and goes in CUDA 14), the old one only where this NVML binding or the driver has
    no other."""
    value = read_or_none(
        call_newest,
        nvml,
        "nvmlDeviceGetTemperatureV",
        "nvmlDeviceGetTemperature",
        handle,
        nvml.NVML_TEMPERATURE_GPU,
    )
    return float(value) if isinstance(value, int | float) else None


# nvmlTemperatureThresholds_t: NVML_TEMPERATURE_THRESHOLD_SLOWDOWN = 1 ("Temperature at which the
# GPU will begin HW slowdown") and NVML_TEMPERATURE_THRESHOLD_GPU_MAX = 3 ("GPU Temperature at
# which the GPU can be throttled below base clock"): nvml.h of CUDA 12.6.2, lines 762-771
# (XuehaiPan/nvml-dev 4b26e7cc); read where a binding lacks the names
_THRESHOLDS = (
    ("maximum operating", "NVML_TEMPERATURE_THRESHOLD_GPU_MAX", 3),
    ("slowdown", "NVML_TEMPERATURE_THRESHOLD_SLOWDOWN", 1),
)


# A threshold outside these is taken as no answer: a misread returns 0 or 4294967295, and a limit
# of, say, 5 °C would fail every GPU on a wrong number. The bounds are wide on purpose: they are
# a sanity check of the reading, not a judgement of the GPU.
LIMIT_BOUNDS_C = (50, 130)


def read_temperature_limit(nvml: Any, handle: Any) -> tuple[float | None, str | None]:
    """The temperature DCGM's diagnostic holds a loaded GPU under: its maximum operating
    temperature (DCGM_FI_DEV_GPU_MAX_OP_TEMP, NVML's GPU_MAX threshold), or where the GPU gives
    none, its slowdown temperature, as DCGM falls back (`DcgmRecorder::DetermineMaxTemp`,
    nvvs/src/DcgmRecorder.cpp:1140-1170 at NVIDIA/DCGM 72fa3fe). (None, None) where NVML gives
    neither: then no temperature is judged. nvml.h calls this query "no longer the preferred
    interface" on Ada and later (lines 4779-4786) but still answers it there."""
    get = getattr(nvml, "nvmlDeviceGetTemperatureThreshold", None)
    if get is None:
        return None, None
    for kind, name, number in _THRESHOLDS:
        value = read_or_none(get, handle, getattr(nvml, name, number))
        if isinstance(value, int | float) and LIMIT_BOUNDS_C[0] <= value <= LIMIT_BOUNDS_C[1]:
            return float(value), kind
    return None, None


def read_gpu_health(nvml: Any, index: int, uuid: str | None = None) -> GpuHealth:
    """A health snapshot of the GPU torch numbers `index` (found in NVML by UUID when known).

    Raises GpuNotFound when NVML cannot reach it (lost, or a UUID NVML does not know).
    """
    handle, mig_instance = find_gpu(nvml, index, uuid)
    name = read_or_none(nvml.nvmlDeviceGetName, handle) or f"GPU {index}"
    ecc_total = read_or_none(
        nvml.nvmlDeviceGetTotalEccErrors,
        handle,
        nvml.NVML_MEMORY_ERROR_TYPE_UNCORRECTED,
        nvml.NVML_VOLATILE_ECC,
    )
    pending = read_or_none(nvml.nvmlDeviceGetRetiredPagesPendingStatus, handle)
    sbe = read_or_none(
        nvml.nvmlDeviceGetRetiredPages,
        handle,
        getattr(nvml, "NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS", 0),
    )
    dbe = read_or_none(
        nvml.nvmlDeviceGetRetiredPages,
        handle,
        getattr(nvml, "NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR", 1),
    )
    remap = read_or_none(nvml.nvmlDeviceGetRemappedRows, handle)  # (corr, uncorr, pending, failure)
    persistence = read_or_none(nvml.nvmlDeviceGetPersistenceMode, handle)
    pci = read_or_none(nvml.nvmlDeviceGetPciInfo, handle)
    mig = read_or_none(nvml.nvmlDeviceGetMigMode, handle)
    replays = read_or_none(nvml.nvmlDeviceGetPcieReplayCounter, handle)
    temperature = read_temperature(nvml, handle)
    limit, limit_kind = read_temperature_limit(nvml, handle)
    return GpuHealth(
        index=index,
        name=_text(name),
        uuid=_text(read)
        if (read := read_or_none(nvml.nvmlDeviceGetUUID, handle) or uuid)
        else None,
        pci_device_id=int(pci.pciDeviceId) if pci is not None else None,
        ecc_uncorrectable_volatile=int(ecc_total) if ecc_total is not None else None,
        ecc=_ecc_by_location(nvml, handle),
        retired_pages_pending=bool(pending) if pending is not None else None,
        retired_pages_sbe=len(sbe) if sbe is not None else None,
        retired_pages_dbe=len(dbe) if dbe is not None else None,
        remapped_rows_pending=bool(remap[2]) if remap is not None else None,
        remapped_rows_failed=bool(remap[3]) if remap is not None else None,
        remapped_rows_correctable=int(remap[0]) if remap is not None else None,
        remapped_rows_uncorrectable=int(remap[1]) if remap is not None else None,
        throttle_reasons=throttle_labels(nvml, read_throttle_mask(nvml, handle)),
        pcie_gen_current=read_or_none(nvml.nvmlDeviceGetCurrPcieLinkGeneration, handle),
        pcie_gen_max_gpu=read_or_none(nvml.nvmlDeviceGetGpuMaxPcieLinkGeneration, handle),
        pcie_gen_max_system=read_or_none(nvml.nvmlDeviceGetMaxPcieLinkGeneration, handle),
        pcie_width_current=read_or_none(nvml.nvmlDeviceGetCurrPcieLinkWidth, handle),
        pcie_width_max=read_or_none(nvml.nvmlDeviceGetMaxPcieLinkWidth, handle),
        pcie_replays=int(replays) if replays is not None else None,
        persistence_mode=bool(persistence) if persistence is not None else None,
        nvlinks=read_nvlinks(nvml, handle),
        fabric=read_fabric(nvml, handle),
        mig_enabled=bool(mig[0]) if mig is not None else None,
        mig_instance=mig_instance,
        recovery_action=read_recovery_action(nvml, handle),
        temperature_c=temperature,
        temperature_limit_c=limit,
        temperature_limit_kind=limit_kind,
    )


def read_recovery_action(nvml: Any, handle: Any) -> str | None:
    """The action the driver asks for (field 230), or None where it cannot say."""
    read = getattr(nvml, "nvmlDeviceGetFieldValues", None)
    values = read_or_none(read, handle, [_RECOVERY_ACTION_FIELD]) if read else None
    if not values:
        return None
    value = values[0]
    if int(getattr(value, "nvmlReturn", 1)) != 0:
        return None
    number = _field_number(value)
    return RECOVERY_ACTIONS.get(number, f"action {number}")


_SERIAL_CHARACTERS = 64  # NVML_DEVICE_SERIAL_BUFFER_SIZE 30, part numbers 80: a cap, not a parse


def board_identity(index: int, uuid: str | None) -> dict[str, str | None]:
    """The board's serial and part number as NVML reports them (issue #31 §4: an RMA names the
    serial; a GPU is followed by its UUID across hosts), None where the board or the driver does
    not say. Printable characters only, cut to a bound: they land in reports and reasons."""
    found: dict[str, str | None] = {"serial": None, "board_part_number": None}
    nvml = load_nvml()
    if nvml is None:
        return found
    try:
        handle, _mig = find_gpu(nvml, index, uuid)
    except Exception:  # GpuNotFound: said by health and inventory
        return found
    for key, call in (
        ("serial", "nvmlDeviceGetSerial"),
        ("board_part_number", "nvmlDeviceGetBoardPartNumber"),
    ):
        try:
            raw = getattr(nvml, call)(handle)
        except Exception:  # not supported on this board or driver
            continue
        text = raw.decode(errors="replace") if isinstance(raw, bytes) else str(raw)
        text = "".join(c for c in text if c.isprintable()).strip()[:_SERIAL_CHARACTERS]
        found[key] = text or None
    return found


def nvml_identity(index: int, uuid: str | None) -> tuple[int | None, bool]:
    """(NVML's PCI device id, device << 16 | vendor, or None when NVML cannot say; whether the
    device torch numbers `index` is a MIG instance). The reference table keys models by the id;
    a MIG instance is judged as a slice, never as the whole GPU."""
    nvml = load_nvml()
    if nvml is None:
        return None, False
    try:
        handle, mig_instance = find_gpu(nvml, index, uuid)
    except Exception:  # GpuNotFound
        return None, False
    try:
        return int(nvml.nvmlDeviceGetPciInfo(handle).pciDeviceId), mig_instance is not None
    except Exception:  # a board that does not report it
        return None, mig_instance is not None
