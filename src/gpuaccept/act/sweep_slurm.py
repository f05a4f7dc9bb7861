"""The sweep's side of Slurm (issue #54 §3): the nodes and their pools as `sinfo` shows them, the
sweep's own jobs as `squeue` lists them, and `sbatch` to submit one. The round itself is
act.sweep's, pure."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from gpuaccept.act.slurm import _run, held_by
from gpuaccept.act.sweep import SweepNode

# A sweep job's name carries its node: the queue says which nodes are under test, pending jobs
# (whose node list is not yet filled in) included.
JOB_PREFIX = "gpuaccept-sweep:"
_FORMAT = "NodeList:256|,Partition:256|,StateComplete:256|,Reason:1024"
# Base states with jobs on them, and the flag of one ending (slurm_protocol_defs.c node_states[],
# as act.slurm reads them)
_BUSY_BASES = frozenset({"allocated", "mixed"})


def parse_nodes(text: str) -> list[SweepNode]:
    """Nodes from `sinfo -h -N -O` with _FORMAT: a node listed once per partition is one node
    in every pool it is in."""
    pools: dict[str, list[str]] = {}
    first: dict[str, tuple[str, str]] = {}
    for line in text.splitlines():
        parts = [part.strip() for part in line.split("|", 3)]
        if len(parts) != 4 or not parts[0]:
            continue
        name, partition, state, reason = parts
        pools.setdefault(name, []).append(partition.rstrip("*"))  # "*": the default partition
        first.setdefault(name, (state, "" if reason == "none" else reason))
    nodes = []
    for name, (state, reason) in first.items():
        words = state.lower().split("+")
        drained = "drain" in words
        held = held_by(state, drained, reason)
        if not held and drained:
            held = "drained by gpuaccept's action layer (its health check returns it)"
        busy = words[0].rstrip("*") in _BUSY_BASES or "completing" in words[1:]
        nodes.append(SweepNode(name, tuple(dict.fromkeys(pools[name])), busy=busy, held=held))
    return nodes


def read_nodes(partition: str | None = None) -> list[SweepNode]:
    command = ["sinfo", "-h", "-N", "-O", _FORMAT]
    if partition:
        command += ["-p", partition]
    return parse_nodes(_run(command))


def parse_jobs(text: str) -> dict[str, str]:
    """node -> job id of the sweep's jobs, from `squeue -h -o %i|%j`."""
    jobs: dict[str, str] = {}
    for line in text.splitlines():
        job, _, name = line.strip().partition("|")
        if name.startswith(JOB_PREFIX) and job:
            jobs.setdefault(name.removeprefix(JOB_PREFIX), job)
    return jobs


def sweep_jobs() -> dict[str, str]:
    """The sweep's jobs queued or running (squeue lists both, and those completing)."""
    return parse_jobs(_run(["squeue", "-h", "-o", "%i|%j"]))


@dataclass(frozen=True)
class Submission:
    """How a sweep job is submitted: sbatch's options (slurm/doc/man/man1/sbatch.1 at 284c3b95:
    --exclusive :939-944 "can not share nodes with other running jobs", and the job "is
    allocated all CPUs and GRES" of the node, so accept sees every GPU without --gpus; --nice
    :1869 "decreases" the priority; --qos :2273), the job script and where its reports go."""

    script: Path  # slurm/accept-node.sbatch of an installed gpuaccept
    results: Path  # its reports: accept-JOBID-NODE.json
    level: str = "quick"
    nice: int = 10000
    qos: str | None = None  # the site's preemptible QOS, where it has one
    partition: str | None = None
    extra: tuple[str, ...] = ()  # the site's own sbatch options (--account=..., --time=...)


def submit(node: str, how: Submission) -> str:
    """One node's accept job; its id."""
    command = [
        "sbatch",
        "--parsable",
        f"--job-name={JOB_PREFIX}{node}",
        f"--nodelist={node}",
        "--exclusive",
        f"--nice={how.nice}",
        # the script runs tasks/ beside it, from the install's root
        f"--chdir={how.script.resolve().parent.parent}",
        f"--output={how.results}/sweep-%j.out",
        f"--export=ALL,GPUACCEPT_RESULTS={how.results}",
    ]
    if how.qos:
        command.append(f"--qos={how.qos}")
    if how.partition:
        command.append(f"--partition={how.partition}")
    command += how.extra
    command += [str(how.script), how.level]
    return _run(command).strip().split(";")[0]
