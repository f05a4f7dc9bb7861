"""What the workload's tests share: a CPU or GPU check context, a short tiny spec, a forged
rank record and the judge's findings for records."""

from __future__ import annotations

import dataclasses

from gpuaccept.checks import workload
from gpuaccept.checks.context import CheckContext, RanksOutcome
from gpuaccept.checks.judging import Findings, Target
from gpuaccept.llm.plans import Overrides, llm_spec
from gpuaccept.llm.train import LlmSpec, RankRecord
from gpuaccept.references import load_shipped_references
from gpuaccept.suite import level_settings

H200 = Target(0, "NVIDIA H200")
H100 = Target(0, "NVIDIA H100 80GB HBM3")


def context(mode: str = "cpu") -> CheckContext:
    return CheckContext(
        level="standard",
        device_mode=mode,
        settings=level_settings("standard", mode),
        references=load_shipped_references(),
    )


def short(**changes: object) -> LlmSpec:
    spec = llm_spec("tiny", "fp32", Overrides(steps=8))
    # 8 steps is a changed run (its convergence is not judged); the judge's tests hold it as one
    spec = dataclasses.replace(spec, judge_convergence=True)
    return dataclasses.replace(spec, warmup_steps=2, **changes)  # type: ignore[arg-type]


def record(rank: int = 0, **changes: object) -> RankRecord:
    base = RankRecord(
        spec=short(),
        rank=rank,
        world_size=2,
        device="cuda:0",
        device_name="NVIDIA H200",
        losses=[6.0, 4.0, 3.0, 2.0],
        step_seconds=[5.0, 1.0, 1.0, 1.0],
        compute_seconds=[0.5, 0.5, 0.5, 0.5],
        probe_losses=[6.0, 4.0],
        rerun_losses=[6.0, 4.0],
        determinism_unchecked=None,
        setup_seconds=2.0,
        wall_seconds=10.0,
    )
    return dataclasses.replace(base, **changes)  # type: ignore[arg-type]


def judged(
    spec: LlmSpec,
    records: list[RankRecord] | None,
    mode: str = "cuda",
    error: str = "",
    target: Target = H200,
):
    """Findings and figures of records that ran `spec` on `target`'s model."""
    findings = Findings("workload", "TRAIN")
    if records is not None:
        records = [dataclasses.replace(r, spec=spec) for r in records]
    outcome = RanksOutcome(len(records or [1]), "nccl", records, error or None)
    figures = workload.judge(context(mode), target, spec, outcome, findings)
    return findings, figures


def eight_ranks(**changes: object) -> list[RankRecord]:
    """Records of 8 ranks: the world torchtitan's 8b floor was measured on."""
    return [record(rank, **changes) for rank in range(8)]
