"""collectives: all-reduce, then all-gather and all-to-all (the MoE collective), across every
local GPU (NCCL) or 2 CPU ranks (gloo): exact results and nccl-tests bus bandwidth.

The suite runs `rank_body` in its warm workers, one rank each, and `conclude` on what they
return; `run` starts ranks of its own, for a check called on its own.
"""

from __future__ import annotations

from gpuaccept.checks.context import CheckContext, RanksOutcome
from gpuaccept.checks.judging import Findings, Target, measurement_targets
from gpuaccept.distributed.local_ranks import RanksFailed, RanksTimedOut, run_ranks
from gpuaccept.measure.collectives import (
    AllReduceFigure,
    AllReduceSpec,
    accept_collectives_rank,
)
from gpuaccept.results import CheckResult
from gpuaccept.sweeps.collectives import (
    FLOOR_OPTIONS,
    MIN_BUSBW_TOLERANCE,
    below_min_busbw,
)

CPU_TWIN_RANKS = 2


def world(context: CheckContext) -> tuple[int, str, Target]:
    """(ranks, backend, the device whose model the figures are judged as)."""
    if context.cpu_mode:
        return CPU_TWIN_RANKS, "gloo", Target(None, "cpu")
    targets = measurement_targets(context)
    return len(targets), "nccl", targets[0]


def allreduce_spec(context: CheckContext) -> AllReduceSpec:
    settings = context.settings
    return AllReduceSpec(
        settings.allreduce_bytes,
        settings.allreduce_check_iterations,
        warmup=3,
        repeats=settings.allreduce_repeats,
    )


def rank_body(rank: int, world_size: int, context: CheckContext) -> AllReduceFigure:
    """One rank's part, inside an initialised process group."""
    return accept_collectives_rank(rank, world_size, allreduce_spec(context))


def conclude(context: CheckContext, outcome: RanksOutcome) -> CheckResult:
    import torch.distributed as dist

    findings = Findings("collectives", "COLLECTIVES")
    ranks, backend = outcome.world_size, outcome.backend
    target = Target(None, "cpu") if context.cpu_mode else measurement_targets(context)[0]
    spec = allreduce_spec(context)
    findings.details = {"ranks": ranks, "backend": backend, "bytes": spec.nbytes}
    if backend == "nccl" and not dist.is_nccl_available():
        findings.failures.append("NCCL is not available in this torch")
        return findings.conclude("")
    if outcome.values is None:
        findings.failures.append(f"all_reduce on {ranks} {backend} rank(s): {outcome.error}")
        return findings.conclude("")
    figure: AllReduceFigure = outcome.values[0]
    findings.record(target, "allreduce_wrong_elements", figure.wrong_elements, "elements")
    findings.record(target, "allreduce_algbw_gbps", figure.algbw_gbps, "GB/s")
    if figure.wrong_elements:
        findings.failures.append(
            f"all_reduce returned {figure.wrong_elements} wrong element(s) over "
            f"{spec.check_iterations} checked iterations on {ranks} rank(s)"
        )
    findings.details["bytes"] = figure.nbytes  # what fitted in memory, not what was asked
    if figure.nbytes < spec.nbytes:
        findings.details["asked_bytes"] = spec.nbytes
    if ranks > 1:
        findings.judge(context, target, "allreduce_busbw_gbps", figure.busbw_gbps, "GB/s")
        summary = f"busbw {figure.busbw_gbps:.2f} GB/s"
        # the floors the options set, for the charts to draw beside the reference's
        floors = {
            f"{collective.replace('_', '')}_busbw_gbps": MIN_BUSBW_TOLERANCE * floor
            for collective, floor in context.busbw_floors.items()
        }
        if floors:
            findings.details["floors"] = floors
        if below_min_busbw(figure.busbw_gbps, context.min_busbw_gbps):
            # one size, so the sweep's average nccl-tests compares is this figure: as
            # nccl-tests -b SIZE -e SIZE (how aznhc runs it at 16 GiB) would judge it
            findings.failures.append(
                f"all_reduce busbw {figure.busbw_gbps:.2f} GB/s at {figure.nbytes / 2**20:g} MiB "
                f"below {MIN_BUSBW_TOLERANCE:g} x --min-busbw {context.min_busbw_gbps:g}"
            )
    else:
        summary = "1 rank: correctness only, no bus bandwidth"
        for collective in context.busbw_floors:
            findings.warnings.append(
                f"{FLOOR_OPTIONS[collective]} not judged: one rank has no bus bandwidth"
            )
    names = ["all_reduce"]
    for other in figure.others:
        short = other.collective.replace("_", "")  # allgather, alltoall: as allreduce_*
        names.append(other.collective)
        findings.record(target, f"{short}_wrong_elements", other.wrong_elements, "elements")
        findings.record(target, f"{short}_algbw_gbps", other.algbw_gbps, "GB/s")
        findings.judge(context, target, f"{short}_busbw_gbps", other.busbw_gbps, "GB/s")
        summary += f", {other.collective} {other.busbw_gbps:.2f} GB/s"
        if other.wrong_elements:
            findings.failures.append(
                f"{other.collective} returned {other.wrong_elements} wrong element(s) over "
                f"{spec.check_iterations} checked iterations on {ranks} rank(s)"
            )
        floor = context.min_other_busbw_gbps.get(other.collective)
        if ranks > 1 and below_min_busbw(other.busbw_gbps, floor):
            findings.failures.append(
                f"{other.collective} busbw {other.busbw_gbps:.2f} GB/s at "
                f"{other.nbytes / 2**20:g} MiB below {MIN_BUSBW_TOLERANCE:g} x "
                f"{FLOOR_OPTIONS[other.collective]} {floor:g}"
            )
    return findings.conclude(
        f"{', '.join(names)} exact on {ranks} {backend} rank(s) ({figure.nbytes / 2**20:g} MiB), "
        f"{summary}"
    )


def run(context: CheckContext) -> CheckResult:
    ranks, backend, _ = world(context)
    try:
        values = run_ranks(
            accept_collectives_rank,
            ranks,
            allreduce_spec(context),
            context.settings.rank_timeout_seconds,
            backend,
        )
    except (RanksTimedOut, RanksFailed) as error:
        return conclude(context, RanksOutcome(ranks, backend, None, str(error)))
    return conclude(context, RanksOutcome(ranks, backend, values))
