"""One small reader for sysfs (issue #30 §2): a run never hangs, never crashes and never fails
a node for the reader's own trouble.

sysfs can be slow, strange or hostile: a wedged driver's attribute blocks its reader; a fixture
tree (or a hand-made `GPUACCEPT_SYSFS_ROOT`) may hold a FIFO, a link to /dev/zero, a symlink
loop or a 3 GB file. Every attribute is read here, under three bounds:

- regular files only, opened without blocking (a FIFO or device is "not a regular file");
- at most `MAX_ATTRIBUTE_BYTES` (a sysfs attribute is at most one page, PAGE_SIZE: 4 KiB on x86,
  up to 64 KiB on arm64 kernels built for 64 KiB pages, as Grace's often are;
  Documentation/filesystems/sysfs.rst, "Reading/Writing Attribute Data");
- at most `READ_SECONDS` of wall time, in a daemon thread: a read still blocked then is left
  behind (it cannot be cancelled) and its directory is not read again by this process.

A probe that reads many attributes (every port of a node: 20,008 ports are 100,140 reads) runs
whole in one watched thread (`watched`): its reads are plain reads there, each stamped with its
path and start, and the caller waits on the probe, waking only when the read under way reaches
`READ_SECONDS`. Then that directory is marked wedged, the thread is left behind, and the probe
starts again in a fresh thread (every read is idempotent; the wedged directory now answers None
at once). A thread per read cost about 14 us each (1.4 s for those 100,140 reads, issue #50
§7); a watched read costs a stamp, and one thread is started per probe:
benchmarks/sysfs_reader.py measures both against a plain read. A read outside any probe keeps a
thread of its own.

What cannot be read is None for the caller, and its reason is kept in `problems()` for the
check to report as "unreadable", never as a hardware verdict.
"""

from __future__ import annotations

import os
import stat
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from gpuaccept.errors import InputError

T = TypeVar("T")

MAX_ATTRIBUTE_BYTES = 64 * 1024
READ_SECONDS = 2.0
SYSFS_ROOT_ENV = "GPUACCEPT_SYSFS_ROOT"

_lock = threading.Lock()
_wedged: set[Path] = set()  # directories where a read outlived READ_SECONDS
_problems: dict[str, str] = {}  # path -> why it was unreadable (first reason)


def sysfs_root() -> Path:
    """Where /sys is read from: `GPUACCEPT_SYSFS_ROOT` (a fixture tree), else the real one."""
    return Path(os.environ.get(SYSFS_ROOT_ENV) or "/")


def check_sysfs_root_setting() -> None:
    """Refuse (exit 2, before a run) a `GPUACCEPT_SYSFS_ROOT` that holds no `sys` directory: read
    as it stands it would say "0 ACTIVE ports", and a health check would drain the node."""
    value = os.environ.get(SYSFS_ROOT_ENV)
    if not value:
        return
    root = Path(value)
    if not root.is_dir():
        raise InputError(f"{SYSFS_ROOT_ENV}={value}: not a directory (a tree holding sys/)")
    if not (root / "sys").is_dir():
        raise InputError(f"{SYSFS_ROOT_ENV}={value}: holds no sys/ directory to read")


def problems(under: Path | None = None) -> dict[str, str]:
    """The attributes this process could not read (under `under`, a sysfs root), and why."""
    with _lock:
        found = dict(_problems)
    if under is None:
        return found
    return {path: why for path, why in found.items() if Path(path).is_relative_to(under)}


def _note(path: Path, why: str) -> None:
    with _lock:
        _problems.setdefault(str(path), why)


def _read_now(path: Path) -> tuple[str | None, str | None]:
    # Opened without blocking, a FIFO, a device or a huge file answers its first read at once
    # (nothing, EAGAIN, or more than a page), so the read comes first and the file's type is
    # asked only when the answer is not an attribute's: an fstat on every read cost a third of
    # a plain read (benchmarks/sysfs_reader.py).
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as error:
        return None, error.strerror or str(error)
    try:
        try:
            data = os.read(fd, MAX_ATTRIBUTE_BYTES + 1)
        except OSError as error:
            return None, _not_regular(fd) or error.strerror or str(error)
        if not data or len(data) > MAX_ATTRIBUTE_BYTES:
            why = _not_regular(fd)
            if why is not None:
                return None, why
        if len(data) > MAX_ATTRIBUTE_BYTES:
            return None, f"larger than {MAX_ATTRIBUTE_BYTES} bytes: not a sysfs attribute"
    finally:
        os.close(fd)
    return data.decode(errors="replace").strip(), None


def _not_regular(fd: int) -> str | None:
    """ "not a regular file" when the open file is not one (a FIFO, a device, a directory)."""
    try:
        regular = stat.S_ISREG(os.fstat(fd).st_mode)
    except OSError as error:
        return error.strerror or str(error)
    return None if regular else "not a regular file"


def _read_bounded(path: Path) -> tuple[str | None, str | None] | None:
    """(text, why not) of one read in a thread of its own; None when it did not answer within
    READ_SECONDS (a blocking file: the thread is left, a daemon, and never joined again)."""
    result: list[tuple[str | None, str | None]] = []
    reader = threading.Thread(target=lambda: result.append(_read_now(path)), daemon=True)
    reader.start()
    reader.join(READ_SECONDS)
    return result[0] if result else None


class _Abandoned(BaseException):
    """Unwinds a probe thread its caller stopped waiting for (BaseException: a probe's own
    `except Exception` must not swallow it)."""


class _Watch:
    """What a watched probe thread is reading now, and what it came to."""

    def __init__(self) -> None:
        self.reading: tuple[Path, float] | None = None  # (path, time.monotonic() at its start)
        self.abandoned = False
        self.done = threading.Event()
        self.result: object = None
        self.error: BaseException | None = None


_local = threading.local()
# Each restart follows a new wedged directory, so a node has few; past this many, the probe runs
# with a thread per read, which always ends
MAX_RESTARTS = 64


def _run_watched(fn: Callable[[], object], watch: _Watch) -> None:
    _local.watch = watch
    try:
        watch.result = fn()
    except _Abandoned:
        return
    except BaseException as error:  # handed to the caller, raised there
        watch.error = error
    watch.done.set()


def watched(fn: Callable[[], T]) -> T:
    """`fn()`, its sysfs reads bounded as one: run in a thread of its own, where each read is a
    plain read; one that outlives READ_SECONDS wedges its directory, and `fn` runs again in a
    fresh thread. Nested calls run inline in the outer probe's thread."""
    if getattr(_local, "watch", None) is not None:
        return fn()
    for _ in range(MAX_RESTARTS):
        watch = _Watch()
        threading.Thread(
            target=_run_watched, args=(fn, watch), daemon=True, name="gpuaccept-sysfs"
        ).start()
        while True:
            reading = watch.reading
            wait = (
                READ_SECONDS
                if reading is None
                else reading[1] + READ_SECONDS - time.monotonic() + 0.001
            )
            if watch.done.wait(max(wait, 0.0)):
                if watch.error is not None:
                    raise watch.error
                return watch.result  # type: ignore[return-value]
            reading = watch.reading
            if reading is not None and time.monotonic() - reading[1] >= READ_SECONDS:
                with _lock:
                    _wedged.add(reading[0].parent)
                _note(reading[0], f"did not answer within {READ_SECONDS:g} s")
                watch.abandoned = True
                break
    return fn()  # a thread per read from here: bounded, if slower


def read_attribute(path: Path) -> str | None:
    """The attribute's text, stripped; None when it cannot be read (the reason noted)."""
    # `_wedged` is read without the lock: a set's `in` is one step under the GIL, and an empty
    # set (every healthy node) spares the parent path's making on each read
    if _wedged and path.parent in _wedged:
        _note(path, f"its directory did not answer within {READ_SECONDS:g} s")
        return None
    watch: _Watch | None = getattr(_local, "watch", None)
    if watch is not None:
        watch.reading = (path, time.monotonic())
        text, why = _read_now(path)
        watch.reading = None
        if watch.abandoned:  # the caller gave up on this thread: nothing more from it
            raise _Abandoned
        if why is not None and not why.startswith("No such file"):
            _note(path, why)
        return text
    result = _read_bounded(path)
    if result is None:
        with _lock:
            _wedged.add(path.parent)
        _note(path, f"did not answer within {READ_SECONDS:g} s")
        return None
    text, why = result
    if why is not None and not why.startswith("No such file"):
        _note(path, why)
    return text


def read_optional(path: Path) -> str | None:
    """A file read with the same bounds (regular, a page, READ_SECONDS) whose absence or refusal
    is nobody's fault: an identity a machine may not expose to this user (DMI serials are root's).
    Nothing is noted among the node's unreadable attributes."""
    result = _read_bounded(path)
    return result[0] if result is not None else None


def read_int(path: Path, base: int = 0) -> int | None:
    """The attribute as an integer (`base` 0: decimal or 0x-prefixed), None otherwise."""
    text = read_attribute(path)
    try:
        return int(text, base) if text is not None else None
    except ValueError:
        if text is not None and not text.startswith("N/A"):
            _note(path, f"not a number: {text[:40]!r}")
        return None


def list_directory(directory: Path) -> list[Path]:
    """The entries of a directory, sorted; [] when it is missing or cannot be listed (a
    symlink loop, a file where a directory should be)."""
    try:
        return sorted(directory.iterdir())
    except OSError as error:
        if not isinstance(error, FileNotFoundError | NotADirectoryError):
            _note(directory, error.strerror or str(error))
        return []


def is_directory(path: Path) -> bool:
    try:
        return stat.S_ISDIR(path.stat().st_mode)
    except (OSError, ValueError):
        return False
