"""`gpuaccept sweep`: the options and the exit; the round is commands.sweep's."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from gpuaccept.cli import options as o
from gpuaccept.cli.render import CONSOLE


def _opt(default: object, flag: str, metavar: str, text: str) -> Any:
    return typer.Option(default, flag, metavar=metavar, help=text)


RESULTS = _opt(..., "--results", "DIR", "The sweep jobs' reports (shared storage).")
SCRIPT = _opt(
    Path("/opt/gpuaccept/slurm/accept-node.sbatch"),
    "--script",
    "FILE",
    "The job script: slurm/accept-node.sbatch of the gpuaccept the nodes run.",
)
LEVEL = _opt("quick", "--level", "LEVEL", "The accept level each job runs.")
CADENCE = _opt(24.0, "--cadence-hours", "HOURS", "A node tested within it is not due.")
MAX_NODES = _opt(1, "--max-nodes", "N", "Nodes under test at once, fleet-wide (the cap).")
MAX_PER_POOL = _opt(None, "--max-per-pool", "N", "Nodes under test at once in each partition.")
PARTITION = _opt(None, "--partition", "NAME", "Only this partition's nodes.")
NICE = _opt(10000, "--nice", "N", "sbatch --nice: how much lower the jobs' priority is.")
QOS = _opt(None, "--qos", "NAME", "sbatch --qos: the site's preemptible QOS, if it has one.")
_SAID = "Where reports are imported, last tests read (default: $GPUACCEPT_HISTORY)."
HISTORY = _opt(None, "--history", "FILE|URI", _SAID)
SBATCH_OPTION = _opt(
    [],
    "--sbatch-option",
    "OPT",
    "One more sbatch option (repeat it): --sbatch-option=--account=ops",
)
SCHEDULER = _opt("slurm", "--scheduler", "NAME", "slurm (sbatch) or kubernetes (a Job per node).")
TEMPLATE = _opt(None, "--template", "FILE", "Kubernetes: the Job template (k8s/sweep-job.yaml).")
NAMESPACE = _opt("default", "--namespace", "NAME", "Kubernetes: where the Jobs run.")
POOL_LABEL = _opt("nvidia.com/gpu.product", "--pool-label", "KEY", "Kubernetes: a pool's label.")
ACT = _opt("enforce", "--act", "MODE", "enforce: submit; shadow: say what it would submit.")


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
