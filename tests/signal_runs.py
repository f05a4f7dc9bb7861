"""Starting the CLI as a process and signalling it once it has printed a given line."""

from __future__ import annotations

import os
import subprocess
import sys
import threading


def start_cli(*args: str) -> subprocess.Popen[str]:
    """`gpuaccept ARGS` with its lines unbuffered, so a line is read as soon as it is printed."""
    return subprocess.Popen(
        [sys.executable, "-m", "gpuaccept", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=os.environ | {"PYTHONUNBUFFERED": "1"},
    )


def stop_after(process: subprocess.Popen[str], prefix: str, signum: int) -> tuple[str, str]:
    """Read until a line starts with `prefix`, send `signum`; (all stdout, stderr)."""
    assert process.stdout is not None
    watchdog = threading.Timer(120, process.kill)
    watchdog.start()
    seen = []
    try:
        for line in process.stdout:
            seen.append(line)
            if line.startswith(prefix):
                process.send_signal(signum)
                break
        rest, errors = process.communicate(timeout=90)
    finally:
        watchdog.cancel()
    return "".join(seen) + rest, errors
