"""The sizes and durations of each level, on a GPU and in its CPU twin."""

from __future__ import annotations

from dataclasses import replace

from gpuaccept.checks.context import Settings
from gpuaccept.errors import InputError
from gpuaccept.suite.selection import LEVELS

MiB = 1024**2
GiB = 1024**3


_GPU_QUICK = Settings(
    matmul_size=8192,
    matmul_warmup=10,
    matmul_repeats=30,
    matmul_dtypes=("bf16", "fp32"),
    consistency_dtypes=("fp32", "bf16"),
    consistency_size=4096,
    consistency_iterations=20,
    sustained_seconds=0.0,
    membw_bytes=1 * GiB,
    membw_repeats=20,
    pattern_fraction=0.0,
    pattern_max_bytes=0,
    transfer_bytes=256 * MiB,
    transfer_repeats=10,
    smoke_samples=65536,
    smoke_epochs=1,
    smoke_batch_size=256,
    smoke_max_loss_ratio=0.5,
    allreduce_bytes=256 * MiB,
    allreduce_check_iterations=2,
    allreduce_repeats=20,
    ddp_epochs=1,
    rank_timeout_seconds=120.0,
)
_CPU_QUICK = Settings(
    matmul_size=512,
    matmul_warmup=2,
    matmul_repeats=5,
    matmul_dtypes=("fp32", "fp64"),
    consistency_dtypes=("fp32",),
    consistency_size=256,
    consistency_iterations=10,
    sustained_seconds=0.0,
    membw_bytes=32 * MiB,
    membw_repeats=5,
    pattern_fraction=0.0,
    pattern_max_bytes=0,
    transfer_bytes=32 * MiB,
    transfer_repeats=5,
    smoke_samples=4096,
    smoke_epochs=1,
    smoke_batch_size=64,
    smoke_max_loss_ratio=0.5,
    allreduce_bytes=1 * MiB,
    allreduce_check_iterations=2,
    allreduce_repeats=10,
    ddp_epochs=1,
    rank_timeout_seconds=60.0,
)


def level_settings(level: str, device_mode: str) -> Settings:
    """The sizes and durations of a level; the CPU twin runs the same logic on smaller work."""
    if level not in LEVELS:
        raise InputError(f"--level must be one of {', '.join(LEVELS)} (got {level!r})")
    base = _CPU_QUICK if device_mode == "cpu" else _GPU_QUICK
    if level == "quick":
        return base
    gpu = device_mode != "cpu"
    # All-reduce where NCCL reaches its peak (256 MiB is too small: nccl-tests #212): 1 GiB at
    # standard, 16 GiB at full (less where memory does not allow; the report says how much).
    standard = replace(
        base,
        allreduce_bytes=1 * GiB if gpu else base.allreduce_bytes,
        matmul_repeats=base.matmul_repeats * 2,
        matmul_dtypes=("bf16", "fp16", "tf32", "fp32", "fp64") if gpu else ("fp32", "fp64", "bf16"),
        consistency_iterations=base.consistency_iterations * 5,
        smoke_epochs=2,
        ddp_epochs=2,
    )
    if level == "standard":
        return standard
    return replace(
        standard,
        consistency_size=base.matmul_size,
        consistency_iterations=2000 if gpu else 50,
        sustained_seconds=60.0 if gpu else 6.0,
        pattern_fraction=0.9 if gpu else 1.0,
        pattern_max_bytes=(1024 * GiB) if gpu else 256 * MiB,
        smoke_epochs=5,
        ddp_epochs=5,
        allreduce_bytes=16 * GiB if gpu else 4 * MiB,
        allreduce_check_iterations=20 if not gpu else 5,
        allreduce_repeats=base.allreduce_repeats * 5 if not gpu else 50,
    )
