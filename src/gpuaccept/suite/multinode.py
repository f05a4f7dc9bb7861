"""accept across nodes, under torchrun (or srun): every rank is one GPU's worker.

- node checks (inventory, stack, events, ...) run on each node's local rank 0;
- per-device checks run on every rank, for its own GPU, and are merged per node;
- rank checks (collectives, ddp) run across every rank of every node in the launcher's process
  group; global rank 0 concludes and records the figures once, naming every node; the other
  nodes' reports carry the verdict and say where the figures are;
- `pairwise`: all-reduce between every pair of nodes (in rounds, disjoint pairs at once, as
  SuperBench's pair-wise mode does); the node whose pairs are slowest, or that fails, is named.

Every node's local rank 0 writes that node's report. A gloo group carries the results between
ranks, so a broken NCCL group cannot hide what happened.
"""

from __future__ import annotations

import datetime
import os
import re
import socket
import statistics
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from gpuaccept.checks.context import CheckContext, RanksOutcome
from gpuaccept.distributed.launch_env import check_rendezvous, rank_env
from gpuaccept.errors import InputError, Interrupted
from gpuaccept.probe.nvml_events import GpuEvent
from gpuaccept.results import CheckResult, RunReport, Status
from gpuaccept.suite.runner import merge_device_results
from gpuaccept.suite.selection import CheckSpec
from gpuaccept.suite.worker import error_text, resolve_target

if TYPE_CHECKING:
    from gpuaccept.distributed.group_children import Deadlines
    from gpuaccept.measure.collectives import AllReduceSpec
    from gpuaccept.suite.isolation import Round

NODE_NAME_ENV = "GPUACCEPT_NODE_NAME"
LOCAL_ADDR_ENV = "GPUACCEPT_LOCAL_ADDR"
# A pair's all-reduce below this share of the median over all pairs marks it slow (the
# NCCL_TESTS_MIN_BW tolerance, applied to the fleet's own median).
PAIR_TOLERANCE = 0.9


class PeerLost(Exception):
    """The control group broke: another rank stopped (evicted, crashed) in the middle of a run."""


@contextmanager
def _control_plane() -> Iterator[None]:
    """A collective of the control group that fails means a peer is gone, not a bad check."""
    try:
        yield
    except Interrupted:
        raise
    except Exception as error:
        raise PeerLost(f"{type(error).__name__}: {str(error).splitlines()[0][:200]}") from None


@dataclass(frozen=True)
class Launch:
    """Where this process sits in a multi-node launch."""

    rank: int
    world: int
    local_rank: int
    local_world: int
    node_rank: int
    nodes: int
    node_name: str
    launcher: str  # "torchrun" or "srun"


def _int(env: Mapping[str, str], name: str) -> int:
    try:
        return int(env[name])
    except (KeyError, ValueError):
        raise InputError(f"{name}={env.get(name)!r}: a multi-rank launch needs it") from None


# a host's name, as Slurm, Kubernetes (a DNS subdomain) and hostname(1) give one: printable,
# without spaces, at most 253 characters (RFC 1035's longest name)
_NODE_NAME = re.compile(r"[!-~]{1,253}")


def check_node_settings(env: Mapping[str, str] | None = None) -> None:
    """Refuse (InputError, before a run) a GPUACCEPT_NODE_NAME that is not a host's name (it
    names the node in every report, log line, fleet page and isolation round), and a
    GPUACCEPT_LOCAL_ADDR that is not a host's name or address (perftest's server is reached
    there)."""
    env = os.environ if env is None else env
    for name, what in ((NODE_NAME_ENV, "a node's name"), (LOCAL_ADDR_ENV, "a host or address")):
        raw = env.get(name, "")
        if raw and not _NODE_NAME.fullmatch(raw):
            raise InputError(
                f"{name}={raw[:40]!r}{'...' if len(raw) > 40 else ''} is not {what}: give 1 to "
                "253 printable characters without spaces, or leave it unset"
            )


def node_name(env: Mapping[str, str]) -> str:
    return (
        env.get(NODE_NAME_ENV)
        or env.get("SLURMD_NODENAME")
        or socket.gethostname().split(".")[0]
        or "unknown-node"
    )


def detect_launch(environ: Mapping[str, str] | None = None) -> Launch | None:
    """The launch this process is part of: torchrun (WORLD_SIZE > 1), srun with more than one
    task (SLURM_NTASKS > 1, MASTER_ADDR and MASTER_PORT set), or None for a plain run."""
    env = os.environ if environ is None else environ
    ranks = rank_env(env)
    if ranks is not None:
        check_rendezvous(env)
        return Launch(
            rank=ranks.rank,
            world=ranks.world,
            local_rank=ranks.local_rank,
            local_world=ranks.local_world,
            node_rank=(
                ranks.group_rank
                if ranks.group_rank is not None
                else ranks.rank // ranks.local_world
            ),
            nodes=ranks.world // ranks.local_world,
            node_name=node_name(env),
            launcher="torchrun",
        )
    tasks = env.get("SLURM_NTASKS", "").strip()
    if tasks.isdigit() and int(tasks) > 1 and "SLURM_PROCID" in env:
        for needed in ("MASTER_ADDR", "MASTER_PORT"):
            if not env.get(needed):
                raise InputError(
                    f"accept under srun with {tasks} tasks needs {needed} (the first node's "
                    "address and a free port), or launch it with torchrun"
                )
        check_rendezvous(env)
        world, nodes = int(tasks), _int(env, "SLURM_NNODES")
        if nodes < 1 or world % nodes:
            raise InputError(f"SLURM_NTASKS={world} is not the same number of tasks per node")
        return Launch(
            rank=_int(env, "SLURM_PROCID"),
            world=world,
            local_rank=_int(env, "SLURM_LOCALID"),
            local_world=world // nodes,
            node_rank=_int(env, "SLURM_NODEID"),
            nodes=nodes,
            node_name=node_name(env),
            launcher="srun",
        )
    return None


def _run_check(spec: CheckSpec, target: Callable[..., Any], *args: Any) -> CheckResult:
    started = time.monotonic()
    try:
        result: CheckResult = target(*args)
    except Interrupted:
        raise  # the run stops; it is not this check's failure
    except Exception as error:
        return CheckResult(
            name=spec.name,
            area=spec.area,
            status=Status.ERROR,
            message=f"the check raised {error_text(error)}",
            duration_seconds=time.monotonic() - started,
        )
    return result.model_copy(update={"duration_seconds": time.monotonic() - started})


@dataclass(frozen=True)
class _Share:
    """What one rank hands the others after a check."""

    rank: int
    node_rank: int
    node_name: str
    local_rank: int
    result: CheckResult | None = None  # node and device checks
    ok: bool = True  # rank checks: the body returned
    value: Any = None  # rank checks: what the body returned, or the error text
    events: tuple[GpuEvent, ...] = ()


class MultiNodeRun:
    """The run of one rank; `node_results` is filled on each node's local rank 0."""

    def __init__(
        self, context: CheckContext, launch: Launch, say: Callable[[str], None] | None = None
    ) -> None:
        self.context = context
        self.launch = launch
        self.say = say or (lambda _text: None)
        self.node_results: list[CheckResult] = []
        self.node_names: list[str] = []
        self.events: list[GpuEvent] = []
        self._watcher: Any = None

    # --- process groups --------------------------------------------------------------------
    def start(self, plan: tuple[str, ...] = ()) -> None:
        """Join the process group and agree on the plan (level, mode, checks): ranks started
        with different ones would wait on each other's collectives for minutes and write no
        report, so they are refused at once, on every rank, naming the difference."""
        import torch
        import torch.distributed as dist

        timeout = datetime.timedelta(seconds=self.context.settings.rank_timeout_seconds + 60)
        if self.context.device_mode == "cuda":
            torch.cuda.set_device(self.launch.local_rank)
        env = os.environ
        for name, value in (
            ("RANK", self.launch.rank),
            ("WORLD_SIZE", self.launch.world),
            ("LOCAL_RANK", self.launch.local_rank),
        ):
            env.setdefault(name, str(value))
        dist.init_process_group(
            "nccl" if self.context.device_mode == "cuda" else "gloo",
            init_method="env://",
            timeout=timeout,
        )
        self._control = dist.new_group(backend="gloo", timeout=timeout)
        shared: list[Any] = [None] * self.launch.world
        dist.all_gather_object(
            shared, (self.launch.node_rank, self.launch.node_name, plan), self._control
        )
        differing = [(name, theirs) for _, name, theirs in shared if theirs != shared[0][2]]
        if differing:
            name, theirs = differing[0]
            raise InputError(
                f"the ranks were started with different plans: {shared[0][1]} runs "
                f"{' '.join(shared[0][2])}, {name} runs {' '.join(theirs)}; start every node "
                "with the same accept options"
            )
        by_node = dict(sorted((node_rank, name) for node_rank, name, _ in shared))
        ranks_of: dict[str, list[int]] = {}
        for node_rank, name in by_node.items():
            ranks_of.setdefault(name, []).append(node_rank)
        twice = next(((n, r) for n, r in ranks_of.items() if len(r) > 1), None)
        if twice is not None:
            # rounds, pairs and reports are kept by name: two nodes of one name would be one
            raise InputError(
                f"two nodes of this job are both called {twice[0]!r} (node ranks "
                f"{twice[1][0]} and {twice[1][1]}): give each node its own {NODE_NAME_ENV}, or "
                "leave it unset (each node's host name)"
            )
        self.node_names = [by_node[n] for n in sorted(by_node)]
        self._start_watcher()
        if self.launch.local_rank == 0:
            from gpuaccept.probe.fabric import read_port_counters
            from gpuaccept.probe.nvml_health import read_snapshot

            self.context = replace(
                self.context,
                start_counters=read_snapshot(),
                start_fabric_counters=read_port_counters(),
            )

    def _start_watcher(self) -> None:
        from gpuaccept.probe.hardware import list_cuda_gpus, load_nvml
        from gpuaccept.probe.nvml_events import EventWatcher

        if self.context.device_mode == "cuda":
            gpus = {gpu.index: gpu.uuid for gpu in list_cuda_gpus()}
            uuid = gpus.get(self.launch.local_rank)
            self._watcher = EventWatcher(load_nvml, [uuid] if uuid else None)
        elif self.launch.local_rank == 0:
            self._watcher = EventWatcher(load_nvml, None)
        if self._watcher is not None:
            self._watcher.start()

    def close(self, *, abandon: bool = False) -> None:
        """Stop watching and leave the process groups; `abandon` after an interruption, when a
        peer may be gone mid-collective and an orderly teardown could wait for it."""
        import torch.distributed as dist

        if self._watcher is not None:
            self._watcher.stop()
        if dist.is_initialized() and not abandon:
            dist.destroy_process_group()

    def interrupted(self, specs: list[CheckSpec], why: str) -> str | None:
        """The checks not recorded yet: the one under way is ERROR, the rest were not run.
        Returns the name of the one under way (None when every check had finished)."""
        done = {result.name for result in self.node_results}
        under_way: str | None = None
        for spec in specs:
            if spec.name in done:
                continue
            current = under_way is None
            under_way = under_way or spec.name
            status, message = (Status.ERROR, why) if current else (Status.SKIP, f"not run: {why}")
            if self.launch.local_rank == 0:
                self.node_results.append(
                    CheckResult(name=spec.name, area=spec.area, status=status, message=message)
                )
        return under_way

    def _share(self, share: _Share) -> list[_Share]:
        import torch.distributed as dist

        gathered: list[Any] = [None] * self.launch.world
        with _control_plane():
            dist.all_gather_object(gathered, share, self._control)
        return sorted(gathered, key=lambda s: s.rank)

    def node_verdicts(self, passed: bool | None) -> dict[int, bool]:
        """Each node's verdict (its local rank 0 says it), known to every rank."""
        import torch.distributed as dist

        said: list[Any] = [None] * self.launch.world
        with _control_plane():
            dist.all_gather_object(said, (self.launch.node_rank, passed), self._control)
        return {node: verdict for node, verdict in said if verdict is not None}

    def _mine(self, value: Any) -> _Share:
        """This rank's share, carrying `value`."""
        launch = self.launch
        return _Share(
            launch.rank, launch.node_rank, launch.node_name, launch.local_rank, value=value
        )

    def _node_ranks(self, node: int) -> range:
        """The global ranks of node rank `node`: each node's local ranks in turn."""
        return range(node * self.launch.local_world, (node + 1) * self.launch.local_world)

    def _all_reduce_in(self, ranks: list[int], group: Any, *, others: bool = False) -> Any:
        """This rank's all-reduce within `group` (global `ranks`), and with `others` all-gather
        and all-to-all after it: its figure, or the error it met as text (the others must still
        hear from this rank)."""
        import torch.distributed as dist

        from gpuaccept.checks.collectives import allreduce_spec
        from gpuaccept.measure.collectives import accept_collectives_rank, all_reduce_rank

        body = accept_collectives_rank if others else all_reduce_rank
        try:
            # the group's own numbering (ascending global ranks, whatever order `ranks` has):
            # all-gather and all-to-all place each rank's chunk by it
            return body(dist.get_rank(group), len(ranks), allreduce_spec(self.context), group=group)
        except Interrupted:
            raise
        except Exception as error:
            return error_text(error)

    def barrier(self) -> None:
        import torch.distributed as dist

        with _control_plane():
            dist.barrier(self._control)

    # --- checks ---------------------------------------------------------------------------
    def _drain(self) -> tuple[GpuEvent, ...]:
        return tuple(self._watcher.drain()) if self._watcher is not None else ()

    def run_check(self, spec: CheckSpec) -> None:
        launch = self.launch
        self._running(spec.name)
        if self._watcher is not None:
            self._watcher.during = spec.name
        started = time.monotonic()
        me = _Share(launch.rank, launch.node_rank, launch.node_name, launch.local_rank)
        if spec.final:
            # every rank's events so far, for its node's final check
            shares = self._share(replace(me, events=self._drain()))
            mine = [e for s in shares if s.node_rank == launch.node_rank for e in s.events]
            self.events.extend(mine)
        context = replace(self.context, events=tuple(self.events))
        if spec.scope == "ranks":
            self._run_ranks(spec, context, me, started)
            return
        result = None
        if spec.scope == "device":
            index = launch.local_rank if context.device_mode == "cuda" else None
            device_context = replace(context, device_index=index)
            # a serial check (GPUs sharing PCIe uplinks) takes turns within each node
            for turn in range(launch.local_world if spec.serial else 1):
                if not spec.serial or turn == launch.local_rank:
                    result = _run_check(spec, resolve_target(spec.target), device_context)
                if spec.serial:
                    self.barrier()
        elif launch.local_rank == 0:
            result = _run_check(spec, resolve_target(spec.target), context)
        shares = self._share(replace(me, result=result, events=self._drain()))
        self._keep_events(shares)
        if launch.local_rank != 0:
            return
        if spec.scope == "node":
            assert result is not None
            self._record(result)
            return
        parts = {
            (
                f"gpu{s.local_rank}" if context.device_mode == "cuda" else f"rank{s.local_rank}"
            ): s.result
            for s in shares
            if s.node_rank == launch.node_rank and s.result is not None
        }
        self._record(merge_device_results(spec, parts, time.monotonic() - started))

    def _keep_events(self, shares: list[_Share]) -> None:
        self.events.extend(
            e for s in shares if s.node_rank == self.launch.node_rank for e in s.events
        )

    def _record(self, result: CheckResult) -> None:
        from gpuaccept.results import check_line

        self.node_results.append(result)
        self.say(f"[{self.launch.node_name}] {check_line(result)}")

    def _running(self, name: str) -> None:
        """A check starting, said as a node's own run says it ([RUN] name): a job log across
        nodes showed only results, minutes apart, and no sign of what ran (issue #53 §5)."""
        self.say(f"[{self.launch.node_name}] [RUN] {name}")

    def _run_ranks(
        self, spec: CheckSpec, context: CheckContext, me: _Share, started: float
    ) -> None:
        import torch.distributed as dist

        assert spec.conclude is not None, f"rank check {spec.name} names no conclude function"
        try:
            value, ok = (
                resolve_target(spec.target)(self.launch.rank, self.launch.world, context),
                True,
            )
        except Interrupted:
            raise
        except Exception as error:
            value, ok = error_text(error), False
        shares = self._share(replace(me, ok=ok, value=value, events=self._drain()))
        self._keep_events(shares)
        result: list[Any] = [None]
        if self.launch.rank == 0:
            result[0] = self._conclude(spec, context, shares, started)
        with _control_plane():
            dist.broadcast_object_list(result, src=0, group=self._control)
        if self.launch.local_rank != 0:
            return
        concluded: CheckResult = result[0]
        if self.launch.node_rank != 0:
            # the verdict is every node's; the figures are recorded once, in the first node's
            concluded = concluded.model_copy(
                update={
                    "measurements": [],
                    "details": {"recorded_in": self.node_names[0], "nodes": self.node_names},
                }
            )
        self._record(concluded)

    def _conclude(
        self, spec: CheckSpec, context: CheckContext, shares: list[_Share], started: float
    ) -> CheckResult:
        backend = "nccl" if context.device_mode == "cuda" else "gloo"
        failed = [s for s in shares if not s.ok]
        problems = "; ".join(f"rank {s.rank} ({s.node_name}): {s.value}" for s in failed)
        values = None if failed else [s.value for s in shares]
        conclude: Callable[[CheckContext, RanksOutcome], CheckResult] = resolve_target(
            spec.conclude or ""
        )
        result = _run_check(
            spec, conclude, context, RanksOutcome(len(shares), backend, values, problems or None)
        )
        wrong = sorted({s.node_name for s in shares if s.ok and _own_wrong(s.value) > 0})
        details = {**result.details, "nodes": self.node_names}
        update: dict[str, Any] = {
            "details": details,
            "duration_seconds": time.monotonic() - started,
        }
        if wrong:
            update["status"] = Status.FAIL
            update["message"] = f"wrong all-reduce results on {', '.join(wrong)}; {result.message}"
        elif failed:
            update["message"] = (
                f"{result.message} (nodes: {', '.join(sorted({s.node_name for s in failed}))})"
            )
        return result.model_copy(update=update)

    # --- pairwise -------------------------------------------------------------------------
    def run_pairwise(self) -> None:
        """All-reduce between every pair of nodes; name the node whose pairs are slow."""
        import torch.distributed as dist

        launch = self.launch
        self._running("pairwise")
        started = time.monotonic()
        pairs = [(a, b) for a in range(launch.nodes) for b in range(a + 1, launch.nodes)]
        groups = {}
        for pair in pairs:  # every rank creates every group, in the same order
            ranks = [r for node in pair for r in self._node_ranks(node)]
            groups[pair] = (ranks, dist.new_group(ranks))
        figures: dict[tuple[int, int], Any] = {}
        for round_pairs in pair_rounds(launch.nodes):
            mine = next((p for p in round_pairs if launch.node_rank in p), None)
            if mine is None:
                continue
            figures[mine] = self._all_reduce_in(*groups[mine])
        shares = self._share(self._mine(figures))
        if launch.local_rank == 0:
            measured: dict[tuple[int, int], Any] = {}
            for share in shares:
                for pair, figure in share.value.items():
                    measured.setdefault(pair, figure)
            result = judge_pairs(measured, self.node_names)
            self._record(result.model_copy(update={"duration_seconds": time.monotonic() - started}))

    # --- rails (issue #33 §1) -------------------------------------------------------------
    def run_rails(self, tolerance_percent: float) -> None:
        """Every rail's all-reduce at once, one GPU per node each (suite/rails.py); every node
        records the same verdict."""
        import torch.distributed as dist

        from gpuaccept.suite.rails import CHECK_NAME, judge_rails, rail_ranks

        launch = self.launch
        self._running(CHECK_NAME)
        started = time.monotonic()
        rails = launch.local_world if launch.nodes > 1 else 0
        groups = [  # every rank creates every group, in the same order
            (ranks, dist.new_group(ranks))
            for ranks in (rail_ranks(k, launch.nodes, launch.local_world) for k in range(rails))
        ]
        figure: Any = None
        if rails > 1:
            figure = self._all_reduce_in(*groups[launch.local_rank])
        shares = self._share(self._mine(figure))
        if launch.local_rank == 0:
            # a rail's figure is the same on each of its ranks (the slowest rank's time); a
            # rank that met an error says so for its rail
            figures: dict[int, Any] = {}
            if rails > 1:
                for share in sorted(shares, key=lambda s: isinstance(s.value, str)):
                    figures[share.local_rank] = share.value
            result = judge_rails(figures, nodes=launch.nodes, tolerance_percent=tolerance_percent)
            self._record(result.model_copy(update={"duration_seconds": time.monotonic() - started}))

    # --- isolation (issue #33 §1) ---------------------------------------------------------
    def run_isolation(self, topology: Mapping[str, str] | None = None) -> None:
        """Find the bad nodes in O(log N) rounds (suite/isolation.py): each round's groups
        all-reduce, all-gather and all-to-all at once, each group in children of its ranks that
        are stopped at a deadline (distributed/group_children.py: a group that hangs fails its
        round, the job goes on); every rank shares its group's figure, and every rank, given
        the same figures, plans the same next round. A group of two or more nodes passes when
        the three complete, exact, the all-reduce at 0.9 x --min-busbw or more; a node alone,
        when they complete exact (no inter-node floor holds it)."""
        import torch.distributed as dist

        from gpuaccept.checks.collectives import allreduce_spec
        from gpuaccept.distributed.group_children import Deadlines
        from gpuaccept.suite.isolation import (
            NVLINK_OFF_STAGE,
            IsolationPlan,
            group_passes,
            judge_isolation,
            round_evidence,
            round_work_seconds,
        )

        launch, context = self.launch, self.context
        self._running("isolation")
        floor = context.min_busbw_gbps
        assert floor is not None, "accept refuses --isolate without --min-busbw"
        started = time.monotonic()
        names = self.node_names
        spec = allreduce_spec(context)
        deadlines = Deadlines(
            join=context.settings.rank_timeout_seconds,
            work=round_work_seconds(
                spec.nbytes, spec.check_iterations, spec.warmup, spec.repeats, floor
            ),
        )
        stores, in_ranks, held = self._round_stores(deadlines.join)
        # with one GPU a node there is no link inside it to screen
        plan = IsolationPlan(names, dict(topology or {}), nvlink_off=launch.local_world >= 2)
        evidence: list[dict[str, Any]] = []
        number = 0
        while (step := plan.next_round()) is not None:
            number += 1
            if step.stage == NVLINK_OFF_STAGE:
                passed = self._screen_without_nvlink(step, floor, evidence)
                plan.record(passed)
                continue
            groups = [
                (group, sorted(r for name in group for r in self._node_ranks(names.index(name))))
                for group in step.groups
            ]
            figure: Any = None
            mine = next(
                (i for i, (group, _) in enumerate(groups) if launch.node_name in group), None
            )
            # each group meets at the store of its first node (in the job's node order)
            leads = [min(names.index(name) for name in group) for group, _ in groups]
            if stores is None:
                # every rank creates every group, in the same order
                made = [dist.new_group(ranks) for _, ranks in groups]
                if mine is not None:
                    figure = self._all_reduce_in(groups[mine][1], made[mine], others=True)
            elif mine is not None:
                where = stores[leads[mine]]
                figure = (
                    where
                    if isinstance(where, str)
                    else self._group_in_child(
                        f"gpuaccept/isolation/{number}/{mine}/",
                        groups[mine][1],
                        spec,
                        where,
                        deadlines,
                    )
                )
            shares = self._share(self._mine(figure))
            passed = []
            for (group, ranks), lead in zip(groups, leads, strict=True):
                figures = [shares[r].value for r in ranks]
                ok, said = group_passes(figures, floor, len(group), context.min_other_busbw_gbps)
                passed.append(ok)
                met = {} if stores is None else {"met_at": names[lead]}
                evidence.append(round_evidence(step, group, ok, said, **met))
            plan.record(passed)
        # no child of any node still meets at this node's store once every rank is here
        self.barrier()
        del held
        if launch.local_rank == 0:
            result = judge_isolation(plan.result(), evidence, floor, len(names))
            details = {
                **result.details,
                "rounds_in": in_ranks or "children",
                **(
                    {
                        "round_stores": {
                            names[node]: where
                            if isinstance(where, str)
                            else f"{where[0]}:{where[1]}"
                            for node, where in sorted(stores.items())
                        }
                    }
                    if stores is not None
                    else {}
                ),
                **(
                    {"min_other_busbw_gbps": dict(context.min_other_busbw_gbps)}
                    if context.min_other_busbw_gbps
                    else {}
                ),
                "round_deadlines_seconds": {"join": deadlines.join, "work": deadlines.work},
            }
            self._record(
                result.model_copy(
                    update={"details": details, "duration_seconds": time.monotonic() - started}
                )
            )

    def _round_stores(
        self, join_seconds: float
    ) -> tuple[dict[int, tuple[str, int] | str] | None, str | None, Any]:
        """Where the rounds' children meet: each node's own store, by node rank, as (address,
        port), or why that node's could not open (the groups it leads then fail, saying so);
        with the store this node serves (kept until the rounds end). Or None and why the rounds
        run in the job's own ranks (a hung round then ends the job). The same answer on every
        rank."""
        from gpuaccept.distributed.group_children import (
            is_loopback,
            open_files_room,
            open_node_store,
            peer_to_route_by,
            store_address,
        )
        from gpuaccept.distributed.local_ranks import error_line

        refusal = self._round_refusal()
        if refusal is None and self.launch.local_rank == 0:
            # any node may lead a round of every rank (the first one that passed its screen)
            room = open_files_room(self.launch.world)
            refusal = f"{self.launch.node_name}'s {room}" if room else None
        held: Any = None
        offer: tuple[str, int] | str | None = None
        if refusal is None and self.launch.local_rank == 0:
            try:
                job = (os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]))
                address = store_address(os.environ.get(LOCAL_ADDR_ENV), job)
                held, port = open_node_store(address, join_seconds)
                offer = (address, port)
            except (OSError, RuntimeError) as error:
                name = self.launch.node_name
                offer = f"{name}'s store for the rounds did not open: {error_line(error)}"
        shares = self._share(self._mine((refusal, offer)))
        said = [share.value[0] for share in shares if share.value[0]]
        if said:
            return None, f"the job's ranks: {said[0]}", None
        stores = {s.node_rank: s.value[1] for s in shares if s.local_rank == 0}
        peer = peer_to_route_by(stores)
        if peer is not None:
            # this node's own name led to its own host over loopback: announce instead the
            # address it reaches a peer from (the same decision on every rank, so every rank
            # joins this second gather)
            fix: tuple[str, int] | str | None = None
            if (
                isinstance(offer, tuple)
                and is_loopback(offer[0])
                and not os.environ.get(LOCAL_ADDR_ENV)
            ):
                try:
                    fix = (store_address(None, peer), offer[1])
                except OSError as error:
                    fix = (
                        f"{self.launch.node_name}'s store for the rounds has no address its "
                        f"peers reach: {error_line(error)}"
                    )
            stores |= {s.node_rank: s.value for s in self._share(self._mine(fix)) if s.value}
        return stores, None, held

    def _round_refusal(self) -> str | None:
        """Why this rank cannot start the rounds' children (None when it can)."""
        host, port = os.environ.get("MASTER_ADDR", ""), os.environ.get("MASTER_PORT", "")
        if not host or not port.isdigit():
            return "no MASTER_ADDR and MASTER_PORT for their children to meet at"
        if self.context.device_mode != "cuda":
            return None
        import torch

        from gpuaccept.probe.hardware import list_cuda_gpus, unshared_gpus

        gpu = next((g for g in list_cuda_gpus() if g.index == self.launch.local_rank), None)
        refusing = unshared_gpus([gpu.uuid]) if gpu is not None and gpu.uuid else []
        if refusing:
            return (
                f"{self.launch.node_name}'s compute mode refuses a second process "
                f"({', '.join(refusing)})"
            )
        # the children use the GPU this rank's allocator still holds from the checks before
        # (the NVLink-off screen's reason too)
        torch.cuda.empty_cache()
        return None

    def _group_in_child(
        self,
        key: str,
        ranks: list[int],
        spec: AllReduceSpec,
        store: tuple[str, int],
        deadlines: Deadlines,
    ) -> Any:
        """This rank's part of its group's collectives in a child of its own
        (distributed/group_children.py): the figure, or what went wrong as text."""
        from gpuaccept.distributed.group_children import GroupSeat, run_in_child
        from gpuaccept.measure.collectives import accept_collectives_rank

        cuda = self.context.device_mode == "cuda"
        seat = GroupSeat(
            key,
            ranks.index(self.launch.rank),
            len(ranks),
            "nccl" if cuda else "gloo",
            self.launch.local_rank if cuda else None,
        )
        return run_in_child(accept_collectives_rank, seat, spec, store, deadlines)

    def _screen_without_nvlink(
        self, step: Round, floor: float, evidence: list[dict[str, Any]]
    ) -> list[bool]:
        """Each node's collectives over all its GPUs with NVLink off, in ranks of their own that
        its local rank 0 starts (NCCL reads NCCL_P2P_DISABLE once per process: this job's ranks
        cannot switch it); every rank learns every node's outcome."""
        from gpuaccept.suite.isolation import NVLINK_OFF_ENV, node_alone_passes, round_evidence

        if self.context.device_mode == "cuda":
            import torch

            # the buffers of the rounds before are free but still held by each rank's caching
            # allocator: the screen's ranks, on the same GPUs, would size their all-reduce to
            # what is left (16 GiB at full), so every rank hands them back first
            torch.cuda.empty_cache()
        self.barrier()
        figure: Any = None
        if self.launch.local_rank == 0 and (self.launch.node_name,) in step.groups:
            figure = self._node_collectives(NVLINK_OFF_ENV)
        shares = self._share(self._mine(figure))
        passed = []
        for group in step.groups:
            value = shares[self._node_ranks(self.node_names.index(group[0]))[0]].value
            ok, said = node_alone_passes(value, floor)
            passed.append(ok)
            evidence.append(round_evidence(step, group, ok, said, nccl_env=dict(NVLINK_OFF_ENV)))
        return passed

    def _node_collectives(self, environ: Mapping[str, str]) -> Any:
        """This node's collectives over its GPUs (CPU: as many gloo ranks as this job has here)
        in fresh ranks under `environ`: the figure, the error as text, or NotScreened."""
        from gpuaccept.checks.collectives import allreduce_spec
        from gpuaccept.distributed.local_ranks import run_ranks
        from gpuaccept.measure.collectives import accept_collectives_rank
        from gpuaccept.suite.isolation import NotScreened

        cuda = self.context.device_mode == "cuda"
        if cuda:
            from gpuaccept.probe.hardware import list_cuda_gpus, unshared_gpus

            gpus = list_cuda_gpus()[: self.launch.local_world]
            if len(gpus) < self.launch.local_world:
                # a launcher that binds one GPU to each task: this rank cannot reach the others
                return NotScreened(
                    f"this rank sees {len(gpus)} of the node's {self.launch.local_world} GPUs"
                )
            refusing = unshared_gpus([g.uuid for g in gpus if g.uuid])
            if refusing:
                # this job's own ranks hold those GPUs: a second process gets no context there
                return NotScreened(f"compute mode of {', '.join(refusing)}")
        try:
            values = run_ranks(
                accept_collectives_rank,
                self.launch.local_world,
                allreduce_spec(self.context),
                self.context.settings.rank_timeout_seconds,
                "nccl" if cuda else "gloo",
                environ=environ,
            )
        except Interrupted:
            raise
        except Exception as error:
            return error_text(error)
        return values[0]

    def run_ib_pairs(self) -> None:
        """ib_write_bw between every pair of nodes, port k of one to port k of the other (the
        rails of a rail-optimised fabric): the lower node of each pair serves, the other
        connects to it. Every rank takes part in the barriers; each node's local rank 0 runs
        perftest. Without perftest or ACTIVE ports anywhere: SKIP, with the reason."""
        from gpuaccept.checks.network import judge_ib_pairs, pair_ports
        from gpuaccept.measure.perftest import (
            SERVER_START_SECONDS,
            PerftestError,
            ib_write_bw_path,
            run_client,
            start_server,
            stop_server,
        )

        launch = self.launch
        self._running("pairwise-ib")
        lead = launch.local_rank == 0
        started = time.monotonic()
        mine = pair_ports() if lead and ib_write_bw_path() is not None else []
        address = os.environ.get(LOCAL_ADDR_ENV) or socket.gethostname()
        me = _Share(launch.rank, launch.node_rank, launch.node_name, launch.local_rank)
        shares = self._share(replace(me, value=(address, mine) if lead else None))
        nodes = {s.node_rank: s.value for s in shares if s.local_rank == 0}
        figures: dict[tuple[int, int, str], float | str] = {}
        if all(value[1] for value in nodes.values()):
            base = 18515  # perftest's DEF_PORT (src/perftest_parameters.h), then one per rail
            for round_pairs in pair_rounds(launch.nodes):
                pair = next((p for p in round_pairs if launch.node_rank in p), None)
                servers = []
                if lead and pair is not None and pair[0] == launch.node_rank:
                    for k, (device, port, infiniband, _) in enumerate(mine):
                        servers.append(start_server(device, port, base + k, infiniband=infiniband))
                    time.sleep(SERVER_START_SECONDS)
                self.barrier()  # every server of the round is up
                if lead and pair is not None and pair[1] == launch.node_rank:
                    host = nodes[pair[0]][0]
                    theirs = nodes[pair[0]][1]
                    for k, (device, port, infiniband, _) in enumerate(mine[: len(theirs)]):
                        try:
                            figures[(pair[0], pair[1], f"{theirs[k][0]}:{theirs[k][1]}")] = (
                                run_client(host, device, port, base + k, infiniband=infiniband)
                            )
                        except PerftestError as error:
                            figures[(pair[0], pair[1], f"{theirs[k][0]}:{theirs[k][1]}")] = str(
                                error
                            )
                self.barrier()  # every client of the round is done
                for server in servers:
                    stop_server(server)
        gathered = self._share(replace(me, value=figures))
        if not lead:
            return
        measured: dict[tuple[int, int, str], float | str] = {}
        for share in gathered:
            measured.update(share.value or {})
        rates = {node: value[1] for node, value in nodes.items()}
        result = judge_ib_pairs(measured, self.node_names, rates)
        self._record(result.model_copy(update={"duration_seconds": time.monotonic() - started}))

    # --- the report -----------------------------------------------------------------------
    def report(
        self,
        started: datetime.datetime,
        clock: float,
        environment: dict[str, Any],
        interrupted_by: int | None = None,
        interrupted_check: str | None = None,
    ) -> RunReport:
        environment = {
            **environment,
            "launch": {
                "launcher": self.launch.launcher,
                "node": self.launch.node_name,
                "node_rank": self.launch.node_rank,
                "nodes": self.node_names,
                "ranks": self.launch.world,
            },
        }
        return RunReport.completed(
            command="accept",
            level=self.context.level,
            device_mode=self.context.device_mode,
            started=started,
            monotonic_start=clock,
            checks=self.node_results,
            environment=environment,
            interrupted_by=interrupted_by,
            interrupted_check=interrupted_check,
            rules=self.context.action_rules,
        )


def _own_wrong(value: Any) -> int:
    """The wrong elements a rank saw itself (all-reduce figures carry them)."""
    return int(getattr(value, "own_wrong", 0) or 0)


def pair_rounds(nodes: int) -> list[list[tuple[int, int]]]:
    """Every pair of nodes once, in rounds of disjoint pairs (the circle method)."""
    players: list[int | None] = list(range(nodes)) + ([None] if nodes % 2 else [])
    count = len(players)
    rounds = []
    for _ in range(count - 1):
        pairs = []
        for i in range(count // 2):
            a, b = players[i], players[count - 1 - i]
            if a is not None and b is not None:
                pairs.append((min(a, b), max(a, b)))
        rounds.append(pairs)
        players = [players[0], players[-1], *players[1:-1]]
    return rounds


def judge_pairs(measured: Mapping[tuple[int, int], Any], names: list[str]) -> CheckResult:
    """Per pair busbw (or the error it raised) -> the slowest or failing node, named.

    A node is failing when every pair it is in failed, or its median pair busbw is below
    PAIR_TOLERANCE x the median over all pairs; a pair that failed (an error, a deadline) fails
    the check too, named as the pair, where neither of its nodes failed every pair (the link
    between two nodes that each work with the others: once, it PASSED); with fewer than three
    nodes no single node can be singled out, and the result says so."""
    from gpuaccept.results import Measurement

    rows, failures, warnings = [], [], []
    busbw: dict[tuple[int, int], float] = {}
    for (a, b), figure in sorted(measured.items()):
        pair = f"{names[a]} + {names[b]}"
        if isinstance(figure, str):
            rows.append({"pair": pair, "busbw_gbps": None, "wrong": None, "error": figure})
            continue
        busbw[(a, b)] = figure.busbw_gbps
        rows.append(
            {
                "pair": pair,
                "busbw_gbps": figure.busbw_gbps,
                "wrong": figure.wrong_elements,
                "error": "",
            }
        )
        if figure.wrong_elements:
            failures.append(f"{pair}: {figure.wrong_elements} wrong element(s)")
    per_node = {
        node: [v for pair, v in busbw.items() if node in pair] for node in range(len(names))
    }
    broken = [names[n] for n, values in per_node.items() if not values and len(names) > 1]
    if broken:
        failures.append(f"every pair with {', '.join(broken)} failed")
    failures += [
        f"{names[a]} + {names[b]} failed: {figure}"
        for (a, b), figure in sorted(measured.items())
        if isinstance(figure, str) and names[a] not in broken and names[b] not in broken
    ]
    medians = {n: statistics.median(v) for n, v in per_node.items() if v}
    measurements = [
        Measurement(name="pair_busbw_gbps", value=v, unit="GB/s", device_name=names[n])
        for n, v in sorted(medians.items())
    ]
    overall = statistics.median(busbw.values()) if busbw else None
    slowest = min(medians, key=lambda n: medians[n]) if medians else None
    if len(names) >= 3 and overall and slowest is not None:
        slow = [n for n, v in medians.items() if v < PAIR_TOLERANCE * overall]
        for node in slow:
            failures.append(
                f"{names[node]} is slow: median pair busbw {medians[node]:.3g} GB/s, below "
                f"{PAIR_TOLERANCE:g} x the {overall:.3g} GB/s median of all pairs"
            )
    elif len(names) < 3:
        warnings.append(f"{len(names)} node(s): no node can be singled out (pairwise needs 3+)")
    details = {
        "columns": [
            ["pair", "pair"],
            ["busbw_gbps", "busbw (GB/s)"],
            ["wrong", "#wrong"],
            ["error", "error"],
        ],
        "rows": rows,
        "nodes": names,
    }
    if failures:
        status, message = Status.FAIL, "; ".join(failures)
    elif warnings:
        status, message = Status.WARN, "; ".join(warnings)
    else:
        status = Status.PASS
        message = (
            f"{len(busbw)} pair(s), median busbw {overall:.3g} GB/s; slowest node "
            f"{names[slowest]} ({medians[slowest]:.3g} GB/s)"
            if overall is not None and slowest is not None
            else "no pair measured"
        )
    return CheckResult(
        name="pairwise",
        area="COLLECTIVES",
        status=status,
        message=message,
        measurements=measurements,
        details=details,
    )
