"""What `gpuaccept accept` is asked to do: every value its options give, already parsed.

The request holds its own values to the ranges the options have (a caller without Typer gets
the same bounds, each refused in one line naming the option); what needs the node or the files to
judge, the combinations of options and the one-node-only outputs, is refused by the plan
(commands/accept/plan.py). The defaults are the options'.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from gpuaccept.errors import InputError

# option -> (least, most) as cli/accept.py declares them (None: unbounded)
_BOUNDS: dict[str, tuple[float | None, float | None]] = {
    "expect_gpus": (0, None),
    "check_timeout": (1, None),
    "dcgm": (0, 4),
    "baseline_runs": (1, None),
    "min_busbw": (0, None),
    "min_allgather_busbw": (0, None),
    "min_alltoall_busbw": (0, None),
    "expect_nics": (0, None),
    "expect_nic_rate": (0, None),
    "expect_nvme": (0, None),
    "rails_tolerance": (0, 99),
}
_PATHS = (
    "baseline",
    "record_baseline",
    "rules",
    "node_profile",
    "topology",
    "report_dir",
    "junit",
    "evidence",
)


@dataclass(frozen=True)
class AcceptRequest:
    """One accept run as asked for; strings where the options are choices (level, device)."""

    # what to run
    level: str = "standard"  # quick, standard or full
    only: Sequence[str] = ()
    skip: Sequence[str] = ()
    device: str = "auto"  # auto, cuda or cpu
    expect_gpus: int | None = None
    check_timeout: float | None = None
    dcgm: int | None = None  # dcgmi diag -r N; 0: never; None: the level's default
    # judging
    baseline: Path | None = None
    record_baseline: Path | None = None
    baseline_runs: int = 3
    rules: Path | None = None
    min_busbw: float | None = None
    min_allgather_busbw: float | None = None
    min_alltoall_busbw: float | None = None
    # the node beyond its GPUs
    node_profile: Path | None = None
    expect_nics: int | None = None
    expect_nic_rate: float | None = None
    expect_nvme: int | None = None
    # across nodes
    pairwise: bool = False
    isolate: bool = False
    rails: bool = False
    rails_tolerance: float | None = None
    topology: Path | None = None
    # outputs
    report_dir: Path | None = None
    junit: Path | None = None
    evidence: Path | None = None
    as_json: bool = False  # the report goes to stdout at the end (the caller prints it)
    # history
    history: str | None = None
    no_history: bool = False
    drop_tolerance: float | None = None
    fail_on_drop: bool = False

    def __post_init__(self) -> None:
        for name in ("only", "skip"):
            if isinstance(getattr(self, name), str):  # a string is a sequence of letters
                raise InputError(f"--{name}: give a list of check names, not one string")
        for name in _PATHS:  # a path may come as text from a caller; held as a Path
            value = getattr(self, name)
            if isinstance(value, str):
                object.__setattr__(self, name, Path(value))
        for name, (least, most) in _BOUNDS.items():
            value = getattr(self, name)
            if value is None:
                continue
            flag = "--" + name.replace("_", "-")
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise InputError(f"{flag}: a number, not {value!r}")
            if not math.isfinite(value):
                raise InputError(f"{flag}: must be a finite number (got {value})")
            if (least is not None and value < least) or (most is not None and value > most):
                within = f"at least {least:g}" if most is None else f"{least:g} to {most:g}"
                raise InputError(f"{flag} {value:g}: give {within}")

    def min_other_busbw(self) -> dict[str, float]:
        """--min-allgather-busbw and --min-alltoall-busbw by collective: "all_gather" -> GB/s."""
        return {
            collective: floor
            for collective, floor in (
                ("all_gather", self.min_allgather_busbw),
                ("all_to_all", self.min_alltoall_busbw),
            )
            if floor is not None
        }
