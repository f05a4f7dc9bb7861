"""What `burnin` is asked (every value its options give, typed) and what it answers.

The request holds the values as the user gave them: a duration is still "24h", a schedule still
"gemm-bf16,hbm". `plan` reads and refuses them once, in the order the command always has, so a
library caller and the CLI get the same one-line errors.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

from gpuaccept.commands.options import (
    DEVICE,
    HISTORY,
    JUNIT,
    NO_HISTORY,
    opt,
    report_dir_opt,
    rules_opt,
)

if TYPE_CHECKING:
    from gpuaccept.results import RunReport


_RUN, _OUT = "What to run", "Outputs"
_STRESSORS = "gemm-bf16, gemm-fp32, hbm, host-transfer, all-reduce"
_DURATION = "How long to load the GPUs: 10m, 24h, 1h30m, 3d (72 h)."
_WINDOW = "Length of one judged window; each window runs one stressor."
_WINDOW_DEFAULT = "5m, or the whole --duration when shorter"
_SCHEDULE = (
    f"The stressors' rotation, one per window (default: all of {_STRESSORS}; all-reduce only "
    "with several GPUs)."
)
_CPU_DEVICES = "CPU twin: how many workers stand in for GPUs (3 have a majority and a median)."
_CHECKPOINT = (
    "Save progress here after each window; a restarted job given the same file resumes at the "
    "next window (HTCondor eviction, Slurm preemption)."
)
_EVERY = "With --checkpoint-exit-code: windows run before each exit."
_EXIT_CODE = (
    "After every --checkpoint-every windows (but the last), exit CODE with the checkpoint "
    "written (HTCondor's checkpoint_exit_code: the job is restarted and resumes)."
)
_STRAGGLER = (
    "A device this much below the node's median in a window is a straggler; also the most a "
    "device's rate may drift down over the run."
)


@dataclass(frozen=True, kw_only=True)
class BurnInRequest:
    """A burn-in as `gpuaccept burnin` takes it; the defaults are the command's."""

    duration: Annotated[str, opt("--duration", "DURATION", _DURATION, panel=_RUN)]
    # None: 5m, or the whole duration when shorter
    window: Annotated[
        str | None, opt("--window", "DURATION", _WINDOW, panel=_RUN, show_default=_WINDOW_DEFAULT)
    ] = None
    schedule: Annotated[str | None, opt("--schedule", "S1,S2,...", _SCHEDULE, panel=_RUN)] = None
    device: Annotated[str, DEVICE] = "auto"  # auto, cuda or cpu (the CPU twin)
    cpu_devices: Annotated[
        int, opt("--cpu-devices", "N", _CPU_DEVICES, panel=_RUN, least=2, most=64)
    ] = 3
    seed: Annotated[
        int, opt("--seed", "N", "Seed of every device's work.", panel=_RUN, least=0, most=2**31 - 1)
    ] = 0
    checkpoint: Annotated[Path | None, opt("--checkpoint", "FILE", _CHECKPOINT, panel=_OUT)] = None
    checkpoint_every: Annotated[
        int | None, opt("--checkpoint-every", "N", _EVERY, panel=_OUT, least=1)
    ] = None
    checkpoint_exit_code: Annotated[
        int | None,
        opt("--checkpoint-exit-code", "CODE", _EXIT_CODE, panel=_OUT, least=4, most=255),
    ] = None
    # percent; None: the device mode's default
    straggler_tolerance: Annotated[
        float | None,
        opt(
            "--straggler-tolerance",
            "PERCENT",
            _STRAGGLER,
            panel="Judging",
            show_default="10 on GPUs (gpu-fryer's), 50 on the CPU twin",
        ),
    ] = None
    report_dir: Annotated[Path | None, report_dir_opt("with the time series")] = None
    junit: Annotated[Path | None, JUNIT] = None
    rules: Annotated[Path | None, rules_opt("Judging")] = None  # the site's action tables
    # an SQLite file or a PostgreSQL URI; None: the default history
    history: Annotated[str | None, HISTORY] = None
    no_history: Annotated[bool, NO_HISTORY] = False


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
