"""ddp: DistributedDataParallel training across every local GPU (or 2 gloo CPU ranks): the loss
falls on every rank and the parameters end identical everywhere."""

from __future__ import annotations

from gpuaccept.checks.collectives import world
from gpuaccept.checks.context import CheckContext
from gpuaccept.checks.judging import Findings
from gpuaccept.checks.train import smoke_spec
from gpuaccept.distributed.local_ranks import RanksFailed, RanksTimedOut, run_ranks
from gpuaccept.measure.training_smoke import ddp_smoke_rank
from gpuaccept.results import CheckResult


def run(context: CheckContext) -> CheckResult:
    limit = context.settings.smoke_max_loss_ratio
    spec = smoke_spec(context, context.settings.ddp_epochs)
    findings = Findings("ddp", "DDP")
    ranks, backend, target = world(context)
    findings.details = {"ranks": ranks, "backend": backend, "max_loss_ratio": limit}
    try:
        outcomes = run_ranks(
            ddp_smoke_rank, ranks, spec, context.settings.rank_timeout_seconds, backend
        )
    except (RanksTimedOut, RanksFailed) as error:
        findings.failures.append(f"DDP on {ranks} {backend} rank(s): {error}")
        return findings.conclude("")
    for rank, outcome in enumerate(outcomes):
        findings.record(target, f"rank{rank}_loss_final_over_initial", outcome.loss_ratio, "ratio")
        if not outcome.loss_ratio < limit:
            findings.failures.append(
                f"rank {rank}: loss fell only to {outcome.loss_ratio:.2f} of its start"
            )
    digests = {outcome.param_digest for outcome in outcomes}
    if len(digests) != 1:
        findings.failures.append(
            f"parameters differ across ranks after training ({len(digests)} distinct digests)"
        )
    return findings.conclude(
        f"{ranks} {backend} rank(s): loss fell below {limit:g} of its start, "
        "parameters identical on every rank"
    )
