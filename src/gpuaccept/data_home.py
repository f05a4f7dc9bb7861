"""Where gpuaccept keeps a user's own files when no option or variable names the place."""

from __future__ import annotations

import os
from pathlib import Path


def user_data_path(variable: str, name: str, environ: dict[str, str] | None = None) -> Path:
    """$`variable` when set, else `gpuaccept/NAME` in the user's data directory ($XDG_DATA_HOME,
    else ~/.local/share)."""
    env = dict(os.environ) if environ is None else environ
    if env.get(variable):
        return Path(env[variable])
    data_home = env.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(data_home) / "gpuaccept" / name
