"""What `burnin` is asked (every value its options give, typed) and what it answers.

The request holds the values as the user gave them: a duration is still "24h", a schedule still
"gemm-bf16,hbm". `plan` reads and refuses them once, in the order the command always has, so a
library caller and the CLI get the same one-line errors.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from gpuaccept.results import RunReport


@dataclass(frozen=True)
class BurnInRequest:
    """A burn-in as `gpuaccept burnin` takes it; the defaults are the command's."""

    duration: str  # --duration: 10m, 24h, 1h30m, 3d
    window: str | None = None  # --window; None: 5m, or the whole duration when shorter
    schedule: str | None = None  # --schedule: the stressors' rotation, comma-separated
    device: str = "auto"  # --device: auto, cuda or cpu (the CPU twin)
    cpu_devices: int = 3  # --cpu-devices: the CPU twin's workers
    seed: int = 0
    checkpoint: Path | None = None
    checkpoint_every: int | None = None
    checkpoint_exit_code: int | None = None
    straggler_tolerance: float | None = None  # percent; None: the device mode's default
    report_dir: Path | None = None
    junit: Path | None = None
    rules: Path | None = None  # --rules: the site's action tables
    history: str | None = None  # an SQLite file or a PostgreSQL URI; None: the default history
    no_history: bool = False


@dataclass(frozen=True)
class BurnInResult:
    """How the burn-in ended.

    `report` is None when the run stopped for the scheduler's checkpoint (--checkpoint-every):
    windows are left to run, there is no outcome yet, and `exit_code` is --checkpoint-exit-code.
    Otherwise `exit_code` is the report's verdict's: 0 passed, 1 failed, 130/143 interrupted.
    """

    exit_code: int
    report: RunReport | None = None
    report_path: Path | None = None  # the JSON report written in --report-dir
