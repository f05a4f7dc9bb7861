"""Bring gpuaccept's bytecode up to date before a benchmark times cold processes.

With PYTHONDONTWRITEBYTECODE set (the development machine sets it), a module edited since its
.pyc was written is compiled from source in every process that imports it: about 9 ms for
store/history.py, a cost an installed package (pip, pixi) never pays. compileall writes the
.pyc files whatever that variable says.
"""

from __future__ import annotations

import compileall
import os
from pathlib import Path


def compile_gpuaccept() -> str:
    """Compile the package's stale modules; a line saying so, for the benchmark's output."""
    import gpuaccept

    where = Path(gpuaccept.__file__).parent
    compileall.compile_dir(where, quiet=1)
    flag = os.environ.get("PYTHONDONTWRITEBYTECODE")
    return f"bytecode of {where} compiled first (PYTHONDONTWRITEBYTECODE={flag or 'unset'})"
