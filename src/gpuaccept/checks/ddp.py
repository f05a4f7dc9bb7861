"""ddp: DistributedDataParallel training across every local GPU (or 2 gloo CPU ranks): the loss
falls on every rank and the parameters end identical everywhere.

As for collectives: the suite runs `rank_body` in its workers and `conclude` on the results;
`run` starts ranks of its own.
"""

from __future__ import annotations

from gpuaccept.checks.collectives import world
from gpuaccept.checks.context import CheckContext, RanksOutcome
from gpuaccept.checks.judging import Findings, Target, measurement_targets
from gpuaccept.checks.train import smoke_spec
from gpuaccept.distributed.local_ranks import RanksFailed, RanksTimedOut, run_ranks
from gpuaccept.measure.training_smoke import SmokeOutcome, ddp_smoke_rank
from gpuaccept.results import CheckResult


def rank_body(rank: int, world_size: int, context: CheckContext) -> SmokeOutcome:
    return ddp_smoke_rank(rank, world_size, smoke_spec(context, context.settings.ddp_epochs))


def conclude(context: CheckContext, outcome: RanksOutcome) -> CheckResult:
    limit = context.settings.smoke_max_loss_ratio
    findings = Findings("ddp", "DDP")
    ranks, backend = outcome.world_size, outcome.backend
    target = Target(None, "cpu") if context.cpu_mode else measurement_targets(context)[0]
    findings.details = {"ranks": ranks, "backend": backend, "max_loss_ratio": limit}
    if outcome.values is None:
        findings.failures.append(f"DDP on {ranks} {backend} rank(s): {outcome.error}")
        return findings.conclude("")
    outcomes: list[SmokeOutcome] = outcome.values
    for rank, smoke in enumerate(outcomes):
        findings.record(target, f"rank{rank}_loss_final_over_initial", smoke.loss_ratio, "ratio")
        if not smoke.loss_ratio < limit:
            findings.failures.append(
                f"rank {rank}: loss fell only to {smoke.loss_ratio:.2f} of its start"
            )
    digests = {smoke.param_digest for smoke in outcomes}
    if len(digests) != 1:
        findings.failures.append(
            f"parameters differ across ranks after training ({len(digests)} distinct digests)"
        )
    return findings.conclude(
        f"{ranks} {backend} rank(s): loss fell below {limit:g} of its start, "
        "parameters identical on every rank"
    )


def run(context: CheckContext) -> CheckResult:
    ranks, backend, _ = world(context)
    spec = smoke_spec(context, context.settings.ddp_epochs)
    try:
        values = run_ranks(
            ddp_smoke_rank, ranks, spec, context.settings.rank_timeout_seconds, backend
        )
    except (RanksTimedOut, RanksFailed) as error:
        return conclude(context, RanksOutcome(ranks, backend, None, str(error)))
    return conclude(context, RanksOutcome(ranks, backend, values))
