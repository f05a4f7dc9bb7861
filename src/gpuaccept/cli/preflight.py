"""`gpuaccept preflight`: the options and the exit; the run is commands.preflight's."""

from __future__ import annotations

from pathlib import Path

import typer

from gpuaccept.cli import options as o
from gpuaccept.cli.render import CONSOLE
from gpuaccept.cli.signals import interrupts_as_exceptions

BUDGET = o.option(30.0, "--budget", "SECONDS", "The whole preflight's time (5-3600 s).")
ONLY = o.option([], "--only", "CHECK", "Only these checks of the quick level.")
SKIP = o.option([], "--skip", "CHECK", "Leave these checks out.")
EXPECT_GPUS = o.option(None, "--expect-gpus", "N", "GPUs this node must have.")
REPORT_DIR = o.option(None, "--report-dir", "DIR", "Write the JSON report here.")
HISTORY = o.option(None, "--history", "FILE|URI", "Record the run (default: not).")
ACT = o.option("report", "--act", "MODE", "report, shadow or enforce (as `act slurm`).")
NODE = o.option(None, "--node", "NAME", "Slurm's name for this node.")
JOB = o.option(None, "--job", "JOBID", "Requeue this job if not fit (a Prolog's).")
GANG = typer.Option(False, "--gang", help="All-reduce with the job's other nodes.")
GANG_PORT = o.option(None, "--gang-port", "PORT", "The gang's port on node 0.")


def preflight(
    budget: float = BUDGET,
    device: o.DeviceChoice = o.DEVICE,
    only: list[str] = ONLY,
    skip: list[str] = SKIP,
    expect_gpus: int | None = EXPECT_GPUS,
    rules: Path | None = o.rules_option(),
    report_dir: Path | None = REPORT_DIR,
    history: str | None = HISTORY,
    act: str = ACT,
    node: str | None = NODE,
    partition: str | None = o.BREAKER_PARTITION,
    job: str | None = JOB,
    gang: bool = GANG,
    gang_port: int | None = GANG_PORT,
    resume_level: str = o.RESUME_LEVEL,
    breaker_share: float = o.BREAKER_SHARE,
    breaker_minutes: float = o.BREAKER_MINUTES,
    debounce: int = o.DEBOUNCE,
    debounce_hours: float = o.DEBOUNCE_HOURS,
    replace_after: int = o.REPLACE_AFTER,
    replace_days: float = o.REPLACE_DAYS,
    inspect_after: int = o.INSPECT_AFTER,
    state: Path | None = o.ACT_STATE,
    record: Path | None = o.ACT_RECORD,
    prometheus: Path | None = o.ACT_PROMETHEUS,
) -> None:
    """A verdict in seconds before a job starts: the quick level within --budget, for a Slurm
    Prolog or a Kubernetes init container (docs/preflight-and-sweep.md). A failing node is acted
    on as `act slurm` does (--act enforce); with --job its job is requeued, not held. Exit: 0
    the job may start (passed, or not judged: checks the budget cut are named), or with --job it
    was requeued; 1 not fit (this node or, with --gang, the set); 4 the guard refused the drain.
    """
    options = dict(locals())
    from gpuaccept.commands.act import Guarding
    from gpuaccept.commands.preflight import PreflightRequest, run

    with interrupts_as_exceptions():
        result = run(o.request_from(PreflightRequest, options, guarding=Guarding), CONSOLE)
    if result.exit_code:
        raise typer.Exit(result.exit_code)
