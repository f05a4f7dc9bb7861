"""`gpuaccept sweep`: one round of capped checks on idle nodes (issue #54 §3), run by a timer (cron,
a systemd timer) every few minutes.

A round: the sweep's finished reports (its results directory) are imported into the history, so
each node's newest accept run there says when it was last tested (the sweep's state is the
history's, through `store.base.History`, SQLite or PostgreSQL alike); Slurm says which nodes are
idle, busy or held and which sweep jobs are queued or running; the pure round (act.sweep) picks
the due nodes under the caps; each gets a low-priority, exclusive `accept` job (act.sweep_slurm).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

from gpuaccept.commands.options import opt
from gpuaccept.errors import InputError

if TYPE_CHECKING:
    from gpuaccept.act.sweep import Choice
    from gpuaccept.commands.output import Output

MODES = ("shadow", "enforce")
# sbatch options the sweep gives itself: a site's may not undo the cap's bookkeeping (the job's
# name says its node), the exclusivity, or where the reports go
_OURS = frozenset(
    {"--job-name", "-J", "--nodelist", "-w", "--exclusive", "--output", "-o", "--export", "--chdir"}
)
SCHEDULERS = ("slurm", "kubernetes")
MAX_NICE = 2147483645  # sbatch.1 at 284c3b95, --nice: "The adjustment range is +/- 2147483645"


DEFAULT_SCRIPT = Path("/opt/gpuaccept/slurm/accept-node.sbatch")
_SCRIPT = "The job script: slurm/accept-node.sbatch of the gpuaccept the nodes run."
_HISTORY = "Where reports are imported, last tests read (default: $GPUACCEPT_HISTORY)."
_SBATCH = "One more sbatch option (repeat it): --sbatch-option=--account=ops"


@dataclass(frozen=True, kw_only=True)
class SweepRequest:
    # the sweep jobs' reports (accept-*.json, below it), imported each round
    results: Annotated[Path, opt("--results", "DIR", "The sweep jobs' reports (shared storage).")]
    # Slurm: slurm/accept-node.sbatch of the gpuaccept nodes run
    script: Annotated[Path | None, opt("--script", "FILE", _SCRIPT)] = DEFAULT_SCRIPT
    # None: $GPUACCEPT_HISTORY, else the default
    history: Annotated[str | None, opt("--history", "FILE|URI", _HISTORY)] = None
    level: Annotated[str, opt("--level", "LEVEL", "The accept level each job runs.")] = "quick"
    cadence_hours: Annotated[
        float, opt("--cadence-hours", "HOURS", "A node tested within it is not due.")
    ] = 24.0
    max_nodes: Annotated[
        int, opt("--max-nodes", "N", "Nodes under test at once, fleet-wide (the cap).")
    ] = 1
    max_per_pool: Annotated[
        int | None, opt("--max-per-pool", "N", "Nodes under test at once in each partition.")
    ] = None
    # only this partition's nodes (all: None)
    partition: Annotated[str | None, opt("--partition", "NAME", "Only this partition's nodes.")] = (
        None
    )
    nice: Annotated[
        int, opt("--nice", "N", "sbatch --nice: how much lower the jobs' priority is.")
    ] = 10000
    qos: Annotated[
        str | None, opt("--qos", "NAME", "sbatch --qos: the site's preemptible QOS, if it has one.")
    ] = None
    act: Annotated[
        str, opt("--act", "MODE", "enforce: submit; shadow: say what it would submit.")
    ] = "enforce"
    # the site's own (--account=ops, --time=30)
    sbatch_option: Annotated[Sequence[str], opt("--sbatch-option", "OPT", _SBATCH)] = ()
    scheduler: Annotated[
        str, opt("--scheduler", "NAME", "slurm (sbatch) or kubernetes (a Job per node).")
    ] = "slurm"
    template: Annotated[
        Path | None, opt("--template", "FILE", "Kubernetes: the Job template (k8s/sweep-job.yaml).")
    ] = None
    # Kubernetes: where the sweep's Jobs run (its results volume's)
    namespace: Annotated[str, opt("--namespace", "NAME", "Kubernetes: where the Jobs run.")] = (
        "default"
    )
    # Kubernetes: the node label that is its pool
    pool_label: Annotated[str, opt("--pool-label", "KEY", "Kubernetes: a pool's label.")] = (
        "nvidia.com/gpu.product"
    )

    def __post_init__(self) -> None:
        from gpuaccept.suite.selection import LEVELS

        if self.act not in MODES:
            raise InputError(f"--act {self.act!r}: give one of {', '.join(MODES)}")
        if self.scheduler not in SCHEDULERS:
            raise InputError(f"--scheduler {self.scheduler!r}: give one of slurm, kubernetes")
        if self.scheduler == "slurm" and self.script is None:
            raise InputError("--script: give slurm/accept-node.sbatch (the job each node runs)")
        if self.scheduler == "kubernetes":
            if self.template is None:
                raise InputError("--template: give the sweep's Job template (k8s/sweep-job.yaml)")
            if self.qos is not None or self.sbatch_option:
                raise InputError(
                    "--qos and --sbatch-option are Slurm's: on Kubernetes the template's "
                    "priorityClassName makes the Jobs preemptible"
                )
            if not re.fullmatch(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?", self.namespace):
                raise InputError(f"--namespace {self.namespace!r}: give a namespace's name")
            if not re.fullmatch(r"[A-Za-z0-9./_-]{1,253}", self.pool_label):
                raise InputError(f"--pool-label {self.pool_label!r}: give a node label's key")
        if self.level not in LEVELS:
            raise InputError(f"--level {self.level!r}: give one of {', '.join(LEVELS)}")
        hours = self.cadence_hours
        if not (isinstance(hours, int | float) and math.isfinite(hours) and 0 < hours <= 2160):
            raise InputError(f"--cadence-hours {hours}: give hours above 0, ninety days at most")
        for flag, count in (("--max-nodes", self.max_nodes), ("--max-per-pool", self.max_per_pool)):
            if count is not None and not (isinstance(count, int) and 0 <= count <= 100000):
                raise InputError(f"{flag} {count}: give nodes from 0 to 100000")
        if not (isinstance(self.nice, int) and 0 <= self.nice <= MAX_NICE):
            raise InputError(f"--nice {self.nice}: give 0 to {MAX_NICE} (a lower priority)")
        if self.qos is not None and not self.qos.replace("-", "").replace("_", "").isalnum():
            raise InputError(f"--qos {self.qos!r}: give a QOS name")
        if isinstance(self.sbatch_option, str):
            raise InputError("--sbatch-option: give a list of options, not one string")
        for option in self.sbatch_option:
            if not option.startswith("--") or not option.isprintable() or " " in option:
                raise InputError(
                    f"--sbatch-option {option!r}: give one sbatch option, --NAME=VALUE"
                )
            if option.split("=")[0] in _OURS:
                raise InputError(f"--sbatch-option {option!r}: the sweep sets it itself")


@dataclass(frozen=True)
class SweepResult:
    exit_code: int
    choices: tuple[Choice, ...]
    submitted: dict[str, str]  # node -> job id (empty in shadow mode)


def run(request: SweepRequest, out: Output) -> SweepResult:
    """Check the paths, then one round under the sweep's lock."""
    from gpuaccept.output_files import check_output_directory

    template = None
    if request.template is not None and request.scheduler == "kubernetes":
        from gpuaccept.act.sweep_kubernetes import read_template

        template = read_template(request.template)
    elif request.script is not None and not request.script.is_file():
        raise InputError(f"--script {request.script}: not a file (slurm/accept-node.sbatch)")
    check_output_directory(request.results, "--results")
    request.results.mkdir(parents=True, exist_ok=True)
    with _one_round_at_a_time(request.results):
        return _round(request, template, out)


@contextmanager
def _one_round_at_a_time(results: Path) -> Iterator[None]:
    """Hold the sweep's lock from reading the queue to the last sbatch: two rounds at once would
    each count the other's jobs as not there yet, and submit past the cap together."""
    import fcntl

    with (results / ".sweep.lock").open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def _round(request: SweepRequest, template: dict[str, Any] | None, out: Output) -> SweepResult:
    from gpuaccept.act.sweep import Limits, SweepNode, plan_round

    tested = _imported_and_tested(request, out)
    seen: list[SweepNode]
    if template is not None:
        from gpuaccept.act.sweep_kubernetes import read_round
        from gpuaccept.act.sweep_kubernetes import submit as create_job

        seen, jobs = read_round(request.pool_label, request.namespace)
        if request.partition is not None:
            seen = [n for n in seen if request.partition in n.pools]

        def submit(node: str) -> str:
            assert template is not None
            return create_job(node, template, request.level, request.namespace)
    else:
        from gpuaccept.act.sweep_slurm import Submission, read_nodes, sweep_jobs
        from gpuaccept.act.sweep_slurm import submit as sbatch

        assert request.script is not None  # the request refuses Slurm without it
        seen, jobs = read_nodes(request.partition), sweep_jobs()
        how = Submission(
            request.script,
            request.results,
            request.level,
            request.nice,
            request.qos,
            request.partition,
            tuple(request.sbatch_option),
        )

        def submit(node: str) -> str:
            return sbatch(node, how)

    if request.partition is not None and not seen:
        # sinfo -p answers an unknown partition with no line and exit 0: a misspelt partition
        # in a timer's command line would sweep nothing, round after round, and say only "0 seen"
        where = "the label's pools" if template is not None else "Slurm's partitions"
        raise InputError(f"--partition {request.partition}: no node is in it (not among {where}?)")
    nodes = [replace(n, testing=n.name in jobs, tested=tested.get(n.name)) for n in seen]
    limits = Limits(request.max_nodes, request.max_per_pool, timedelta(hours=request.cadence_hours))
    choices = plan_round(nodes, limits, datetime.now(UTC))
    submitted: dict[str, str] = {}
    for choice in choices:
        if choice.action == "skip":
            out.line(f"[SWEEP] {choice.node}: skip: {choice.why}")
        elif request.act == "shadow":
            out.line(f"[SWEEP] {choice.node}: would submit ({choice.why}; --act shadow)")
        else:
            submitted[choice.node] = submit(choice.node)
            out.line(f"[SWEEP] {choice.node}: job {submitted[choice.node]} ({choice.why})")
    under = sum(n.testing for n in nodes) + len(submitted)
    pools = f", {request.max_per_pool} a pool" if request.max_per_pool is not None else ""
    out.line(
        f"[SWEEP] {len(submitted)} submitted; {under} node(s) under test, the cap "
        f"{request.max_nodes}{pools}; {len(nodes)} node(s) seen"
    )
    return SweepResult(0, choices, submitted)


def _imported_and_tested(request: SweepRequest, out: Output) -> dict[str, datetime]:
    """Import the sweep's reports into the history (a report it holds already is skipped by the
    history itself; one that cannot be read is said and left), then each node's newest accept
    run there, as an aware UTC time."""
    from gpuaccept.report.reading import dated_in_future, load_report
    from gpuaccept.store.history import History, history_location
    from gpuaccept.store.importing import store_reports

    good = []
    # Slurm's jobs write beside each other; Kubernetes' in a directory per node (subPathExpr)
    for path in sorted(request.results.rglob("accept-*.json")):
        if path.name.endswith(".env.json"):
            continue
        try:
            why = dated_in_future(load_report(path))
        except InputError as error:
            why = str(error)
        if why is not None:
            out.error(f"sweep: not imported: {why}")
            continue
        good.append(path)
    with History.open(history_location(request.history), create=True) as store:
        new = sum(done.new for done in store_reports(store, good))
        if new:
            out.line(f"[SWEEP] imported {new} new report(s) into the history")
        newest = store.newest_runs("accept")
        # a test is a run at the sweep's level or deeper: a quick health check or preflight
        # every few minutes would keep every node "tested" and its standard sweep never due
        from gpuaccept.suite.selection import LEVELS

        deep = LEVELS[LEVELS.index(request.level) :]
        tested: dict[str, datetime] = {}
        for row in newest:
            if not row.hostname:
                continue
            if row.level in deep:
                tested[row.hostname] = _aware(row.started_at)
                continue
            found = [
                _aware(run.started_at)
                for level in deep
                for run in store.list_runs(
                    node=row.hostname, command="accept", level=level, limit=1
                )
            ]
            if found:
                tested[row.hostname] = max(found)
    return tested


def _aware(started_at: str) -> datetime:
    started = datetime.fromisoformat(started_at)
    return started if started.tzinfo else started.replace(tzinfo=UTC)
