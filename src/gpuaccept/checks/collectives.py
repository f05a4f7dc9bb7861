"""collectives: all-reduce across every local GPU (NCCL) or 2 CPU ranks (gloo): exact results
and nccl-tests bus bandwidth."""

from __future__ import annotations

from gpuaccept.checks.context import CheckContext
from gpuaccept.checks.judging import Findings, Target, measurement_targets
from gpuaccept.distributed.local_ranks import RanksFailed, RanksTimedOut, run_ranks
from gpuaccept.measure.collectives import AllReduceSpec, all_reduce_rank
from gpuaccept.results import CheckResult

CPU_TWIN_RANKS = 2


def world(context: CheckContext) -> tuple[int, str, Target]:
    """(ranks, backend, the device whose model the figures are judged as)."""
    if context.cpu_mode:
        return CPU_TWIN_RANKS, "gloo", Target(None, "cpu")
    targets = measurement_targets(context)
    return len(targets), "nccl", targets[0]


def run(context: CheckContext) -> CheckResult:
    import torch.distributed as dist

    settings = context.settings
    findings = Findings("collectives", "COLLECTIVES")
    ranks, backend, target = world(context)
    if backend == "nccl" and not dist.is_nccl_available():
        findings.failures.append("NCCL is not available in this torch")
        return findings.conclude("")
    spec = AllReduceSpec(
        settings.allreduce_bytes,
        settings.allreduce_check_iterations,
        warmup=3,
        repeats=settings.allreduce_repeats,
    )
    findings.details = {"ranks": ranks, "backend": backend, "bytes": spec.nbytes}
    try:
        figure = run_ranks(all_reduce_rank, ranks, spec, settings.rank_timeout_seconds, backend)[0]
    except (RanksTimedOut, RanksFailed) as error:
        findings.failures.append(f"all_reduce on {ranks} {backend} rank(s): {error}")
        return findings.conclude("")
    findings.record(target, "allreduce_wrong_elements", figure.wrong_elements, "elements")
    findings.record(target, "allreduce_algbw_gbps", figure.algbw_gbps, "GB/s")
    if figure.wrong_elements:
        findings.failures.append(
            f"all_reduce returned {figure.wrong_elements} wrong element(s) over "
            f"{spec.check_iterations} checked iterations on {ranks} rank(s)"
        )
    if ranks > 1:
        findings.judge(context, target, "allreduce_busbw_gbps", figure.busbw_gbps, "GB/s")
        summary = f"busbw {figure.busbw_gbps:.2f} GB/s"
    else:
        summary = "1 rank: correctness only, no bus bandwidth"
    return findings.conclude(
        f"all_reduce exact on {ranks} {backend} rank(s) ({spec.nbytes / 2**20:g} MiB), {summary}"
    )
