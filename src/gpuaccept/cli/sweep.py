"""`gpuaccept sweep`: the options and the exit; the round is commands.sweep's."""

from __future__ import annotations

from pathlib import Path

import typer

from gpuaccept.cli import options as o
from gpuaccept.cli.render import CONSOLE

RESULTS = o.option(..., "--results", "DIR", "The sweep jobs' reports (shared storage).")
SCRIPT = o.option(
    Path("/opt/gpuaccept/slurm/accept-node.sbatch"),
    "--script",
    "FILE",
    "The job script: slurm/accept-node.sbatch of the gpuaccept the nodes run.",
)
LEVEL = o.option("quick", "--level", "LEVEL", "The accept level each job runs.")
CADENCE = o.option(24.0, "--cadence-hours", "HOURS", "A node tested within it is not due.")
MAX_NODES = o.option(1, "--max-nodes", "N", "Nodes under test at once, fleet-wide (the cap).")
MAX_PER_POOL = o.option(None, "--max-per-pool", "N", "Nodes under test at once in each partition.")
PARTITION = o.option(None, "--partition", "NAME", "Only this partition's nodes.")
NICE = o.option(10000, "--nice", "N", "sbatch --nice: how much lower the jobs' priority is.")
QOS = o.option(None, "--qos", "NAME", "sbatch --qos: the site's preemptible QOS, if it has one.")
_SAID = "Where reports are imported, last tests read (default: $GPUACCEPT_HISTORY)."
HISTORY = o.option(None, "--history", "FILE|URI", _SAID)
SBATCH_OPTION = o.option(
    [],
    "--sbatch-option",
    "OPT",
    "One more sbatch option (repeat it): --sbatch-option=--account=ops",
)
SCHEDULER = o.option(
    "slurm", "--scheduler", "NAME", "slurm (sbatch) or kubernetes (a Job per node)."
)
TEMPLATE = o.option(
    None, "--template", "FILE", "Kubernetes: the Job template (k8s/sweep-job.yaml)."
)
NAMESPACE = o.option("default", "--namespace", "NAME", "Kubernetes: where the Jobs run.")
POOL_LABEL = o.option(
    "nvidia.com/gpu.product", "--pool-label", "KEY", "Kubernetes: a pool's label."
)
ACT = o.option("enforce", "--act", "MODE", "enforce: submit; shadow: say what it would submit.")


def sweep(
    results: Path = RESULTS,
    script: Path = SCRIPT,
    history: str | None = HISTORY,
    level: str = LEVEL,
    cadence_hours: float = CADENCE,
    max_nodes: int = MAX_NODES,
    max_per_pool: int | None = MAX_PER_POOL,
    partition: str | None = PARTITION,
    nice: int = NICE,
    qos: str | None = QOS,
    act: str = ACT,
    sbatch_option: list[str] = SBATCH_OPTION,
    scheduler: str = SCHEDULER,
    template: Path | None = TEMPLATE,
    namespace: str = NAMESPACE,
    pool_label: str = POOL_LABEL,
) -> None:
    """One round of capped checks on idle nodes (docs/preflight-and-sweep.md): each idle node not
    tested within --cadence-hours gets a low-priority, exclusive accept job, the most overdue
    first, never more than --max-nodes (and --max-per-pool) under test at once; busy nodes,
    nodes drained or down, and nodes under test are skipped. Run it from a timer. Exit 0."""
    options = dict(locals())
    from gpuaccept.commands.sweep import SweepRequest, run

    result = run(o.request_from(SweepRequest, options), CONSOLE)
    if result.exit_code:
        raise typer.Exit(result.exit_code)
