"""What `gpuaccept accept` is asked to do: every value its options give, already parsed.

The parser has done its part (types, ranges, finite numbers); what needs the node or the files
to judge, the combinations of options and the one-node-only outputs, is refused once, by the
plan (commands/accept/plan.py), with the one line a user gets. The defaults are the options'.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path


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
