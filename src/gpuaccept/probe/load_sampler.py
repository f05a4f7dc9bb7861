"""Power, temperature, SM clock, clock-event reasons and the PCIe link, sampled on a side thread
while a check loads the GPU (every 100 ms: DCGM's diag samples its plugins about as often).

The sampler only reads; checks.load_judging decides what the samples mean.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Any

from gpuaccept.probe.nvml_health import (
    read_or_none,
    read_temperature,
    read_temperature_limit,
    read_throttle_mask,
    throttle_labels,
)

SAMPLE_PERIOD_SECONDS = 0.1
_MAX_SAMPLES = 20_000  # 33 minutes at 10 Hz: a longer phase keeps its first samples only


@dataclass(frozen=True)
class LoadSample:
    seconds: float  # since the sampler started
    power_w: float | None = None
    power_limit_w: float | None = None
    temperature_c: float | None = None
    sm_clock_mhz: float | None = None
    reasons: tuple[str, ...] = ()  # the clock-event reasons that mean trouble (or a power cap)
    pcie_gen: int | None = None
    pcie_width: int | None = None
    pcie_replays: int | None = None


@dataclass
class LoadTrace:
    """What one sampler saw: its samples, the SM clock's maximum, and why it saw nothing."""

    samples: list[LoadSample] = field(default_factory=list)
    sm_clock_max_mhz: float | None = None
    problem: str | None = None
    # The link this GPU and its slot can both reach: NVML's nvmlDeviceGetMaxPcieLinkGeneration
    # and ...Width, "possible with this device and system" ("for a generation 2 PCIe device
    # attached to a generation 1 PCIe bus the max link generation this function will report is
    # generation 1": NVIDIA's nvml.h of CUDA 12.6.2, lines 4257-4275 and 4296-4314, as
    # XuehaiPan/nvml-dev 4b26e7cc carries it). A capability, as the header words it, not the link's
    # trained state; a virtual root port may claim less than the link reaches, which is why the
    # judging believes it only where the loaded link stayed within it (load_judging).
    pcie_gen_slot: int | None = None
    pcie_width_slot: int | None = None
    # The temperature the GPU must stay under while loaded, and which threshold it is
    # (read_temperature_limit)
    temperature_limit_c: float | None = None
    temperature_limit_kind: str | None = None


def take_sample(nvml: Any, handle: Any, seconds: float) -> LoadSample:
    power = read_or_none(nvml.nvmlDeviceGetPowerUsage, handle)  # milliwatts
    limit = read_or_none(nvml.nvmlDeviceGetEnforcedPowerLimit, handle)
    clock = read_or_none(nvml.nvmlDeviceGetClockInfo, handle, nvml.NVML_CLOCK_SM)
    return LoadSample(
        seconds=round(seconds, 3),
        power_w=power / 1000 if power is not None else None,
        power_limit_w=limit / 1000 if limit is not None else None,
        temperature_c=read_temperature(nvml, handle),
        sm_clock_mhz=float(clock) if clock is not None else None,
        reasons=tuple(throttle_labels(nvml, read_throttle_mask(nvml, handle))),
        pcie_gen=read_or_none(nvml.nvmlDeviceGetCurrPcieLinkGeneration, handle),
        pcie_width=read_or_none(nvml.nvmlDeviceGetCurrPcieLinkWidth, handle),
        pcie_replays=read_or_none(nvml.nvmlDeviceGetPcieReplayCounter, handle),
    )


class LoadSampler:
    """`with LoadSampler(nvml, handle) as sampler:` samples for as long as the block runs."""

    def __init__(
        self, nvml: Any, handle: Any, period_seconds: float = SAMPLE_PERIOD_SECONDS
    ) -> None:
        self._nvml = nvml
        self._handle = handle
        self._period = period_seconds
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.trace = LoadTrace()

    def __enter__(self) -> LoadSampler:
        maximum = read_or_none(
            self._nvml.nvmlDeviceGetMaxClockInfo, self._handle, self._nvml.NVML_CLOCK_SM
        )
        self.trace.sm_clock_max_mhz = float(maximum) if maximum is not None else None
        self.trace.pcie_gen_slot = read_or_none(
            self._nvml.nvmlDeviceGetMaxPcieLinkGeneration, self._handle
        )
        self.trace.pcie_width_slot = read_or_none(
            self._nvml.nvmlDeviceGetMaxPcieLinkWidth, self._handle
        )
        limit = read_temperature_limit(self._nvml, self._handle)
        self.trace.temperature_limit_c, self.trace.temperature_limit_kind = limit
        self._thread = threading.Thread(target=self._run, name="load-sampler", daemon=True)
        self._thread.start()
        return self

    def _run(self) -> None:
        started = time.monotonic()
        next_at = started
        while not self._stop.is_set():
            if len(self.trace.samples) < _MAX_SAMPLES:
                self.trace.samples.append(
                    take_sample(self._nvml, self._handle, time.monotonic() - started)
                )
            next_at += self._period
            self._stop.wait(max(0.0, next_at - time.monotonic()))

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)


class NoSampler:
    """Stands in where nothing can be sampled (CPU mode, no NVML): an empty trace and why."""

    def __init__(self, problem: str) -> None:
        self.trace = LoadTrace(problem=problem)

    def __enter__(self) -> NoSampler:
        return self

    def __exit__(self, *exc: object) -> None:
        return None


def sampler_for(device_index: int | None, uuid: str | None) -> LoadSampler | NoSampler:
    """A sampler for the GPU torch numbers `device_index`, or a NoSampler saying why not."""
    if device_index is None:
        return NoSampler("CPU mode: no GPU to sample")
    from gpuaccept.probe.hardware import load_nvml, nvml_missing_reason
    from gpuaccept.probe.nvml_health import GpuNotFound, find_gpu

    nvml = load_nvml()
    if nvml is None:
        return NoSampler(f"NVML unavailable: {nvml_missing_reason()}")
    try:
        handle, _ = find_gpu(nvml, device_index, uuid)
    except GpuNotFound as error:
        return NoSampler(str(error))
    return LoadSampler(nvml, handle)
