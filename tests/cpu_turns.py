"""Turns on the CPU for the runs that must not overlap: the burn-in twin's windows are judged on
their timing (a straggler is a device 40% slower than the node's best), and the LLM twin's
2-rank trainings keep both cores busy for up to a minute. Beside each other on a 2-core machine,
a healthy burn-in window read a device more than 40% slow (CI, 2026-11-26). One lock across
pytest-xdist's workers, and across any other pytest on this machine, as the GPU tests' lock."""

from __future__ import annotations

import fcntl
import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def held(path: Path) -> Iterator[None]:
    """The exclusive lock on `path` (made if missing) for the block: processes take turns."""
    with path.open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


@contextmanager
def cpu_turn() -> Iterator[None]:
    with held(Path(tempfile.gettempdir()) / f"gpuaccept-tests-cpu-turns-{os.getuid()}.lock"):
        yield
