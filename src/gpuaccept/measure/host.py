"""The host side of a GPU node (issue #24): memory copy bandwidth on each NUMA node, and the
scratch file system's sequential write and read throughput and fsync latency (how fast a
checkpoint is written). Measures only; `checks.host` judges.
"""

from __future__ import annotations

import contextlib
import os
import re
import statistics
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

_CHUNK_BYTES = 4 * 1024 * 1024
FSYNC_SAMPLES = 50


@contextlib.contextmanager
def pinned_to(cpus: set[int]) -> Iterator[set[int]]:
    """This process on `cpus` (those of them it may use) for the block, then as it was."""
    kept = os.sched_getaffinity(0)
    allowed = kept & cpus
    if allowed:
        os.sched_setaffinity(0, allowed)
    try:
        yield allowed
    finally:
        os.sched_setaffinity(0, kept)


def memory_copy_gbps(cpus: set[int], size_bytes: int, repeats: int = 3) -> float:
    """Host memory copy bandwidth on a NUMA node: the process pinned to its CPUs, the buffers
    made there (the kernel places pages where they are first touched), copied by torch on one
    thread per CPU; bytes read plus written per second, the best of `repeats`."""
    import torch

    with pinned_to(cpus) as allowed:
        threads = torch.get_num_threads()
        torch.set_num_threads(max(1, len(allowed or cpus)))
        try:
            source = torch.ones(size_bytes // 4, dtype=torch.float32)
            target = torch.empty_like(source)
            target.copy_(source)  # touch: the pages are placed now, not while timed
            best = float("inf")
            for _ in range(repeats):
                started = time.perf_counter()
                target.copy_(source)
                best = min(best, time.perf_counter() - started)
        finally:
            torch.set_num_threads(threads)
    return 2 * size_bytes / best / 1e9


@dataclass(frozen=True)
class ScratchFigures:
    directory: str
    write_gbps: float
    read_gbps: float
    fsync_p50_ms: float
    fsync_p99_ms: float
    cached_read: bool  # the kernel kept the file cached: the read speed is memory's, not the disk's


# File systems whose files live in memory: a read from them is memory's speed, whatever
# posix_fadvise says (it succeeds on tmpfs and drops nothing).
MEMORY_FILE_SYSTEMS = frozenset({"tmpfs", "ramfs"})
_MOUNTS_BYTES = 4 * 1024 * 1024


def file_system_type(directory: Path, mounts: Path = Path("/proc/self/mounts")) -> str | None:
    """The type of the file system `directory` is on (the longest mount point above it in
    /proc/self/mounts, proc(5)); None when that cannot be read."""
    try:
        with mounts.open("rb") as stream:
            text = stream.read(_MOUNTS_BYTES).decode(errors="replace")
        target = directory.resolve()
    except (OSError, RuntimeError):
        return None
    best: tuple[int, str] | None = None
    for line in text.splitlines():
        fields = line.split()
        if len(fields) < 3:
            continue
        # mount points escape spaces and tabs as octal (\040, \011)
        point = Path(fields[1].replace("\\040", " ").replace("\\011", "\t"))
        if target == point or point in target.parents:
            depth = len(point.parts)
            if best is None or depth >= best[0]:
                best = (depth, fields[2])
    return best[1] if best else None


def _drop_cache(descriptor: int) -> bool:
    """Ask the kernel to drop the file's clean pages, so it is read from the device."""
    try:
        os.posix_fadvise(descriptor, 0, 0, os.POSIX_FADV_DONTNEED)
    except (AttributeError, OSError):
        return False
    return True


def scratch_io(directory: Path, size_bytes: int) -> ScratchFigures:
    """Write `size_bytes` sequentially and fsync, read it back from the device, then time
    FSYNC_SAMPLES 4 KiB writes each followed by fsync; the file is removed after."""
    chunk = os.urandom(_CHUNK_BYTES)
    handle, name = tempfile.mkstemp(prefix="gpuaccept-scratch-", dir=directory)
    try:
        started = time.perf_counter()
        written = 0
        while written < size_bytes:
            written += os.write(handle, chunk[: min(_CHUNK_BYTES, size_bytes - written)])
        os.fsync(handle)
        write_seconds = time.perf_counter() - started
        dropped = _drop_cache(handle)
        os.lseek(handle, 0, os.SEEK_SET)
        started = time.perf_counter()
        while os.read(handle, _CHUNK_BYTES):
            pass
        read_seconds = time.perf_counter() - started
        latencies = []
        block = os.urandom(4096)
        for _ in range(FSYNC_SAMPLES):
            started = time.perf_counter()
            os.write(handle, block)
            os.fsync(handle)
            latencies.append((time.perf_counter() - started) * 1000)
    finally:
        os.close(handle)
        with contextlib.suppress(OSError):
            os.unlink(name)
    ordered = sorted(latencies)
    return ScratchFigures(
        directory=str(directory),
        write_gbps=size_bytes / write_seconds / 1e9,
        read_gbps=size_bytes / read_seconds / 1e9,
        fsync_p50_ms=statistics.median(ordered),
        fsync_p99_ms=ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))],
        cached_read=not dropped or file_system_type(directory) in MEMORY_FILE_SYSTEMS,
    )


def cpu_mhz(root: Path) -> dict[int, float]:
    """The frequency each CPU may run at, in MHz: cpufreq's `scaling_max_freq` ("Maximum
    frequency the CPUs belonging to this policy are allowed to be running at (in kHz)",
    Documentation/admin-guide/pm/cpufreq.rst), else the hardware's `cpuinfo_max_freq`; empty
    where the kernel exposes no cpufreq (many VMs). Not `scaling_cur_freq`: an idle CPU under the
    powersave governor sits at its lowest clock, which says nothing of the node (issue #30)."""
    from gpuaccept.probe.sysfs import list_directory, read_int

    found = {}
    for cpu in list_directory(root / "sys" / "devices" / "system" / "cpu"):
        number = re.fullmatch(r"cpu(\d{1,6})", cpu.name)  # not cpufreq, not cpuidle
        khz = None
        for name in ("scaling_max_freq", "cpuinfo_max_freq") if number else ():
            khz = read_int(cpu / "cpufreq" / name, 10)
            if khz is not None:
                break
        if number and khz is not None and khz > 0:
            found[int(number.group(1))] = khz / 1000
    return found
