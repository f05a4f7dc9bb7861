"""What a burn-in keeps of each window (issue #30): the figures its verdicts are judged from,
never the verdicts themselves.

A checkpoint used to store each window's findings, and a resumed run trusted them: a file whose
failures were deleted by hand, or one copied from another node, passed. A `WindowRecord` holds
what each device measured (its rate, its result digest, its reference check, its load summary),
the devices lost, the NVML events and the error counters around the window; `window.judge_record`
judges it, the same way when the window has just run and when a resumed run reads it back. The
models refuse what no run can produce (a NaN or non-positive rate, a digest that is not a
SHA-256, a load figure that is not finite), so a damaged file is one line, not a verdict.

A record cannot prove its figures were measured: a file edited with consistent figures is judged
on them. What it can no longer do is carry a verdict that its figures contradict.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from gpuaccept.probe.nvml_events import GpuEvent
from gpuaccept.probe.nvml_health import CounterSnapshot

if TYPE_CHECKING:
    from gpuaccept.burnin.stress import WindowWork

Finite = Annotated[float, Field(allow_inf_nan=False)]
Count = Annotated[int, Field(ge=0, le=2**63 - 1)]
PortCounters = dict[str, dict[str, int | None]]  # InfiniBand/RoCE port -> counter -> value
_TEXT = 4096  # a device's label, a unit, a reason: words, never megabytes


class StoredReference(BaseModel):
    """A device's last result against its CPU reference (`stress.ReferenceCheck`)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    rule: str = Field(max_length=_TEXT)
    checked: Count
    worst_ratio: float = Field(ge=0)  # infinite where the bound is zero and the error is not
    outside: str | None = Field(default=None, max_length=_TEXT)


class StoredLoad(BaseModel):
    """A device's load samples in a window as `load_judging.summarise_trace` reduces them (and
    the GEMM's power hold), enough to judge them again."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    samples: Count = 0
    why: str | None = Field(default=None, max_length=_TEXT)
    seconds: Finite | None = None
    sm_clock_max_mhz: Finite | None = None
    loaded_samples: Count | None = None
    reason_hits: dict[Annotated[str, Field(max_length=_TEXT)], Count] = Field(default_factory=dict)
    sm_clock_median_mhz: Finite | None = None
    power_max_w: Finite | None = None
    power_p90_w: Finite | None = None
    power_limit_w: Finite | None = None
    power_held_share: Finite | None = Field(default=None, ge=0, le=1)
    temperature_max_c: Finite | None = None
    # the GPU's maximum operating (or slowdown) temperature; absent from files before 2026-11-29
    temperature_limit_c: Finite | None = Field(default=None, gt=0)
    temperature_limit_kind: Literal["maximum operating", "slowdown"] | None = None
    pcie_replays_grown: int | None = Field(default=None, ge=-(2**63), le=2**63 - 1)
    pcie_replay_minutes: Finite | None = Field(default=None, gt=0)
    pcie_replay_gen: int | None = Field(default=None, ge=1, le=16)
    pcie_replay_width: int | None = Field(default=None, ge=1, le=64)


class DeviceWindow(BaseModel):
    """What one device did in one window."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    throughput: Finite = Field(gt=0)
    unit: str = Field(max_length=64)
    digest: str = Field(pattern=r"^[0-9a-f]{64}$")  # SHA-256 of the result bits
    repeats_agree: bool
    # where its bits first parted from the majority's, found while the rows were at hand
    differing_row: Count | None = None
    reference: StoredReference | None = None
    load: StoredLoad = Field(default_factory=lambda: StoredLoad())
    clock_events: dict[Annotated[str, Field(max_length=_TEXT)], Count] = Field(default_factory=dict)


class WindowRecord(BaseModel):
    """One finished window: the stressor, the figures of every device, the devices lost, and the
    node's events and counters around it."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    window: Count
    stressor: str = Field(max_length=64)
    seconds: Finite = Field(gt=0)
    seed: int
    devices: dict[Annotated[str, Field(max_length=64)], DeviceWindow] = Field(default_factory=dict)
    lost: dict[Annotated[str, Field(max_length=64)], Annotated[str, Field(max_length=_TEXT)]] = (
        Field(default_factory=dict)
    )
    events: list[GpuEvent] = Field(default_factory=list)
    counters: tuple[CounterSnapshot, CounterSnapshot] | None = None
    port_counters: tuple[PortCounters, PortCounters] | None = None

    @field_validator("counters")
    @classmethod
    def _finite_times(
        cls, value: tuple[CounterSnapshot, CounterSnapshot] | None
    ) -> tuple[CounterSnapshot, CounterSnapshot] | None:
        if value is not None and not all(math.isfinite(snapshot.at) for snapshot in value):
            raise ValueError("a counter snapshot's time is not finite")
        return value


def record_window(
    window: int,
    stressor: str,
    seconds: float,
    seed: int,
    works: Mapping[str, WindowWork],
    *,
    lost: Mapping[str, str] | None = None,
    events: Sequence[GpuEvent] = (),
    counters: tuple[CounterSnapshot, CounterSnapshot] | None = None,
    port_counters: tuple[PortCounters, PortCounters] | None = None,
) -> WindowRecord:
    """The record of a window that has just run. A device that reports no positive, finite rate
    did no measurable work: it is recorded as lost, with what it reported."""
    from gpuaccept.burnin.judging import first_differing_row, judge_digests

    gone = dict(lost or {})
    kept: dict[str, WindowWork] = {}
    for device, work in works.items():
        if math.isfinite(work.throughput) and work.throughput > 0:
            kept[device] = work
        else:
            gone[device] = f"it measured no work (a rate of {work.throughput!r} {work.unit})"
    verdict = judge_digests({device: work.digest for device, work in kept.items()})
    rows: dict[str, int | None] = {}
    if verdict.majority is not None:
        reference = kept[verdict.agreeing[0]].row_digests
        rows = {d: first_differing_row(kept[d].row_digests, reference) for d in verdict.differing}
    return WindowRecord(
        window=window,
        stressor=stressor,
        seconds=seconds,
        seed=seed,
        devices={
            device: DeviceWindow(
                throughput=work.throughput,
                unit=work.unit,
                digest=work.digest,
                repeats_agree=work.repeats_agree,
                differing_row=rows.get(device),
                reference=None
                if work.reference is None
                else StoredReference(
                    rule=work.reference.rule,
                    checked=work.reference.checked,
                    worst_ratio=work.reference.worst_ratio,
                    outside=work.reference.outside,
                ),
                load=StoredLoad.model_validate(work.load),
                clock_events=dict(work.clock_events),
            )
            for device, work in sorted(kept.items())
        },
        lost=dict(sorted(gone.items())),
        events=list(events),
        counters=counters,
        port_counters=port_counters,
    )
