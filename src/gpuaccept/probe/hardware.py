"""What is there: GPUs (name, capability, memory, UUID, PCI), the driver, NVML health snapshots.

Every probe degrades to None (unknown) rather than raising: a missing NVML or driver is a fact
to report, and the checks decide what it means.
"""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from gpuaccept.errors import EnvironmentProblem, InputError

DEVICE_CHOICES = ("auto", "cpu", "cuda")


@dataclass(frozen=True)
class GpuInfo:
    index: int
    name: str
    capability: tuple[int, int]
    memory_bytes: int
    multiprocessors: int
    uuid: str | None = None
    pci_bus_id: str | None = None


@dataclass(frozen=True)
class ExpectedGpus:
    """How many GPUs this process should see, and which setting said so."""

    count: int
    source: str


def list_cuda_gpus() -> list[GpuInfo]:
    """The GPUs torch can use, in device-index order; empty on a CPU build or without a driver."""
    import torch

    if not torch.cuda.is_available():
        return []
    gpus = []
    for index in range(torch.cuda.device_count()):
        props = torch.cuda.get_device_properties(index)
        uuid = getattr(props, "uuid", None)
        bus = getattr(props, "pci_bus_id", None)
        domain = getattr(props, "pci_domain_id", None)
        device = getattr(props, "pci_device_id", None)
        pci = (
            f"{domain:08x}:{bus:02x}:{device:02x}.0" if None not in (domain, bus, device) else None
        )
        gpus.append(
            GpuInfo(
                index=index,
                name=props.name,
                capability=(props.major, props.minor),
                memory_bytes=int(props.total_memory),
                multiprocessors=int(props.multi_processor_count),
                uuid=f"GPU-{uuid}" if uuid is not None else None,
                pci_bus_id=pci,
            )
        )
    return gpus


def _count_list(value: str) -> int:
    entries = [entry.strip() for entry in value.split(",") if entry.strip()]
    return 0 if entries in ([], ["-1"]) else len(entries)


# What CUDA takes in CUDA_VISIBLE_DEVICES: indices, GPU-/MIG- UUIDs (or their prefixes).
_VISIBLE_ENTRY = re.compile(r"[0-9]{1,4}|(GPU|MIG)-[0-9A-Za-z/-]+")


def _count_visible(value: str) -> int:
    """GPUs CUDA_VISIBLE_DEVICES makes visible. CUDA stops at the first entry it cannot read and
    hides the rest, so an entry that is neither an index nor a UUID is refused (exit 2) rather
    than counted as a GPU; -1 (or empty) hides every GPU."""
    entries = [entry.strip() for entry in value.split(",")]
    if entries in ([""], ["-1"]):
        return 0
    for entry in entries:
        if not _VISIBLE_ENTRY.fullmatch(entry):
            raise InputError(
                f"CUDA_VISIBLE_DEVICES={value!r}: {entry!r} is neither a GPU index nor a "
                "GPU-/MIG- UUID (CUDA would hide it and every GPU after it)"
            )
    return len(entries)


def expected_gpu_count(environ: Mapping[str, str] | None = None) -> ExpectedGpus | None:
    """The GPU count the scheduler assigned, if a scheduler (or the user) said so.

    HTCondor's assigned GPUs win over Slurm's count, which wins over CUDA_VISIBLE_DEVICES.
    """
    env = os.environ if environ is None else environ
    assigned = env.get("_CONDOR_AssignedGPUs")
    if assigned is not None:
        return ExpectedGpus(_count_list(assigned), "HTCondor _CONDOR_AssignedGPUs")
    slurm = env.get("SLURM_GPUS_ON_NODE")
    if slurm is not None:
        # ASCII digits only: '²'.isdigit() is true, and int() then fails
        if not re.fullmatch(r"\s*[0-9]{1,6}\s*", slurm):
            raise InputError(f"SLURM_GPUS_ON_NODE={slurm!r} is not a GPU count")
        return ExpectedGpus(int(slurm), "Slurm SLURM_GPUS_ON_NODE")
    visible = env.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        return ExpectedGpus(_count_visible(visible), "CUDA_VISIBLE_DEVICES")
    return None


def import_torch() -> Any:
    """torch, imported with a signal only noted meanwhile (and raised once it is in): an exception
    raised by the signal handler inside torch's import lands in its C++ module set-up, which
    calls std::terminate, and the process aborts with no report (seen: accept SIGTERMed one
    second in, exit -6, `pybind11::error_already_set`)."""
    from gpuaccept.interrupts import held

    with held():
        import torch
    return torch


def resolve_device_mode(requested: str) -> str:
    """'cuda' or 'cpu' for a --device choice; asking for cuda without a usable GPU is exit 3."""
    if requested not in DEVICE_CHOICES:
        raise InputError(f"--device must be one of {', '.join(DEVICE_CHOICES)} (got {requested!r})")
    torch = import_torch()

    usable = torch.cuda.is_available() and torch.cuda.device_count() > 0
    if requested == "cuda" and not usable:
        why = (
            "this torch is a CPU build"
            if torch.version.cuda is None
            else f"torch (CUDA {torch.version.cuda}) finds no usable GPU"
        )
        raise EnvironmentProblem(f"--device cuda asked for, but {why}")
    if requested == "auto":
        return "cuda" if usable else "cpu"
    return requested


# A module to use in place of pynvml: a site's own shim, or the scripted NVML the tests drive
# every health verdict with (it reaches the suite's worker processes through the environment).
NVML_MODULE_ENV = "GPUACCEPT_NVML_MODULE"


def nvml_module_name() -> str:
    """The NVML module to import; InputError (checked by the CLI before a run) when
    GPUACCEPT_NVML_MODULE is not a module name."""
    name = os.environ.get(NVML_MODULE_ENV) or "pynvml"
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*", name):
        raise InputError(f"{NVML_MODULE_ENV}={name!r} is not a Python module name")
    return name


def _nvml_module() -> Any:
    import importlib

    return importlib.import_module(nvml_module_name())


# nvmlInit blocks for minutes (or for ever) on a node whose GPU fell off the bus. Past this many
# seconds NVML counts as unavailable for the rest of the process, so no probe can hang a run.
NVML_INIT_TIMEOUT_ENV = "GPUACCEPT_NVML_INIT_TIMEOUT"
_DEFAULT_NVML_INIT_TIMEOUT_SECONDS = 20.0
_nvml_hung_after: float | None = None


def _parsed_init_timeout(raw: str) -> float | None:
    try:
        seconds = float(raw)
    except ValueError:
        return None
    return seconds if 0 < seconds < 3600 else None  # NaN fails both


def check_nvml_init_timeout_setting() -> None:
    """Refuse (InputError, checked by the CLI before a run) GPUACCEPT_NVML_INIT_TIMEOUT set to
    anything but a number of seconds above 0 and below 3600."""
    raw = os.environ.get(NVML_INIT_TIMEOUT_ENV, "").strip()
    if raw and _parsed_init_timeout(raw) is None:
        raise InputError(
            f"{NVML_INIT_TIMEOUT_ENV}={raw[:40]!r} is not a number of seconds above 0 and below "
            "3600 (how long nvmlInit may take before NVML counts as unavailable)"
        )


def _nvml_init_timeout() -> float:
    raw = os.environ.get(NVML_INIT_TIMEOUT_ENV, "").strip()
    return (_parsed_init_timeout(raw) if raw else None) or _DEFAULT_NVML_INIT_TIMEOUT_SECONDS


def load_nvml() -> Any:
    """pynvml, initialised; None when nvidia-ml-py or the driver's NVML library is missing, or
    when nvmlInit did not answer in time (see nvml_missing_reason)."""
    global _nvml_hung_after
    if _nvml_hung_after is not None:
        return None
    try:
        nvml = _nvml_module()
    except ImportError:
        return None
    answered: list[bool] = []

    def initialise() -> None:
        try:
            nvml.nvmlInit()
        except Exception:  # NVMLError_LibraryNotFound, _DriverNotLoaded, ...
            answered.append(False)
        else:
            answered.append(True)

    # A daemon thread: if the driver never answers, the process can still finish and exit.
    waiter = threading.Thread(target=initialise, name="nvml-init", daemon=True)
    waiter.start()
    timeout = _nvml_init_timeout()
    waiter.join(timeout)
    if waiter.is_alive():
        _nvml_hung_after = timeout
        return None
    return nvml if answered and answered[0] else None


def nvml_missing_reason() -> str:
    if _nvml_hung_after is not None:
        return (
            f"NVML did not answer within {_nvml_hung_after:g} s (a GPU that fell off the bus "
            "or a hung driver; see the kernel log)"
        )
    try:
        _nvml_module()
    except ImportError as error:
        if os.environ.get(NVML_MODULE_ENV):  # a site's shim named, not pynvml: say which failed
            return f"{NVML_MODULE_ENV}={nvml_module_name()} cannot be imported ({error})"
        return "nvidia-ml-py is not installed (pip install nvidia-ml-py)"
    return "the NVIDIA driver's NVML library could not be loaded"


def nvml_gpu_count() -> int | None:
    nvml = load_nvml()
    if nvml is None:
        return None
    try:
        return int(nvml.nvmlDeviceGetCount())
    except Exception:
        return None


def nvml_unreachable_gpus() -> list[str]:
    """Each GPU NVML lists but cannot reach (lost, fallen off the bus), with NVML's reason."""
    nvml = load_nvml()
    if nvml is None:
        return []
    try:
        count = int(nvml.nvmlDeviceGetCount())
    except Exception as error:
        return [f"NVML cannot count the GPUs: {error}"]
    unreachable = []
    for index in range(count):
        try:
            nvml.nvmlDeviceGetUUID(nvml.nvmlDeviceGetHandleByIndex(index))
        except Exception as error:
            unreachable.append(f"NVML GPU {index}: {error}")
    return unreachable


# nvidia-ml-py 13.615.71 pynvml.py:88-91 (NVML_COMPUTEMODE_*): a GPU in these modes takes no
# second process's context (EXCLUSIVE_THREAD, 1, is gone from the driver)
_UNSHARED_MODES = {2: "prohibited", 3: "exclusive-process"}


def unshared_gpus(uuids: Sequence[str]) -> list[str]:
    """The GPUs among `uuids` whose compute mode refuses another process a context, each as
    "UUID (mode)"; empty when NVML cannot say (the run then finds out for itself)."""
    nvml = load_nvml()
    if nvml is None:
        return []
    unshared = []
    for uuid in uuids:
        try:
            mode = int(nvml.nvmlDeviceGetComputeMode(nvml.nvmlDeviceGetHandleByUUID(uuid)))
        except Exception:
            continue
        if mode in _UNSHARED_MODES:
            unshared.append(f"{uuid} ({_UNSHARED_MODES[mode]})")
    return unshared


def driver_versions() -> tuple[str | None, tuple[int, int] | None]:
    """(driver version string, highest CUDA version the driver supports), each None if unknown."""
    driver: str | None = None
    cuda: tuple[int, int] | None = None
    nvml = load_nvml()
    if nvml is not None:
        try:
            raw = nvml.nvmlSystemGetDriverVersion()
            driver = raw.decode() if isinstance(raw, bytes) else str(raw)
            encoded = int(nvml.nvmlSystemGetCudaDriverVersion())
            cuda = (encoded // 1000, (encoded % 1000) // 10)
        except Exception:
            pass
    if cuda is None:
        try:
            import torch

            encoded = int(getattr(torch._C, "_cuda_getDriverVersion")())  # noqa: B009 private
            if encoded > 0:
                cuda = (encoded // 1000, (encoded % 1000) // 10)
        except Exception:
            pass
    return driver, cuda
