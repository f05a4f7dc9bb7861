"""A burn-in's checkpoint on disk (issues #23, #30): what a restarted job resumes from, and
nothing a resumed run could mistake for a burn-in it did not do.

The file binds the run: the plan, the seed, the devices, and the node (its GPUs' UUIDs on a GPU
node, its hostname for the CPU twin: a container restarted on the same GPUs may have a new
hostname, and the GPUs are what a burn-in certifies). It holds each window's `WindowRecord`, never
a verdict: a resumed run judges every stored window again (`window.judge_record`), so findings
deleted from the file come back, and a window the plan could not have run (beyond the plan,
another stressor, another length, another seed, a device the run does not have) refuses the
file. Read as every user-handed file is: regular files only, size capped before reading.

A figure above the model's physical peak (references.toml `peaks`) refuses the file: no GPU
measures it. Where the node keeps a key (`GPUACCEPT_CHECKPOINT_KEY` names its file, which the
burn-in's account reads and its users do not), every checkpoint carries an HMAC-SHA256 of its
contents under that key, and a file whose digest is missing or does not match is refused: an
edit that stays within physics (a slow GPU's 500 made 800) is caught too. Without a key, a
checkpoint that carries a digest is refused (the key is the node's policy, not the file's).

Two burn-ins writing one checkpoint would interleave windows of two runs: the file is locked
for the run (an flock on `<checkpoint>.lock`, which names the holder's pid; the lock is the
kernel's, so a holder that dies releases it, and the stale file is harmless).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import hmac
import json
import math
import os
import stat
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, ValidationError

from gpuaccept.burnin.evidence import WindowRecord
from gpuaccept.burnin.floors import RateFloor
from gpuaccept.burnin.plan import BurnInPlan, BurnInProgress, window_seed
from gpuaccept.errors import InputError

if TYPE_CHECKING:
    from gpuaccept.actions import ActionRules

SCHEMA_VERSION: Literal[2] = 2
# A window of eight GPUs with their NVLink counters and eight ports' counters is about 18 KB of
# JSON (measured on a synthetic record of that shape): the longest plan, 10080 windows, about
# 180 MiB, 360 MiB on sixteen GPUs. A file past this cap is not a checkpoint this version writes.
MAX_CHECKPOINT_BYTES = 1024 * 1024 * 1024
FLAG = "--checkpoint"
KEY_ENV = "GPUACCEPT_CHECKPOINT_KEY"
MAX_KEY_BYTES = 4096
MIN_KEY_BYTES = 16  # 128 bits: HMAC's key should be at least the length of half its output
RUN_SECONDS_FLOOR = 0.9  # of the stored windows' load: less than this, the file is not honest


class NodeIdentity(BaseModel):
    """The node a burn-in runs on: its GPUs by UUID (None on the CPU twin) and its hostname."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    hostname: str = Field(max_length=255)
    gpu_uuids: list[str | None] = Field(default_factory=list)


class CheckpointFile(BaseModel):
    model_config = ConfigDict(extra="forbid")

    schema_version: Literal[2]
    plan: str = Field(max_length=4096)
    seed: int
    node: NodeIdentity
    devices: list[str]
    windows: list[WindowRecord]
    # absent from files written before 2026-11-27 (then: begun when the resuming run began, and
    # run for its windows' load seconds)
    started_at: AwareDatetime | None = None
    run_seconds: float = Field(default=0.0, ge=0, allow_inf_nan=False)
    # HMAC-SHA256 of the rest under the node's key (`GPUACCEPT_CHECKPOINT_KEY`), when it has one
    windows_hmac: str | None = Field(default=None, pattern=r"^[0-9a-f]{64}$")


LATER_LOAD_FIELDS = ("temperature_limit_c", "temperature_limit_kind")
_keys: dict[str, bytes] = {}  # key file -> key, read once a process (a run keeps its key)


def checkpoint_key() -> bytes | None:
    """The node's checkpoint key, from the file `GPUACCEPT_CHECKPOINT_KEY` names (None when it
    is not set); InputError, one line, for a file that is not one or holds too short a key."""
    from gpuaccept.input_files import read_input_bytes

    value = os.environ.get(KEY_ENV)
    if not value:
        return None
    if value not in _keys:
        key = read_input_bytes(Path(value), KEY_ENV, MAX_KEY_BYTES).strip()
        if len(key) < MIN_KEY_BYTES:
            raise InputError(
                f"{KEY_ENV}={value}: holds {len(key)} bytes of key, at least {MIN_KEY_BYTES} "
                "are needed (e.g. head -c 32 /dev/urandom | base64 > FILE)"
            )
        _keys[value] = key
    return _keys[value]


def _windows_hmac(key: bytes, saved: CheckpointFile) -> str:
    """The keyed digest of everything the file says, in one canonical JSON form (sorted keys),
    so a file re-encoded without a change still matches and any change does not."""
    body = saved.model_dump(mode="json", exclude={"windows_hmac"})
    # fields added after keyed files were first written join the digest only where they hold a
    # value, so a file signed before them still matches
    for window in body["windows"]:
        for device in window["devices"].values():
            for name in LATER_LOAD_FIELDS:
                if device["load"].get(name) is None:
                    device["load"].pop(name, None)
    text = json.dumps(body, sort_keys=True, separators=(",", ":"))
    return hmac.new(key, text.encode(), hashlib.sha256).hexdigest()


def _refuse_unkeyed(shown: str, saved: CheckpointFile, key: bytes | None) -> None:
    if key is None:
        if saved.windows_hmac is not None:
            raise InputError(
                f"{shown}: written with the node's key and {KEY_ENV} is not set: set it to the "
                "key file to resume, or give another checkpoint file"
            )
        return
    if saved.windows_hmac is None:
        raise InputError(
            f"{shown}: carries no keyed digest and this node keeps a key ({KEY_ENV}): not a "
            "checkpoint this node wrote; give another checkpoint file"
        )
    if not hmac.compare_digest(saved.windows_hmac, _windows_hmac(key, saved)):
        raise InputError(
            f"{shown}: its keyed digest does not match what it holds: changed after it was "
            "written, or written with another key; give another checkpoint file"
        )


@dataclass(frozen=True)
class RunBinding:
    """What the run resuming a checkpoint is: the file must have been written by the same."""

    plan: BurnInPlan
    seed: int
    node: NodeIdentity
    devices: list[str]
    straggler_tolerance_percent: float
    # not saved: read from references.toml for the GPUs of the run that resumes
    floors: Mapping[str, Mapping[str, RateFloor]] = field(default_factory=dict)
    # not saved: every window, stored ones too, is judged by the resuming run's --rules limits
    rules: ActionRules | None = None

    @property
    def on_gpus(self) -> bool:
        return any(uuid is not None for uuid in self.node.gpu_uuids)


def save_checkpoint(path: Path, progress: BurnInProgress, binding: RunBinding) -> None:
    """Written whole or not at all: an eviction mid-write leaves the previous checkpoint."""
    from gpuaccept.output_files import write_text_atomically

    if len(progress.records) != len(progress.windows):
        raise ValueError("a window without its record cannot be checkpointed")
    saved = CheckpointFile(
        schema_version=SCHEMA_VERSION,
        plan=binding.plan.fingerprint(),
        seed=binding.seed,
        node=binding.node,
        devices=binding.devices,
        windows=progress.records,
        started_at=progress.started_at,
        run_seconds=progress.run_seconds(),
    )
    key = checkpoint_key()
    if key is not None:
        saved.windows_hmac = _windows_hmac(key, saved)
    write_text_atomically(path, saved.model_dump_json() + "\n")


def resume(path: Path, binding: RunBinding) -> BurnInProgress:
    """The progress saved at `path`, every window judged again from its record (a fresh
    progress when there is no file); InputError naming the file when it is not this run's."""
    from gpuaccept.burnin.window import judge_record
    from gpuaccept.input_files import first_validation_error, read_input_bytes

    fresh = BurnInProgress(plan=binding.plan.fingerprint(), devices=list(binding.devices))
    key = checkpoint_key()  # read before the first window: a bad key file stops the run now
    if not path.exists() and not path.is_symlink():
        return fresh
    data = read_input_bytes(path, FLAG, MAX_CHECKPOINT_BYTES)
    shown = f"{FLAG} {path}"
    try:
        raw = json.loads(data)
    except (ValueError, RecursionError) as error:
        reason = str(error).splitlines()[0] if str(error) else type(error).__name__
        raise InputError(f"{shown}: not a burn-in checkpoint ({reason})") from None
    if not isinstance(raw, dict) or "windows" not in raw:
        raise InputError(f"{shown}: not a burn-in checkpoint (no windows in it)")
    version = raw.get("schema_version")
    if version != SCHEMA_VERSION:
        raise InputError(
            f"{shown}: written by another version of gpuaccept (checkpoint schema "
            f"{version!r}, this one reads {SCHEMA_VERSION}): give another checkpoint file"
        )
    try:
        saved = CheckpointFile.model_validate(raw)
    except ValidationError as error:
        raise InputError(
            f"{shown}: not a burn-in checkpoint ({first_validation_error(error)})"
        ) from None
    _refuse_unkeyed(shown, saved, key)
    _refuse_another_run(shown, saved, binding)
    records = saved.windows
    _refuse_impossible_windows(shown, records, binding)
    started_at, earlier_seconds = _time_so_far(shown, saved, fresh.started_at)
    tolerance = binding.straggler_tolerance_percent
    return BurnInProgress(
        plan=fresh.plan,
        devices=fresh.devices,
        windows=[
            judge_record(record, tolerance, binding.floors.get(record.stressor), binding.rules)
            for record in records
        ],
        records=list(records),
        started_at=started_at,
        earlier_seconds=earlier_seconds,
    )


def _time_so_far(shown: str, saved: CheckpointFile, now: datetime) -> tuple[datetime, float]:
    """When the burn-in began and how long its processes ran, as the file says; refused when the
    file's times could not be (a clock ahead, more time run than has passed, less than its own
    windows lasted): a report's dates and duration are never made up from a damaged file."""
    from gpuaccept.results import FUTURE_SKEW_SECONDS

    load = sum(record.seconds for record in saved.windows)
    if saved.started_at is None:  # an older file: its windows' load is what is known
        return now, load
    began = (now - saved.started_at).total_seconds()
    if began < -FUTURE_SKEW_SECONDS:
        raise InputError(
            f"{shown}: dated {saved.started_at.isoformat()}, after now: its clock is ahead; give "
            "another checkpoint file"
        )
    if saved.run_seconds > began + FUTURE_SKEW_SECONDS:
        raise InputError(
            f"{shown}: claims {saved.run_seconds:g} s run since {saved.started_at.isoformat()}, "
            f"{max(began, 0):.0f} s ago: not a checkpoint this burn-in wrote"
        )
    # A window's seconds are the plan's, not measured: one may end a little early, so only a
    # file claiming well under its windows' load is refused (a resume refused is a job held).
    if saved.run_seconds < load * RUN_SECONDS_FLOOR:
        raise InputError(
            f"{shown}: claims {saved.run_seconds:g} s run, its windows lasted {load:g} s: not a "
            "checkpoint this burn-in wrote"
        )
    return saved.started_at, saved.run_seconds


def _refuse_another_run(shown: str, saved: CheckpointFile, binding: RunBinding) -> None:
    plan = binding.plan.fingerprint()
    if saved.plan != plan:
        raise InputError(
            f"{shown} was written by a burn-in planned as {saved.plan}, not {plan}: give the "
            "same --duration, --window and --schedule, or another checkpoint file"
        )
    if saved.seed != binding.seed:
        raise InputError(
            f"{shown} was written with --seed {saved.seed}, not {binding.seed}: give the same "
            "--seed, or another checkpoint file"
        )
    node = binding.node
    if binding.on_gpus and saved.node.gpu_uuids != node.gpu_uuids:
        raise InputError(
            f"{shown} was written on other GPUs ({_uuids(saved.node)} on "
            f"{saved.node.hostname}), this node has {_uuids(node)}: a burn-in certifies the "
            "GPUs it loaded; give another checkpoint file"
        )
    if not binding.on_gpus and (saved.node.hostname, saved.node.gpu_uuids) != (
        node.hostname,
        node.gpu_uuids,
    ):
        raise InputError(
            f"{shown} was written on {saved.node.hostname}, this is {node.hostname}: a "
            "burn-in certifies the node it ran on; give another checkpoint file"
        )
    if saved.devices != binding.devices:
        raise InputError(
            f"{shown} was written on {', '.join(saved.devices) or 'no device'}, this burn-in "
            f"runs on {', '.join(binding.devices)}: give another checkpoint file"
        )


def _uuids(node: NodeIdentity) -> str:
    return ", ".join(uuid or "?" for uuid in node.gpu_uuids) or "no GPU"


def _refuse_impossible_windows(
    shown: str, records: list[WindowRecord], binding: RunBinding
) -> None:
    """A window this run's plan could not have produced refuses the file: a damaged or edited
    checkpoint is said to be one, never judged as if it were a burn-in."""
    plan, devices = binding.plan, set(binding.devices)
    fastest = fastest_peaks()
    if len(records) > plan.window_count:
        raise InputError(
            f"{shown}: holds {len(records)} windows, the plan has {plan.window_count}: not "
            "this burn-in's checkpoint"
        )
    for index, record in enumerate(records):
        where = f"{shown}: window {index + 1}"
        if record.window != index:
            raise InputError(f"{shown}: its windows are not in order")
        if record.stressor != plan.stressor(index):
            raise InputError(
                f"{where} ran {record.stressor!r}, the plan runs {plan.stressor(index)!r} there"
            )
        if not math.isclose(record.seconds, plan.seconds_of(index), rel_tol=1e-9):
            raise InputError(
                f"{where} lasted {record.seconds:g} s, the plan's window is "
                f"{plan.seconds_of(index):g} s"
            )
        if record.seed != window_seed(binding.seed, index):
            raise InputError(f"{where} ran under another seed than --seed {binding.seed}'s")
        named = set(record.devices) | set(record.lost)
        if named != devices or set(record.devices) & set(record.lost):
            raise InputError(
                f"{where} accounts for {', '.join(sorted(named)) or 'no device'}, this burn-in "
                f"runs on {', '.join(binding.devices)}, each either measured or lost"
            )
        _refuse_beyond_peak(where, record, binding.floors.get(record.stressor, {}), fastest)


def fastest_peaks() -> dict[str, tuple[float, str]]:
    """stressor -> the highest peak any model in references.toml has for its work, and whose:
    the ceiling for a device of no known model (the CPU twin, a GPU references.toml lacks)."""
    from gpuaccept.burnin.floors import STRESSOR_PEAKS
    from gpuaccept.references import load_shipped_references

    found: dict[str, tuple[float, str]] = {}
    for model in load_shipped_references().models.values():
        for stressor, key in STRESSOR_PEAKS.items():
            peak = model.peaks.get(key)
            if peak is not None and peak > found.get(stressor, (0.0, ""))[0]:
                found[stressor] = (peak, f"the {model.display}'s {peak:g} ({key})")
    return {
        stressor: (peak, f"{said}, the fastest GPU references.toml knows")
        for stressor, (peak, said) in found.items()
    }


def _refuse_beyond_peak(
    where: str,
    record: WindowRecord,
    floors: Mapping[str, RateFloor],
    fastest: Mapping[str, tuple[float, str]],
) -> None:
    """No GPU runs above its model's physical peak (references.toml `peaks`), and no device
    above the fastest model's: a stored figure above it was written by a hand, not measured
    (issue #50 §7: windows edited to 1e6 TFLOPS resumed and passed, held only to floors and to
    each other)."""
    for device, work in sorted(record.devices.items()):
        floor = floors.get(device)
        if floor is not None and floor.peak is not None:
            peak, said = floor.peak, floor.peak_said
        elif record.stressor in fastest:
            peak, said = fastest[record.stressor]
        else:
            continue
        if work.throughput > peak:
            raise InputError(
                f"{where}: {device} ran {work.throughput:.4g} {work.unit}, above {said}: no "
                "device measures that, the file was edited or damaged; give another checkpoint "
                "file"
            )


class CheckpointLock:
    """The checkpoint held by this process for the run (released when the process ends)."""

    def __init__(self, path: Path) -> None:
        self.path = path.with_name(path.name + ".lock")
        self._fd: int | None = None

    def acquire(self) -> CheckpointLock:
        """Hold the lock, or InputError naming the burn-in that holds it."""
        flags = os.O_RDWR | os.O_CREAT | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC
        try:
            fd = os.open(self.path, flags, 0o644)
        except OSError as error:
            raise InputError(
                f"{FLAG}: cannot lock it with {self.path}: {error.strerror or error}"
            ) from None
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            os.close(fd)
            raise InputError(f"{FLAG}: {self.path} is not a regular file; cannot lock with it")
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as error:
            holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "unknown"
            os.close(fd)
            if error.errno in (errno.EWOULDBLOCK, errno.EAGAIN):
                raise InputError(
                    f"{FLAG} {self.path.with_name(self.path.name.removesuffix('.lock'))}: in "
                    f"use by another burn-in (pid {holder}); wait for it, or give another "
                    "checkpoint file"
                ) from None
            raise InputError(f"{FLAG}: cannot lock {self.path}: {error.strerror}") from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        self._fd = fd
        return self

    def release(self) -> None:
        if self._fd is not None:
            with contextlib.suppress(OSError):
                os.close(self._fd)
            self._fd = None
