"""A burn-in's plan and its progress (issue #23): how long, in which windows, under which
stressor each window runs, and what a restarted job resumes from.

The plan is printed at the start and stored with the progress; a checkpoint written under one
plan is refused under another, by `burnin.checkpoint` (a different duration, window or rotation
would make the windows done mean something else). The load time a burn-in reports is the sum
of the windows it ran, so an eviction and a restart neither count the time the job was away nor
start the count over.
"""

from __future__ import annotations

import math
import re
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from gpuaccept.burnin.evidence import WindowRecord
from gpuaccept.errors import InputError

# The stressors in their default rotation. all-reduce joins only where there are several GPUs.
STRESSORS = ("gemm-bf16", "gemm-fp32", "hbm", "host-transfer", "all-reduce")
MULTI_GPU_ONLY = frozenset({"all-reduce"})
DEFAULT_WINDOW_SECONDS = 300.0  # five minutes, as the issue asks
_UNITS = {"s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}
_DURATION = re.compile(r"(\d+(?:\.\d+)?)([smhd])")
_MAX_SECONDS = 30 * 86400.0  # a month: longer than any burn-in contract (168 h at the most)
# A window shorter than a second measures its own start-up (the first GEMM, the sampler's first
# reading), not load; and `--duration 0.001s` would pass with "0s of load".
MIN_SECONDS = 1.0
# A week of one-minute windows. Every window is a checkpoint write and a line of the report's
# series; 30 days of 0.01 s windows (2.6e8 of them) would never finish writing either.
MAX_WINDOWS = 7 * 24 * 60


def parse_duration(text: str, flag: str) -> float:
    """Seconds for `90`, `30s`, `5m`, `24h`, `1h30m`, `7d`; anything else is an InputError."""
    spoken = text.strip().lower()
    if re.fullmatch(r"\d+(?:\.\d+)?", spoken):
        seconds = float(spoken)
    elif spoken and _DURATION.sub("", spoken) == "":
        seconds = sum(float(n) * _UNITS[unit] for n, unit in _DURATION.findall(spoken))
    else:
        raise InputError(f"{flag} {text!r}: expected a duration such as 90, 30s, 5m, 24h or 1h30m")
    if not (math.isfinite(seconds) and 0 < seconds <= _MAX_SECONDS):
        raise InputError(f"{flag} {text!r}: must be above 0 and at most 30 days")
    if seconds < MIN_SECONDS:
        raise InputError(
            f"{flag} {text!r}: at least 1s (a shorter window measures start-up, not load)"
        )
    return seconds


def spoken_duration(seconds: float) -> str:
    """Seconds as burn-ins are written: 86400 -> `24h`, 5400 -> `1h30m`, 90 -> `1m30s` (hours,
    never days: contracts say 24, 72 or 168 h)."""
    whole = round(seconds)
    if whole != seconds:
        return f"{seconds:g}s"
    parts = []
    for unit, size in (("h", 3600), ("m", 60), ("s", 1)):
        count, whole = divmod(whole, size)
        if count:
            parts.append(f"{count}{unit}")
    return "".join(parts) or "0s"


@dataclass(frozen=True)
class BurnInPlan:
    duration_seconds: float
    window_seconds: float
    stressors: tuple[str, ...]  # the rotation, one stressor per window

    @classmethod
    def build(
        cls,
        duration_seconds: float,
        window_seconds: float,
        gpu_count: int,
        schedule: list[str] | None = None,
    ) -> BurnInPlan:
        """The plan for `gpu_count` GPUs; `schedule` names the rotation (default: every
        stressor that applies). Refuses a window longer than the burn-in, an unknown stressor,
        all-reduce on one GPU, and more than `MAX_WINDOWS` windows."""
        if window_seconds > duration_seconds:
            raise InputError(
                f"--window {window_seconds:g} s is longer than --duration {duration_seconds:g} s"
            )
        windows = math.ceil(duration_seconds / window_seconds - 1e-9)
        if windows > MAX_WINDOWS:
            raise InputError(
                f"--duration {spoken_duration(duration_seconds)} in windows of "
                f"{spoken_duration(window_seconds)} is {windows} windows, more than the "
                f"{MAX_WINDOWS} a burn-in keeps (a week of one-minute windows): give a longer "
                "--window"
            )
        if schedule:
            unknown = [name for name in schedule if name not in STRESSORS]
            if unknown:
                raise InputError(
                    f"--schedule: unknown stressor {unknown[0]!r} (known: {', '.join(STRESSORS)})"
                )
            if gpu_count < 2 and any(name in MULTI_GPU_ONLY for name in schedule):
                raise InputError("--schedule: all-reduce needs at least two GPUs")
            rotation = tuple(schedule)
        else:
            rotation = tuple(s for s in STRESSORS if gpu_count > 1 or s not in MULTI_GPU_ONLY)
        return cls(duration_seconds, window_seconds, rotation)

    @property
    def window_count(self) -> int:
        """Windows in the whole burn-in; the last may be shorter than the others."""
        return math.ceil(self.duration_seconds / self.window_seconds - 1e-9)

    def stressor(self, window: int) -> str:
        """The stressor of window `window` (0-based): the rotation, round and round."""
        return self.stressors[window % len(self.stressors)]

    def seconds_of(self, window: int) -> float:
        """How long window `window` runs: a full window, or what is left of the duration."""
        return min(self.window_seconds, self.duration_seconds - window * self.window_seconds)

    def describe(self) -> list[str]:
        """The schedule as printed when a burn-in starts."""
        rounds = ", ".join(self.stressors)
        return [
            f"[BURNIN] {spoken_duration(self.duration_seconds)} of load in {self.window_count} "
            f"window(s) of {spoken_duration(self.window_seconds)}",
            f"[BURNIN] stressors in turn, one per window: {rounds}",
        ]

    def fingerprint(self) -> str:
        """What a checkpoint must have been written under to be resumed."""
        return f"{self.duration_seconds:g}s/{self.window_seconds:g}s/{','.join(self.stressors)}"


def window_seed(seed: int, window: int) -> int:
    """The seed of a window's work: the same on every device (and on every node run with the
    same --seed), new each window."""
    return seed * 100_003 + window


class WindowFigures(BaseModel):
    """What one finished window measured per device, and what it found (the time series the
    report draws and the checks judge)."""

    model_config = ConfigDict(frozen=True, extra="forbid", ser_json_inf_nan="strings")

    window: int = Field(ge=0)
    stressor: str
    seconds: float = Field(ge=0, allow_inf_nan=False)
    unit: str = ""
    throughput: dict[str, float] = Field(default_factory=dict)  # device -> the stressor's rate
    digest: str | None = None  # the result bits most devices computed (None: no majority)
    seed: int | None = None  # of the window's work (`window_seed`): the same work, the same bits
    load: dict[str, dict[str, float]] = Field(default_factory=dict)  # device -> power, clocks...
    clock_events: dict[str, dict[str, int]] = Field(default_factory=dict)  # device -> reason -> n
    counter_growth: list[dict[str, Any]] = Field(default_factory=list)  # per GPU, as NVML counts
    events: list[str] = Field(default_factory=list)  # NVML events seen in the window, described
    correctness: list[str] = Field(default_factory=list)  # wrong bits, no majority, reference
    hardware: list[str] = Field(default_factory=list)  # XID, ECC, NVLink, slowdown, lost device
    stragglers: list[str] = Field(default_factory=list)
    warnings: list[str] = Field(default_factory=list)

    @property
    def failures(self) -> list[str]:
        return [*self.correctness, *self.hardware, *self.stragglers]


class BurnInProgress(BaseModel):
    """A burn-in's progress: the plan it runs under and every finished window, judged, with the
    record each was judged from (what `burnin.checkpoint` saves; a resumed run judges the
    records again, never reads a verdict back)."""

    model_config = ConfigDict(extra="forbid")

    plan: str
    devices: list[str] = Field(default_factory=list)  # the devices it ran on, as labelled
    windows: list[WindowFigures] = Field(default_factory=list)
    records: list[WindowRecord] = Field(default_factory=list, exclude=True)
    # A burn-in resumed from its checkpoint is one run: it began when its first process did, and
    # lasted the wall seconds of each process up to its last checkpoint, plus this one's.
    started_at: datetime = Field(default_factory=lambda: datetime.now(UTC), exclude=True)
    earlier_seconds: float = Field(default=0.0, ge=0, exclude=True)
    resumed_at: float = Field(default_factory=time.monotonic, exclude=True)  # this process's

    def run_seconds(self) -> float:
        """Wall seconds the burn-in has run so far, over every process that ran it."""
        return self.earlier_seconds + (time.monotonic() - self.resumed_at)

    @property
    def load_seconds(self) -> float:
        """Load time actually run: the finished windows, not the wall time since the start."""
        return sum(window.seconds for window in self.windows)

    @property
    def next_window(self) -> int:
        return len(self.windows)

    def records_sha256(self) -> str:
        """The digest of the finished windows' records (what the checkpoint keeps): the same
        windows give the same digest, so a finished burn-in reported again from its checkpoint
        is found in the history (issue #30 §1)."""
        import hashlib
        import json

        canonical = json.dumps(
            [record.model_dump(mode="json") for record in self.records],
            sort_keys=True,
            separators=(",", ":"),
        )
        return hashlib.sha256(canonical.encode()).hexdigest()

    def record(self, figures: WindowFigures, record: WindowRecord | None = None) -> None:
        """Add a finished window (without its record, the progress can be judged and reported
        but not checkpointed)."""
        if figures.window != self.next_window or (record and record.window != figures.window):
            raise ValueError(f"window {figures.window} recorded after {self.next_window - 1}")
        self.windows.append(figures)
        if record is not None:
            self.records.append(record)
