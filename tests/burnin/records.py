"""Window records as a run writes them, for the checkpoint and re-judging tests."""

from __future__ import annotations

import hashlib
import socket
from typing import Any

from gpuaccept.burnin.checkpoint import NodeIdentity, RunBinding
from gpuaccept.burnin.evidence import DeviceWindow, StoredLoad, WindowRecord
from gpuaccept.burnin.plan import BurnInPlan, BurnInProgress, window_seed

GOOD = hashlib.sha256(b"the majority's bits").hexdigest()
BAD = hashlib.sha256(b"one flipped bit").hexdigest()


def device(throughput: float = 800.0, digest: str = GOOD, **extra: Any) -> DeviceWindow:
    return DeviceWindow(
        throughput=throughput, unit="TFLOPS", digest=digest, repeats_agree=True, **extra
    )


def record(
    plan: BurnInPlan, window: int, devices: dict[str, DeviceWindow], seed: int = 0, **extra: Any
) -> WindowRecord:
    return WindowRecord(
        window=window,
        stressor=plan.stressor(window),
        seconds=plan.seconds_of(window),
        seed=window_seed(seed, window),
        devices=devices,
        **extra,
    )


def binding(
    plan: BurnInPlan,
    devices: list[str],
    *,
    seed: int = 0,
    uuids: list[str | None] | None = None,
    hostname: str | None = None,
) -> RunBinding:
    return RunBinding(
        plan=plan,
        seed=seed,
        node=NodeIdentity(hostname=hostname or socket.gethostname(), gpu_uuids=uuids or []),
        devices=devices,
        straggler_tolerance_percent=10.0,
    )


def slowed(load: dict[str, Any]) -> StoredLoad:
    return StoredLoad.model_validate(load)


def as_run(progress: BurnInProgress) -> BurnInProgress:
    """`progress` with the times a run that recorded its windows would have: begun as long ago
    as its windows lasted (and a second more), and run that long (hand-made records took none)."""
    from datetime import UTC, datetime, timedelta

    progress.earlier_seconds = progress.load_seconds
    progress.started_at = datetime.now(UTC) - timedelta(seconds=progress.load_seconds + 1)
    return progress
