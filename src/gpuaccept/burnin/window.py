"""A finished burn-in window judged across the node (issue #23): what every device did under one
stressor, the NVML events and error counters of the window, the devices that were lost,
and the growth of the InfiniBand/RoCE ports' error counters, become the window's figures and
findings, in words that name the window, the stressor and the device. The judging reads a
`WindowRecord` (issue #30), so a window read back from a checkpoint is judged exactly as one
that has just run.

Hard events fail the window: a critical XID or another NVML event that condemns a GPU, error
counters that grew as `checks.events` judges them over a whole accept (uncorrectable ECC, NVLink
replay or recovery errors, CRC at DCGM's rate), a hardware slowdown under load
(`checks.load_judging`), and a device whose worker died or hung (a GPU lost from the node).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from gpuaccept.burnin.evidence import DeviceWindow, PortCounters, WindowRecord, record_window
from gpuaccept.burnin.floors import RateFloor, below_floor
from gpuaccept.burnin.judging import (
    DEFAULT_STRAGGLER_TOLERANCE_PERCENT,
    judge_digests,
    stragglers,
)
from gpuaccept.burnin.plan import WindowFigures
from gpuaccept.burnin.stress import POWER_HOLD_FRACTION, WindowWork
from gpuaccept.checks.events import judge_events, judge_growth
from gpuaccept.checks.fabric import judge_counter_growth
from gpuaccept.checks.judging import Findings
from gpuaccept.checks.load_judging import judge_load_summary
from gpuaccept.probe.nvml_events import GpuEvent
from gpuaccept.probe.nvml_health import CounterSnapshot

if TYPE_CHECKING:
    from gpuaccept.actions import ActionRules

# A collective runs at the pace of its slowest rank, so every rank measures the same rate: a slow
# GPU or link slows the whole group and shows in the node's all-reduce figure over the run (drift,
# the history), never as one straggler.
UNJUDGED_FOR_STRAGGLERS = frozenset({"all-reduce"})

# The load summary's figures kept per window (the rest of a summary is for one accept check).
_LOAD_FIGURES = (
    "power_p90_w",
    "power_limit_w",
    "power_held_share",
    "temperature_max_c",
    "sm_clock_median_mhz",
)


def judge_window(
    window: int,
    stressor: str,
    seconds: float,
    works: Mapping[str, WindowWork],
    *,
    lost: Mapping[str, str] | None = None,
    events: Sequence[GpuEvent] = (),
    counters: tuple[CounterSnapshot, CounterSnapshot] | None = None,
    port_counters: tuple[PortCounters, PortCounters] | None = None,
    straggler_tolerance_percent: float = DEFAULT_STRAGGLER_TOLERANCE_PERCENT,
    seed: int | None = None,
) -> WindowFigures:
    """The window's figures and findings from each device's work (device label -> work), the
    devices that gave none (label -> why), its NVML events and its counters at start and end."""
    record = record_window(
        window,
        stressor,
        seconds,
        0 if seed is None else seed,
        works,
        lost=lost,
        events=events,
        counters=counters,
        port_counters=port_counters,
    )
    figures = judge_record(record, straggler_tolerance_percent)
    return figures if seed is not None else figures.model_copy(update={"seed": None})


def judge_record(
    record: WindowRecord,
    straggler_tolerance_percent: float = DEFAULT_STRAGGLER_TOLERANCE_PERCENT,
    floors: Mapping[str, RateFloor] | None = None,
    rules: ActionRules | None = None,
) -> WindowFigures:
    """A window's figures and findings, judged from its record: the same rules whether the
    window has just run or a resumed burn-in read it from its checkpoint. `floors`: each
    device's reference floor for this stressor (`burnin.floors`), warned below; `rules`: the
    site's action tables (`--rules`), whose limits the counters are held to (built-in: None)."""
    stressor, devices = record.stressor, record.devices
    where = f"window {record.window + 1} ({stressor})"
    correctness, majority = _correctness(where, devices)
    hardware = [f"{where}: {device} was lost: {why}" for device, why in sorted(record.lost.items())]
    found = Findings("burnin", "BURNIN")  # its name and area are not read: only its findings
    judge_events(list(record.events), found)
    growth = judge_growth(*record.counters, found, rules) if record.counters is not None else []
    if record.port_counters is not None:
        growth += judge_counter_growth(*record.port_counters, found)
    hardware += [f"{where}: {text}" for text in found.failures]
    warnings = [f"{where}: {text}" for text in found.warnings]
    gemm = stressor.startswith("gemm")
    for device, work in sorted(devices.items()):
        load = judge_load_summary(
            work.load.model_dump(exclude_none=True), None, device, clocks=gemm, rules=rules
        )
        hardware += [f"{where}: {text}" for text in load.failures]
        warnings += [f"{where}: {text}" for text in load.warnings]
        held = work.load.power_held_share
        if held is not None and held < POWER_HOLD_FRACTION:
            warnings.append(
                f"{where}: {device} held {POWER_HOLD_FRACTION:.0%} of its power limit in "
                f"{held:.0%} of the samples (expected {POWER_HOLD_FRACTION:.0%}): the stress is "
                "below what it should reach"
            )
    # every rank of an all-reduce measures the group's one rate: no rank is a straggler alone
    per_device = stressor not in UNJUDGED_FOR_STRAGGLERS
    slow = stragglers(
        {device: work.throughput for device, work in devices.items() if per_device},
        straggler_tolerance_percent,
    )
    # one stressor in a window: one unit
    unit = next((work.unit for work in devices.values()), "")
    warnings += [
        f"{where}: {device} ran {rate:.4g} {unit}, below {floor.value:.4g} ({floor.said}); "
        "accept's compute and memory checks fail a GPU below it"
        for device, rate, floor in below_floor(
            {device: work.throughput for device, work in devices.items()}, floors
        )
    ]
    return WindowFigures(
        window=record.window,
        stressor=stressor,
        seconds=record.seconds,
        unit=unit,
        throughput={device: work.throughput for device, work in sorted(devices.items())},
        digest=majority,
        seed=record.seed,
        load={
            device: {k: float(v) for k in _LOAD_FIGURES if (v := getattr(work.load, k)) is not None}
            for device, work in sorted(devices.items())
        },
        clock_events={
            device: dict(work.clock_events)
            for device, work in sorted(devices.items())
            if work.clock_events
        },
        counter_growth=growth,
        events=[event.describe() for event in record.events],
        correctness=correctness,
        hardware=hardware,
        stragglers=[
            f"{where}: {s.gpu} is a straggler, {s.value:.4g} {unit} is "
            f"{s.deviation_percent:+.1f}% against the node's confirmed best {s.reference:.4g}"
            for s in slow
        ],
        warnings=warnings,
    )


def _correctness(where: str, devices: Mapping[str, DeviceWindow]) -> tuple[list[str], str | None]:
    """A device that changed its result within the window, one whose bits differ from the
    majority (with the first differing row), no majority, and a result outside its reference;
    and the majority's digest."""
    found = [
        f"{where}: {device} changed its result within the window (first and last iterations "
        "differ bit for bit)"
        for device, work in sorted(devices.items())
        if not work.repeats_agree
    ]
    verdict = judge_digests({device: work.digest for device, work in devices.items()})
    if verdict.majority is None and verdict.differing:
        found.append(
            f"{where}: the devices disagree with no majority ({', '.join(verdict.differing)}): "
            "the float64 reference must decide"
        )
    elif verdict.differing:
        for device in verdict.differing:
            row = devices[device].differing_row
            found.append(
                f"{where}: {device} computed other bits than the majority "
                f"({', '.join(verdict.agreeing)})"
                + (f", first in row {row}" if row is not None else "")
            )
    found += [
        f"{where}: {device} is wrong against the reference ({work.reference.rule}): "
        f"{work.reference.outside}"
        for device, work in sorted(devices.items())
        if work.reference is not None and work.reference.outside is not None
    ]
    return found, verdict.majority
