"""The preflight's gang (issue #54 §2): one process per node of a job, one all-reduce across them
and each node's verdict heard by every other, so a job never starts on a set with a broken node
or a broken path between nodes.

The members come from the scheduler: Slurm's job node list (expanded by `scontrol show
hostnames`, never by hand) or a Kubernetes Indexed Job (the pod's JOB_COMPLETION_INDEX, the
Job's size and its first pod's address). The all-reduce is the suite's own exactness check
(measure.collectives.all_reduce_rank), on a small buffer: it proves the nodes reach each other
and add correctly, not their bandwidth (that is `accept`'s across nodes).
"""

from __future__ import annotations

import datetime
import re
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass

from gpuaccept.errors import EnvironmentProblem, InputError, Interrupted

# Slurm's job: the first node of SLURM_JOB_NODELIST leads; Kubernetes: an Indexed Job's pod
LEADER_ENV = "GPUACCEPT_GANG_LEADER"  # the first node's address where its name does not resolve
SIZE_ENV = "GPUACCEPT_GANG_SIZE"  # Kubernetes: the Indexed Job's completions
INDEX_ENV = "JOB_COMPLETION_INDEX"  # set by Kubernetes in every pod of an Indexed Job
DEFAULT_PORT = 29411
MAX_NODES = 65536
# a small buffer: the gang proves the path and the sum, inside a budget of seconds
GANG_BYTES = 1 << 20


@dataclass(frozen=True)
class Gang:
    rank: int
    names: tuple[str, ...]  # every member, in rank order
    leader: str  # the rank-0 member's address
    port: int

    @property
    def size(self) -> int:
        return len(self.names)


@dataclass(frozen=True)
class GangOutcome:
    """What the gang heard: each member's verdict (pass, fail, not-judged), the all-reduce's wrong
    elements, or why the gang did not complete (a peer that never joined, a broken collective)."""

    verdicts: dict[str, str]
    wrong: int = 0
    broken: str = ""

    @property
    def failed(self) -> list[str]:
        return [name for name, verdict in self.verdicts.items() if verdict == "fail"]

    @property
    def holds(self) -> bool:
        return not self.broken and not self.wrong and not self.failed


def _number(text: str, what: str, low: int, high: int) -> int:
    if not re.fullmatch(r"[0-9]{1,9}", text.strip()):
        raise InputError(f"{what}={text!r}: give a whole number")
    value = int(text)
    if not low <= value <= high:
        raise InputError(f"{what}={value}: give {low} to {high}")
    return value


def _scontrol(*args: str) -> str:
    try:
        done = subprocess.run(
            ["scontrol", *args], capture_output=True, text=True, timeout=30, check=False
        )
    except FileNotFoundError:
        raise EnvironmentProblem("scontrol not found: --gang under Slurm needs it") from None
    except subprocess.TimeoutExpired:
        raise EnvironmentProblem(f"scontrol {args[0]} {args[1]} took over 30 s") from None
    if done.returncode != 0:
        said = (done.stderr.strip().splitlines() or [f"exit {done.returncode}"])[-1]
        raise InputError(f"scontrol {' '.join(args)}: {said}")
    return done.stdout


def job_nodes(env: Mapping[str, str], job: str | None) -> str:
    """The job's node list as Slurm writes it. A Prolog of Slurm 22.05 is not given
    SLURM_JOB_NODELIST (SchedMD/slurm at slurm-22-05-8-1, doc/html/prolog_epilog.shtml:504-510:
    "Available in PrologSlurmctld SrunProlog, TaskProlog, ..."; the slurmd Prolog is not named):
    then the controller is asked for the job's NodeList."""
    listed = env.get("SLURM_JOB_NODELIST", "").strip()
    if listed:
        return listed
    if not job:
        raise InputError("--gang under Slurm needs SLURM_JOB_NODELIST or --job (the Prolog's)")
    fields = dict(f.split("=", 1) for f in _scontrol("show", "job", "-o", job).split() if "=" in f)
    listed = fields.get("NodeList", "")
    if not listed or listed == "(null)":
        raise InputError(f"--gang: Slurm lists no nodes for job {job}")
    return listed


def slurm_gang(env: Mapping[str, str], node: str, port: int, job: str | None = None) -> Gang:
    """The job's nodes (expanded by `scontrol show hostnames`), this node's rank among them."""
    listed = job_nodes(env, job)
    names = tuple(_scontrol("show", "hostnames", listed).split())
    if node not in names:
        raise InputError(f"--gang: this node {node!r} is not in the job's nodes ({listed})")
    leader = env.get(LEADER_ENV, "").strip() or names[0]
    return Gang(names.index(node), names, leader, port)


def kubernetes_gang(env: Mapping[str, str], port: int) -> Gang:
    """An Indexed Job's pod: its index, the Job's size and the first pod's address (the manifest
    gives both: k8s/preflight-indexed-job.yaml)."""
    size = _number(env.get(SIZE_ENV, ""), SIZE_ENV, 1, MAX_NODES)
    rank = _number(env.get(INDEX_ENV, ""), INDEX_ENV, 0, size - 1)
    leader = env.get(LEADER_ENV, "").strip()
    if not leader:
        raise InputError(f"--gang in an Indexed Job needs {LEADER_ENV}: the index-0 pod's address")
    return Gang(rank, tuple(f"index-{i}" for i in range(size)), leader, port)


def gang_of(env: Mapping[str, str], node: str, port: int, job: str | None = None) -> Gang:
    """The gang this process belongs to: an Indexed Job's when Kubernetes numbers the pod, else
    the Slurm job's."""
    if env.get(INDEX_ENV, "").strip():
        return kubernetes_gang(env, port)
    return slurm_gang(env, node, port, job)


def join(gang: Gang, verdict: str, timeout: float, device_mode: str) -> GangOutcome:
    """Meet the other members (waiting at most `timeout` seconds for them), all-reduce a known
    pattern and hear every member's verdict. A member that never comes, or a collective that
    breaks, is the gang's `broken`, never an exception: the set is not fit either way."""
    import torch
    import torch.distributed as dist

    from gpuaccept.measure.collectives import AllReduceSpec, all_reduce_rank

    backend = "nccl" if device_mode == "cuda" else "gloo"
    if backend == "nccl":
        torch.cuda.set_device(0)  # one process per node: the node's first GPU carries it
    try:
        dist.init_process_group(
            backend,
            init_method=f"tcp://{gang.leader}:{gang.port}",
            rank=gang.rank,
            world_size=gang.size,
            timeout=datetime.timedelta(seconds=max(1.0, timeout)),
        )
    except Interrupted:
        raise
    except Exception as error:
        said = str(error).strip().splitlines()[0][:200] if str(error).strip() else ""
        return GangOutcome({}, broken=f"the gang did not meet within {timeout:.0f} s: {said}")
    try:
        figure = all_reduce_rank(
            gang.rank, gang.size, AllReduceSpec(GANG_BYTES, 2, warmup=1, repeats=2)
        )
        heard: list[tuple[str, str] | None] = [None] * gang.size
        dist.all_gather_object(heard, (gang.names[gang.rank], verdict))
        verdicts = {pair[0]: pair[1] for pair in heard if pair is not None}
        return GangOutcome(verdicts, wrong=figure.wrong_elements)
    except Interrupted:
        raise
    except Exception as error:
        said = str(error).strip().splitlines()[0][:200] if str(error).strip() else ""
        return GangOutcome({}, broken=f"the gang's all-reduce broke: {type(error).__name__} {said}")
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()
