"""Starting the CLI as a process and signalling it once it has printed a given line."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from collections.abc import Callable


def start_cli(*args: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    """`gpuaccept ARGS` with its lines unbuffered, so a line is read as soon as it is printed."""
    return subprocess.Popen(
        [sys.executable, "-m", "gpuaccept", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=os.environ | {"PYTHONUNBUFFERED": "1"} | (env or {}),
    )


def stop_after(
    process: subprocess.Popen[str],
    prefix: str,
    signum: int,
    before_signal: Callable[[], None] | None = None,
) -> tuple[str, str]:
    """Read until a line starts with `prefix`, call `before_signal`, send `signum`; (all stdout,
    stderr)."""
    assert process.stdout is not None
    watchdog = threading.Timer(120, process.kill)
    watchdog.start()
    seen = []
    try:
        for line in process.stdout:
            seen.append(line)
            if line.startswith(prefix):
                if before_signal is not None:
                    before_signal()
                process.send_signal(signum)
                break
        rest, errors = process.communicate(timeout=90)
    finally:
        watchdog.cancel()
    return "".join(seen) + rest, errors
