"""What a check is given: the level's settings, the device mode, references, the expectation,
the device it measures, and what happened so far in the run (NVML events)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from gpuaccept.actions import ActionRules
from gpuaccept.node_profile import NodeExpectation
from gpuaccept.probe.hardware import ExpectedGpus
from gpuaccept.probe.nvml_events import GpuEvent
from gpuaccept.probe.nvml_health import CounterSnapshot
from gpuaccept.references import ReferenceTable


@dataclass(frozen=True)
class Settings:
    """Sizes and durations for one level on one kind of device (see suite.levels)."""

    matmul_size: int
    matmul_warmup: int
    matmul_repeats: int
    matmul_dtypes: tuple[str, ...]
    consistency_dtypes: tuple[str, ...]
    consistency_size: int
    consistency_iterations: int
    sustained_seconds: float  # 0: no sustained-clock test
    membw_bytes: int
    membw_repeats: int
    pattern_fraction: float  # of free device memory; 0: no pattern test
    pattern_max_bytes: int
    transfer_bytes: int
    transfer_repeats: int
    smoke_samples: int
    smoke_epochs: int
    smoke_batch_size: int
    smoke_max_loss_ratio: float  # final loss must fall below this fraction of the initial loss
    allreduce_bytes: int
    allreduce_check_iterations: int
    allreduce_repeats: int
    ddp_epochs: int
    rank_timeout_seconds: float
    # the LLM workload's ranks when `workload` runs on its own (the suite's workers are held to
    # the check's timeout): model build, every step and the determinism rerun
    workload_timeout_seconds: float = 600.0


@dataclass(frozen=True)
class CheckContext:
    level: str
    device_mode: str  # "cuda" or "cpu"
    settings: Settings
    references: ReferenceTable
    expected: ExpectedGpus | None = None
    # The GPU a per-device check measures (the suite runs one per GPU at once); None: every GPU
    # this process can use (a check called on its own), or the CPU in CPU mode.
    device_index: int | None = None
    events: tuple[GpuEvent, ...] = ()  # NVML events seen in the run before this check
    start_counters: CounterSnapshot | None = None  # error counters when the run started
    dcgm_level: int | None = None  # dcgmi diag -r N; None: the level's default, 0: never
    min_busbw_gbps: float | None = None  # the operator's all-reduce floor (fails below 0.9 x)
    # the operator's floors for all-gather and all-to-all ("all_gather" -> GB/s), as above
    min_other_busbw_gbps: dict[str, float] = field(default_factory=dict)
    node: NodeExpectation | None = None  # what the node must have beyond its GPUs
    action_rules: ActionRules | None = None  # a site's action tables (accept --rules)
    # InfiniBand/RoCE port error counters when the run started ('mlx5_0:1' -> counter -> value)
    start_fabric_counters: dict[str, dict[str, int | None]] | None = None

    @property
    def cpu_mode(self) -> bool:
        return self.device_mode == "cpu"

    @property
    def busbw_floors(self) -> dict[str, float]:
        """Every floor the operator set, by collective ("all_reduce" first)."""
        floors = {"all_reduce": self.min_busbw_gbps, **self.min_other_busbw_gbps}
        return {collective: floor for collective, floor in floors.items() if floor is not None}


@dataclass(frozen=True)
class RanksOutcome:
    """What the ranks of a rank check returned (in rank order), or why they did not."""

    world_size: int
    backend: str
    values: list[Any] | None
    error: str | None = None
