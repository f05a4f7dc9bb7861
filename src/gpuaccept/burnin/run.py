"""The burn-in's window loop over the node's warm workers (issue #23).

One worker per GPU (the suite's `WorkerPool`: torch and the CUDA context made once, NVML events
watched for the worker's whole life). Each window runs its stressor on every device at once for
the window's time: a per-device job for GEMM, HBM and host transfers, one rank per device of a
process group for all-reduce (NCCL on GPUs, gloo on the CPU twin). Between windows the node's
error counters are read in the first worker, so each window is judged on its own growth. After
each window the progress is checkpointed, so an eviction resumes at the next window.

A device whose worker dies or outlives its window (a GPU that fell off the bus, a hung kernel)
is that window's hardware failure, and gets a fresh worker for the next window.

The CPU twin runs the same loop with `cpu_devices` workers standing in for GPUs (default 3, the
fewest that have a majority and a median), so the scheduling, digests, stragglers and
checkpoints are tested on a machine without a GPU.
"""

from __future__ import annotations

import socket
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from gpuaccept.burnin.checkpoint import NodeIdentity, RunBinding, save_checkpoint
from gpuaccept.burnin.evidence import PortCounters, WindowRecord, record_window
from gpuaccept.burnin.floors import RateFloor
from gpuaccept.burnin.judging import DEFAULT_STRAGGLER_TOLERANCE_PERCENT
from gpuaccept.burnin.plan import BurnInPlan, BurnInProgress, WindowFigures, window_seed
from gpuaccept.burnin.stress import Fault, WindowWork
from gpuaccept.burnin.window import judge_record
from gpuaccept.errors import Interrupted
from gpuaccept.interrupts import clear as clear_interruption
from gpuaccept.interrupts import raise_if_interrupted
from gpuaccept.probe.fabric import read_port_counters
from gpuaccept.probe.nvml_events import GpuEvent
from gpuaccept.probe.nvml_health import CounterSnapshot
from gpuaccept.suite.pool import Failure, Outcome, WorkerPool
from gpuaccept.suite.worker import Job, Reply

if TYPE_CHECKING:
    from gpuaccept.actions import ActionRules

DEFAULT_CPU_DEVICES = 3
# Past its window's time, how long a device may take to report before it counts as lost: the
# last batch, the float64 reference check and the reply.
WINDOW_GRACE_SECONDS = 120.0
_STARTUP_SLACK_SECONDS = 300.0  # a worker replaced mid-run starts inside its window's deadline


@dataclass(frozen=True)
class BurnInSettings:
    plan: BurnInPlan
    device_mode: str  # "cuda" or "cpu"
    gpus: list[tuple[int, str | None]] = field(default_factory=list)  # (index, uuid) on cuda
    cpu_devices: int = DEFAULT_CPU_DEVICES
    seed: int = 0
    straggler_tolerance_percent: float = DEFAULT_STRAGGLER_TOLERANCE_PERCENT
    checkpoint: Path | None = None
    windows_per_run: int | None = None  # stop after this many (a scheduler's checkpoint)
    # Injected faults, for the CPU twin's tests: (window, device) -> fault, window -> events.
    faults: Mapping[tuple[int, str], Fault] = field(default_factory=dict)
    injected_events: Mapping[int, list[GpuEvent]] = field(default_factory=dict)
    hostname: str = field(default_factory=socket.gethostname)
    # stressor -> device -> the reference floor it is held to (`burnin.floors`)
    floors: Mapping[str, Mapping[str, RateFloor]] = field(default_factory=dict)
    rules: ActionRules | None = None  # the site's action tables (--rules): their limits

    @property
    def devices(self) -> list[str]:
        """The devices' labels: gpu<index> on GPUs, cpu0.. for the CPU twin's workers."""
        if self.device_mode == "cuda":
            return [f"gpu{index}" for index, _ in self.gpus]
        return [f"cpu{slot}" for slot in range(self.cpu_devices)]

    @property
    def binding(self) -> RunBinding:
        """What a checkpoint of this run is bound to (and must match to be resumed)."""
        uuids = [uuid for _, uuid in self.gpus] if self.device_mode == "cuda" else []
        return RunBinding(
            plan=self.plan,
            seed=self.seed,
            node=NodeIdentity(hostname=self.hostname, gpu_uuids=uuids),
            devices=self.devices,
            straggler_tolerance_percent=self.straggler_tolerance_percent,
            floors=self.floors,
            rules=self.rules,
        )


class WindowObserver(Protocol):
    """What the CLI shows while the burn-in runs (nothing below the CLI prints)."""

    def window_started(self, window: int, stressor: str, seconds: float) -> None: ...

    def window_finished(self, figures: WindowFigures, load_seconds: float) -> None: ...


@dataclass(frozen=True)
class BurnInStop:
    """The signal that stopped a burn-in, and the window it stopped (not recorded)."""

    error: Interrupted
    window: int | None


class _Loop:
    def __init__(self, settings: BurnInSettings) -> None:
        self.settings = settings
        self.cuda = settings.device_mode == "cuda"
        gpus = (
            settings.gpus if self.cuda else [(slot, None) for slot in range(settings.cpu_devices)]
        )
        self.pool = WorkerPool(settings.device_mode, list(gpus))
        self.slots = list(range(len(gpus)))
        self.labels = settings.devices

    def _device_index(self, slot: int) -> int | None:
        return self.settings.gpus[slot][0] if self.cuda else None

    def _uuid(self, slot: int) -> str | None:
        return self.settings.gpus[slot][1] if self.cuda else None

    def snapshot(self) -> CounterSnapshot | None:
        """The node's error counters now, read in the first worker (None without NVML)."""
        if not self.cuda:
            return None
        job = Job("check", "burnin counters", "gpuaccept.probe.nvml_health:read_snapshot")
        outcome = self.pool.run({0: job}, WINDOW_GRACE_SECONDS)[0]
        return outcome.value if isinstance(outcome, Reply) and outcome.ok else None

    def window(
        self,
        window: int,
        stressor: str,
        seconds: float,
        before: CounterSnapshot | None,
        ports_before: PortCounters,
    ) -> tuple[WindowFigures, WindowRecord, CounterSnapshot | None, PortCounters]:
        """The window run on every device, recorded and judged; the GPUs' and the ports'
        counters as it ended (read here: sysfs needs no NVML)."""
        settings = self.settings
        seed = window_seed(settings.seed, window)
        name = f"burnin window {window + 1} ({stressor})"
        timeout = seconds + WINDOW_GRACE_SECONDS + _STARTUP_SLACK_SECONDS
        faults = {slot: settings.faults.get((window, self.labels[slot])) for slot in self.slots}
        if stressor == "all-reduce":
            outcomes = self._ranks(name, seconds, seed, timeout, faults)
        else:
            jobs = {
                slot: Job(
                    "check",
                    name,
                    "gpuaccept.burnin.stress:run_window",
                    (
                        stressor,
                        seconds,
                        seed,
                        self._device_index(slot),
                        self._uuid(slot),
                        faults[slot],
                    ),
                )
                for slot in self.slots
            }
            outcomes = self.pool.run(jobs, timeout)
        works: dict[str, WindowWork] = {}
        lost: dict[str, str] = {}
        events: list[GpuEvent] = list(settings.injected_events.get(window, []))
        for slot, outcome in sorted(outcomes.items()):
            label = self.labels[slot]
            if isinstance(outcome, Failure):
                lost[label] = outcome.message
                continue
            events.extend(outcome.events)
            if outcome.ok:
                works[label] = outcome.value
            else:
                lost[label] = f"its stressor raised {outcome.value}"
        after, ports_after = self.snapshot(), read_port_counters()
        record = record_window(
            window,
            stressor,
            seconds,
            seed,
            works,
            lost=lost,
            events=events,
            counters=(before, after) if before is not None and after is not None else None,
            port_counters=(ports_before, ports_after) if ports_before else None,
        )
        figures = judge_record(
            record,
            settings.straggler_tolerance_percent,
            settings.floors.get(stressor),
            settings.rules,
        )
        return figures, record, after, ports_after

    def _ranks(
        self, name: str, seconds: float, seed: int, timeout: float, faults: dict[int, Any]
    ) -> dict[int, Outcome]:
        backend = "nccl" if self.cuda else "gloo"
        with tempfile.TemporaryDirectory(prefix="gpuaccept-burnin-") as scratch:
            jobs = {
                slot: Job(
                    "rank",
                    name,
                    "gpuaccept.burnin.stress:run_all_reduce_window",
                    (seconds, seed, self._device_index(slot), self._uuid(slot), faults[slot]),
                    rank=rank,
                    world=len(self.slots),
                    store=str(Path(scratch) / "store"),
                    backend=backend,
                    timeout_seconds=seconds + WINDOW_GRACE_SECONDS,
                )
                for rank, slot in enumerate(self.slots)
            }
            return self.pool.run(jobs, timeout, together=True)


def run_burnin(
    settings: BurnInSettings,
    progress: BurnInProgress,
    observer: WindowObserver | None = None,
) -> BurnInStop | None:
    """Run the windows `progress` has not done yet (at most `windows_per_run`), recording (and
    checkpointing) each as it ends; the interruption that stopped the run, if one did (its window
    is not recorded)."""
    plan = settings.plan
    loop = _Loop(settings)
    current: int | None = None
    stopped: BurnInStop | None = None
    try:
        loop.pool.await_ready(loop.slots)  # a worker that did not start is its window's loss
        before, ports = loop.snapshot(), read_port_counters()
        last = plan.window_count
        if settings.windows_per_run is not None:
            last = min(last, progress.next_window + settings.windows_per_run)
        for window in range(progress.next_window, last):
            raise_if_interrupted()  # a signal whose exception was lost: not one window more
            current = window
            stressor, seconds = plan.stressor(window), plan.seconds_of(window)
            if observer is not None:
                observer.window_started(window, stressor, seconds)
            figures, record, before, ports = loop.window(window, stressor, seconds, before, ports)
            progress.record(figures, record)
            if settings.checkpoint is not None:
                save_checkpoint(settings.checkpoint, progress, settings.binding)
            current = None
            if observer is not None:
                observer.window_finished(figures, progress.load_seconds)
    except (Interrupted, KeyboardInterrupt) as error:
        signal_error = error if isinstance(error, Interrupted) else Interrupted(2)
        clear_interruption()  # handled: the run reports it and ends
        stopped = BurnInStop(signal_error, current)
    finally:
        loop.pool.close(kill=stopped is not None)
    return stopped
