"""A warm worker: one process per GPU (or for the CPU twin) that runs checks in turn.

The worker starts with torch imported (forked from the server in `gpuaccept.distributed.children`)
and makes its GPU's CUDA context once, then runs whatever the suite sends: a check, or its part
of a rank check (one rank of a process group). It leads its own process group (the suite kills
the whole group after a timeout, rank processes included), dies with the suite, and watches its
GPU's NVML events for as long as it lives.

This module runs in the child; `gpuaccept.suite.pool` is the parent's side.
"""

from __future__ import annotations

import datetime
import gc
import importlib
import multiprocessing
import os
import signal
import threading
import time
import traceback
from dataclasses import dataclass, field
from multiprocessing.connection import wait
from pathlib import Path
from typing import Any

from gpuaccept.probe.nvml_events import EventWatcher, GpuEvent

# The slot of the worker that owns no GPU: it makes no CUDA context (for checks that need the
# GPUs to themselves) and watches every GPU's NVML events meanwhile.
HOST_SLOT = -1


@dataclass(frozen=True)
class WorkerSpec:
    slot: int
    device_mode: str  # "cuda" or "cpu"
    device_index: int | None  # the GPU this worker owns (None: the CPU twin)
    gpu_uuid: str | None = None  # the same GPU as NVML names it, for its event watcher


@dataclass(frozen=True)
class Job:
    """One unit of work: a check (kind "check") or one rank of a rank check (kind "rank")."""

    kind: str
    name: str  # the check's name, for events and messages
    target: str  # "module:function"
    arguments: tuple[Any, ...] = ()
    rank: int = 0
    world: int = 1
    store: str = ""  # file store path of the rank job's process group
    backend: str = ""
    timeout_seconds: float = 60.0


@dataclass(frozen=True)
class Reply:
    ok: bool
    value: Any  # the function's return value, or the error text when not ok
    seconds: float
    events: list[GpuEvent] = field(default_factory=list)


def idle() -> None:
    """A job that does nothing: its reply carries the events the worker's watcher has seen."""


def resolve_target(target: str) -> Any:
    module, _, function = target.partition(":")
    return getattr(importlib.import_module(module), function)


def die_with_parent() -> None:
    """Kill this worker's process group (itself and any rank it started) when the suite's process
    dies, however it dies, even inside a hung check: no orphan keeps holding a GPU.

    The worker is forked by the forkserver, which outlives the suite while any child lives, so
    Linux's parent-death signal would watch the wrong process. The suite is the worker's
    multiprocessing parent, under either start method: its sentinel turns readable once the
    suite is gone.
    """
    parent = multiprocessing.parent_process()
    if parent is not None:
        sentinel = parent.sentinel

        def watch() -> None:
            wait([sentinel])
            os.killpg(os.getpgrp(), signal.SIGKILL)

        threading.Thread(target=watch, name="gpuaccept-parent-watch", daemon=True).start()


def error_text(error: BaseException) -> str:
    """`TypeName: message at file.py:line`, for a check's ERROR."""
    last = traceback.extract_tb(error.__traceback__)[-1:]
    where = f" at {Path(last[0].filename).name}:{last[0].lineno}" if last else ""
    return f"{type(error).__name__}: {error}{where}"


def _start_watcher(spec: WorkerSpec) -> EventWatcher | None:
    """Watch this worker's GPU; a worker that owns none (the first one in CPU mode, so a forced
    `--device cpu` run on a GPU node still hears of XIDs, and the host worker that runs while
    the GPU workers are stopped) watches every NVIDIA GPU NVML sees."""
    from gpuaccept.probe.hardware import load_nvml

    if spec.gpu_uuid is None and spec.slot not in (0, HOST_SLOT):
        return None
    watcher = EventWatcher(load_nvml, [spec.gpu_uuid] if spec.gpu_uuid else None)
    watcher.start()
    return watcher


def _run_rank(job: Job, device_mode: str) -> Any:
    import torch.distributed as dist

    dist.init_process_group(
        job.backend,
        init_method=f"file://{job.store}",
        rank=job.rank,
        world_size=job.world,
        timeout=datetime.timedelta(seconds=max(job.timeout_seconds, 1.0)),
    )
    try:
        return resolve_target(job.target)(job.rank, job.world, *job.arguments)
    finally:
        dist.destroy_process_group()


def _tidy(device_mode: str) -> None:
    """Free what the last job left, so the next check sees the GPU's memory as free."""
    gc.collect()
    if device_mode == "cuda":
        import torch

        torch.cuda.empty_cache()


def worker_main(connection: Any, spec: WorkerSpec) -> None:
    """The worker's life: warm up, say ready, then run jobs until told to stop or orphaned."""
    os.setsid()  # lead a process group: a timeout kills the ranks a check started, too
    die_with_parent()
    # The terminal's Ctrl-C goes to the suite, which decides; the worker must not die of it.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    import torch

    if spec.device_mode == "cuda" and spec.device_index is not None:
        from gpuaccept.probe.hardware import list_cuda_gpus
        from gpuaccept.probe.numa import run_near

        # before the context and any pinned buffer: they are allocated near the CPU that asks
        gpu = next((g for g in list_cuda_gpus() if g.index == spec.device_index), None)
        run_near(gpu.pci_bus_id if gpu else None)
        torch.cuda.set_device(spec.device_index)
        torch.empty(1, device="cuda").add_(1)  # make the context now, not inside a timed check
        torch.cuda.synchronize()
    watcher = _start_watcher(spec)
    connection.send(("ready", os.getpid()))
    while True:
        try:
            job = connection.recv()
        except (EOFError, OSError):
            break
        if job is None:
            break
        if watcher is not None:
            watcher.during = job.name
        started = time.monotonic()
        try:
            if job.kind == "rank":
                value = _run_rank(job, spec.device_mode)
            else:
                value = resolve_target(job.target)(*job.arguments)
            reply = Reply(True, value, time.monotonic() - started)
        except BaseException as error:
            reply = Reply(False, error_text(error), time.monotonic() - started)
        if watcher is not None:
            watcher.during = None
        events = watcher.drain() if watcher is not None else []
        try:
            connection.send(Reply(reply.ok, reply.value, reply.seconds, events))
        except Exception as error:  # the value would not pickle: say so rather than vanish
            connection.send(
                Reply(False, f"result could not be sent: {error}", reply.seconds, events)
            )
        _tidy(spec.device_mode)
    if watcher is not None:
        watcher.stop()
