"""One rank's part of a group's collectives, run in a child process with a deadline (issue #33 §1).

`accept --isolate` exists to find the node that breaks a collective, and a broken node often
hangs one rather than slowing it. Run in the job's own ranks, a hung collective holds its round
until the process group's timeout, and then NCCL's watchdog ends the process (torch 2.13's
default error handling is 3, SkipCleanUp, and torchrun sets 1, TearDown, for its workers: both
tear the process down, include/torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp:64-69,160-174
and torch/distributed/elastic/agent/server/local_elastic_agent.py:430-432), so the job ends with
no suspect named. NVIDIA's Cluster Readiness Engine runs each NCCL test as a workload of its
own (docs.nvidia.com/cluster-readiness-engine, how-to-guides/run-nccl-benchmarks: a WorkloadRun).
Here each rank of a round's group starts one child; the group's children meet through the store
of the group's first node (a key of their own in it), run the collectives, and hand back the
figure. Not the job's own store: its server resolves every client's address on its one thread
before it serves anyone (benchmarks/store_load.py: 256 clients 25 s), and a round at 1,000 nodes
of 8 GPUs connects 8,000 children; with a store on each node, each serves only the groups that
node leads, all at once, and torchrun's own store is left to torchrun. A child
that has not joined its group, or not finished, by its deadline is killed: its rank reports the
error as text, the group fails that round, and the job goes on to the next.
"""

from __future__ import annotations

import datetime
import queue
import socket
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from gpuaccept.distributed.children import child_process, how_it_ended, process_context
from gpuaccept.distributed.local_ranks import RankTarget, error_line, work_then_leave
from gpuaccept.interrupts import deferred, raise_if_interrupted

_PHASE = {False: "join its group", True: "finish its collectives"}  # by whether it joined
_EXIT_GRACE_SECONDS = 1.0  # a child's last result may still be on its way out when it exits


def store_address(given: str | None, job_store: tuple[str, int]) -> str:
    """The address other nodes reach this node's store at: `given` (GPUACCEPT_LOCAL_ADDR) where
    the operator named one, else this host's address on its route to the job's store. That one
    is numeric (no client looks it up) and on the network every node already reaches the job's
    store through. Raises OSError when the job's store's host cannot be resolved or routed to."""
    if given:
        return given
    host, port = job_store
    family, _, _, _, where = socket.getaddrinfo(host, port, type=socket.SOCK_DGRAM)[0]
    # a UDP socket's connect only picks the route and the source address; nothing is sent
    with socket.socket(family, socket.SOCK_DGRAM) as probe:
        probe.connect(where)
        return str(probe.getsockname()[0])


def is_loopback(address: str) -> bool:
    """Whether `address` is a loopback literal (127.0.0.0/8, ::1); a host name is not."""
    import ipaddress

    try:
        return ipaddress.ip_address(address).is_loopback  # a scoped IPv6 address parses too
    except ValueError:
        return False


def peer_to_route_by(offers: Mapping[int, tuple[str, int] | str]) -> tuple[str, int] | None:
    """Where the nodes that announced a loopback address should route to instead, to learn the
    address their peers reach them at: the first other node's store that is not on a loopback
    address. None when no node announced one, or when every node did (one host: loopback is
    right). A node whose name resolves to itself on 127.0.1.1 (what Debian's installer writes
    in /etc/hosts) routes to the job's store, on its own host, over loopback."""
    addresses = [offer for offer in offers.values() if not isinstance(offer, str)]
    reachable = [offer for offer in addresses if not is_loopback(offer[0])]
    if not reachable or len(reachable) == len(addresses):
        return None
    return reachable[0]


# descriptors a rank's process holds beside its store's clients (its own files, sockets, pipes)
OPEN_FILES_MARGIN = 256


def open_files_room(clients: int) -> str | None:
    """Make room in this process's open-files limit for a store that `clients` children may
    connect to at once (a whole round at 1,000 nodes of 8 GPUs: 8,000; past the soft limit the
    store's accept fails and children wait out their deadline): raise the soft limit as far as
    needed, within the hard one. Why it cannot (None when it can). systemd starts services at
    1,024 soft and 524,288 hard so that select() users keep working, and its systemd.exec(5)
    says "applications should increase their soft limit to the hard limit on their own, if they
    are OK with working with file descriptors above 1023" (as qemu 03e471c4 quotes it; the
    defaults: golang/go#46279); torch's store serves with libuv (epoll), not select()."""
    import os
    import resource

    try:
        held = len(os.listdir("/proc/self/fd"))
    except OSError:
        held = 0
    needed = held + clients + OPEN_FILES_MARGIN
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY or soft >= needed:
        return None
    if hard != resource.RLIM_INFINITY and hard < needed:
        return (
            f"open-files limit ({hard}) is below the {needed} a store for {clients} "
            "children needs (raise it: ulimit -n, or LimitNOFILE for the scheduler's daemon)"
        )
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (needed, hard))
    except (OSError, ValueError) as error:  # a sandbox's seccomp filter, for one
        return f"open-files limit ({soft}) could not be raised to {needed}: {error}"
    return None


def open_node_store(address: str, timeout_seconds: float) -> tuple[Any, int]:
    """A store for the children of the groups this node leads, on a port the system picks:
    (the store, which serves while it is referenced; its port). Raises RuntimeError (torch's
    DistStoreError and DistNetworkError derive from it) or OSError when it cannot listen."""
    import torch.distributed as dist

    store = dist.TCPStore(  # type: ignore[attr-defined]
        address,
        0,
        None,
        True,
        timeout=datetime.timedelta(seconds=max(timeout_seconds, 1.0)),
        wait_for_workers=False,
    )
    return store, int(store.port)


@dataclass(frozen=True)
class GroupSeat:
    """Where a child sits: its group's key in the store, its rank in the group (the ascending
    order of the job's ranks), the group's size, the backend, and its GPU (None on the CPU)."""

    key: str
    rank: int
    world: int
    backend: str
    device_index: int | None = None


@dataclass(frozen=True)
class Deadlines:
    """Seconds for the child to join its group (start, store, rendezvous), then for the work."""

    join: float
    work: float


def run_in_child(
    target: RankTarget,
    seat: GroupSeat,
    payload: Any,
    store: tuple[str, int],
    deadlines: Deadlines,
) -> Any:
    """`target(seat.rank, seat.world, payload)` in a child joined to its group through the store
    at `store` (host, port): its value, or what went wrong as one line of text (an error raised
    in the child, a deadline passed, the child dead without a word). Never raises for the
    child's trouble; an interruption of this process still raises."""
    context = process_context()
    results = context.Queue()
    # set in shared memory, not sent on the queue: a child that dies at once after joining
    # (os._exit) takes the queue's unsent items with it
    joined = context.Value("b", 0)
    child = child_process(
        _child_entry, (target, seat, payload, store, deadlines.join, results, joined), daemon=True
    )
    with deferred():  # started and so killed below, or never started
        child.start()
    try:
        return _wait(child, results, joined, deadlines)
    finally:
        if child.is_alive():
            child.kill()
        child.join(timeout=10)


def _wait(child: Any, results: Any, joined: Any, deadlines: Deadlines) -> Any:
    working = False
    deadline = time.monotonic() + deadlines.join
    while True:
        raise_if_interrupted()
        if joined.value and not working:
            working, deadline = True, time.monotonic() + deadlines.work
        allowed = deadlines.work if working else deadlines.join
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return f"did not {_PHASE[working]} within {allowed:g} s; stopped"
        try:
            value = results.get(timeout=min(remaining, 0.5))
        except queue.Empty:
            if child.is_alive():
                continue
            try:
                value = results.get(timeout=_EXIT_GRACE_SECONDS)
            except queue.Empty:
                after = _PHASE[bool(joined.value)]
                return f"its process ended ({how_it_ended(child.exitcode)}) before it could {after}"
        return value  # the figure, or the error's text


def _child_entry(
    target: RankTarget,
    seat: GroupSeat,
    payload: Any,
    store: tuple[str, int],
    join_seconds: float,
    results: Any,
    joined: Any,
) -> None:
    import torch
    import torch.distributed as dist

    try:
        if seat.device_index is not None:
            torch.cuda.set_device(seat.device_index)
        timeout = datetime.timedelta(seconds=max(join_seconds, 1.0))
        host, port = store
        shared = dist.TCPStore(host, port, is_master=False, timeout=timeout)  # type: ignore[attr-defined]
        dist.init_process_group(
            seat.backend,
            store=dist.PrefixStore(seat.key, shared),  # type: ignore[attr-defined]
            rank=seat.rank,
            world_size=seat.world,
            timeout=timeout,
            # NCCL makes its communicator now, not at the first collective: its start-up at a
            # fleet's size belongs to the join, not to the collectives' deadline
            device_id=(
                torch.device("cuda", seat.device_index) if seat.device_index is not None else None
            ),
        )
        joined.value = 1
        results.put(work_then_leave(target, seat.rank, seat.world, payload))
    except BaseException as error:
        results.put(error_line(error))
