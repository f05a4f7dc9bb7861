"""distributed/group_children: a group's collectives in children that meet through the job's
store, each bounded in time (issue #33 §1, a node that hangs in an isolation round). gloo on this
CPU, two children per group, each started by its own caller as each rank of a job starts its own.
"""

from __future__ import annotations

import datetime
import multiprocessing
import os
import socket
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
import torch.distributed as dist

from gpuaccept.checks.collectives import allreduce_spec
from gpuaccept.distributed.group_children import (
    Deadlines,
    GroupSeat,
    open_node_store,
    run_in_child,
    store_address,
)
from gpuaccept.distributed.local_ranks import lost_a_peer
from gpuaccept.measure.collectives import AllReduceFigure, accept_collectives_rank
from tests import faults
from tests.checks.conftest import cpu_context


@pytest.fixture
def store() -> Iterator[tuple[str, int]]:
    """The job's store, as the rank hosting it (or torchrun's agent) serves it."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = int(probe.getsockname()[1])
    master = dist.TCPStore(
        "127.0.0.1",
        port,
        is_master=True,
        wait_for_workers=False,
        timeout=datetime.timedelta(seconds=30),
    )
    yield "127.0.0.1", port
    del master


def _group(
    target: Any, payload: Any, store: tuple[str, int], deadlines: Deadlines, key: str = "r1/g0/"
) -> list[Any]:
    seats = [GroupSeat(key, rank, 2, "gloo") for rank in range(2)]
    with ThreadPoolExecutor(2) as pool:
        return list(pool.map(lambda s: run_in_child(target, s, payload, store, deadlines), seats))


def test_a_group_of_children_runs_the_collectives_exactly(store: tuple[str, int]) -> None:
    spec = allreduce_spec(cpu_context())
    figures = _group(accept_collectives_rank, spec, store, Deadlines(60, 60))
    for figure in figures:
        assert isinstance(figure, AllReduceFigure), figure
        assert figure.world_size == 2
        assert figure.wrong_elements == 0
        assert {o.collective for o in figure.others} == {"all_gather", "all_to_all"}
        assert all(o.wrong_elements == 0 for o in figure.others)
    # a second group under another key in the same store: no key of the first is read
    again = _group(accept_collectives_rank, spec, store, Deadlines(60, 60), key="r2/g0/")
    assert all(isinstance(f, AllReduceFigure) for f in again)


def test_a_child_that_hangs_is_stopped_at_the_deadline_and_so_is_its_waiting_peer(
    store: tuple[str, int],
) -> None:
    before = set(multiprocessing.active_children())
    started = time.monotonic()
    said = _group(faults.hang_on_rank1, None, store, Deadlines(60, 3))
    assert time.monotonic() - started < 20
    stopped = "did not finish its collectives within 3 s; stopped"
    assert said[1] == stopped
    # rank 0 waits in its all-reduce: stopped too, or (where rank 1's child was killed a moment
    # before rank 0's deadline, as in CI) told its peer is gone
    assert said[0] == stopped or lost_a_peer(said[0]), said
    assert set(multiprocessing.active_children()) <= before  # killed, not left to sleep on


def test_a_peer_that_never_comes_leaves_the_child_unjoined(store: tuple[str, int]) -> None:
    seat = GroupSeat("r1/g0/", 0, 2, "gloo")  # rank 1 is never started
    started = time.monotonic()
    said = run_in_child(faults.raise_on_rank1, seat, None, store, Deadlines(3, 60))
    assert time.monotonic() - started < 20
    assert said == "did not join its group within 3 s; stopped"


def test_a_child_that_raises_or_dies_says_so_in_one_line(store: tuple[str, int]) -> None:
    def alone(said: Any) -> bool:
        # rank 0: its own answer, or (where rank 1 left while rank 0 was still connecting,
        # seen under load) the peer it lost
        return said == 0 or (isinstance(said, str) and lost_a_peer(said))

    raised = _group(faults.raise_on_rank1, None, store, Deadlines(60, 60))
    assert alone(raised[0]), raised
    assert raised[1].startswith("RuntimeError: injected rank failure at faults.py:")
    nccl = _group(faults.raise_nccl_error_on_rank1, None, store, Deadlines(60, 60), key="r3/g0/")
    assert alone(nccl[0]), nccl
    assert nccl[1].startswith(
        "RuntimeError: NCCL error in: /pytorch/torch/csrc/distributed/c10d/NCCLUtils.cpp:93, "
        "invalid usage (run with NCCL_DEBUG=WARN for details), NCCL version 2.28.9; "
        "ncclInvalidUsage: This usually reflects invalid usage of NCCL library. Last error: "
        "Duplicate GPU detected : rank 0 and rank 1 both on CUDA device 60 at faults.py:"
    ), nccl
    died = _group(faults.die_on_rank1, None, store, Deadlines(60, 3), key="r2/g0/")
    # rank 0 sleeps on (die_on_rank1), and is stopped
    assert died[0] == "did not finish its collectives within 3 s; stopped" or alone(died[0])
    assert died[1] == "its process ended (exit 7) before it could finish its collectives"


def test_a_group_meets_at_its_first_nodes_own_store(store: tuple[str, int]) -> None:
    """The rounds' children meet at a store their group's first node serves on a port of its
    own, reached at this host's address on its route to the job's store (numeric: no client
    looks a name up), not at the job's store."""
    address = store_address(None, store)
    assert address == "127.0.0.1"
    held, port = open_node_store(address, 30)
    assert port not in (0, store[1])
    spec = allreduce_spec(cpu_context())
    figures = _group(accept_collectives_rank, spec, (address, port), Deadlines(60, 60))
    assert all(isinstance(f, AllReduceFigure) and f.wrong_elements == 0 for f in figures)
    del held


def test_the_address_the_operator_names_is_taken_as_given() -> None:
    # GPUACCEPT_LOCAL_ADDR: no lookup of the job's store's host, which need not resolve here
    assert store_address("10.1.2.3", ("node-x.invalid", 29500)) == "10.1.2.3"


def test_a_job_store_host_that_does_not_resolve_is_an_os_error() -> None:
    with pytest.raises(socket.gaierror):
        store_address(None, ("node-x.invalid", 29500))


def _limits(monkeypatch: pytest.MonkeyPatch, soft: int, hard: int) -> list[tuple[int, int]]:
    import resource

    raised: list[tuple[int, int]] = []

    def get(which: int) -> tuple[int, int]:
        assert which == resource.RLIMIT_NOFILE
        return soft, hard

    def set_(which: int, limits: tuple[int, int]) -> None:
        assert which == resource.RLIMIT_NOFILE
        raised.append(limits)

    monkeypatch.setattr(resource, "getrlimit", get)
    monkeypatch.setattr(resource, "setrlimit", set_)
    return raised


def _holding(monkeypatch: pytest.MonkeyPatch, descriptors: int | None) -> None:
    """This process holds `descriptors` open files (None: /proc/self/fd cannot be read)."""

    def listdir(path: str) -> list[str]:
        assert path == "/proc/self/fd"
        if descriptors is None:
            raise PermissionError(13, "Permission denied")
        return [str(n) for n in range(descriptors)]

    monkeypatch.setattr(os, "listdir", listdir)


def test_the_room_a_store_needs_is_its_clients_what_is_held_and_a_margin(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from gpuaccept.distributed.group_children import OPEN_FILES_MARGIN, open_files_room

    _holding(monkeypatch, 40)
    needed = 40 + 8000 + OPEN_FILES_MARGIN
    raised = _limits(monkeypatch, needed, needed)  # exactly enough: nothing to raise
    assert open_files_room(8000) is None
    assert raised == []
    raised = _limits(monkeypatch, needed - 1, needed)  # the hard limit exactly enough
    assert open_files_room(8000) is None
    assert raised == [(needed, needed)]
    raised = _limits(monkeypatch, 1024, needed - 1)
    assert open_files_room(8000) == (
        f"open-files limit ({needed - 1}) is below the {needed} a store for 8000 children "
        "needs (raise it: ulimit -n, or LimitNOFILE for the scheduler's daemon)"
    )
    assert raised == []
    # what this process holds cannot be read: the clients and the margin still count
    _holding(monkeypatch, None)
    raised = _limits(monkeypatch, 1024, 1_048_576)
    assert open_files_room(8000) is None
    assert raised == [(8000 + OPEN_FILES_MARGIN, 1_048_576)]


def test_a_store_for_many_children_raises_the_soft_open_files_limit_within_the_hard(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A whole round at 1,000 nodes of 8 GPUs connects 8,000 children to one store; a soft
    limit of 1,024 would refuse most of them (the store's accept fails, each waits out its
    deadline, and the round fails for no fault of the nodes)."""
    from gpuaccept.distributed.group_children import OPEN_FILES_MARGIN, open_files_room

    held = len(os.listdir("/proc/self/fd"))
    raised = _limits(monkeypatch, 1024, 1_048_576)
    assert open_files_room(8000) is None
    assert len(raised) == 1
    soft, hard = raised[0]
    assert hard == 1_048_576
    assert 8000 + OPEN_FILES_MARGIN <= soft <= 8000 + OPEN_FILES_MARGIN + held + 16
    # room already: nothing changed
    raised = _limits(monkeypatch, 1_048_576, 1_048_576)
    assert open_files_room(8000) is None
    assert raised == []


def test_a_hard_open_files_limit_below_the_round_is_said_not_exceeded(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from gpuaccept.distributed.group_children import open_files_room

    raised = _limits(monkeypatch, 1024, 4096)
    said = open_files_room(8000)
    assert said is not None
    assert said.startswith("open-files limit (4096) is below the ")
    assert "store for 8000 children" in said
    assert "ulimit -n" in said
    assert raised == []


def test_a_limit_that_cannot_be_raised_is_said_not_raised(monkeypatch: pytest.MonkeyPatch) -> None:
    import resource

    from gpuaccept.distributed.group_children import open_files_room

    def refuse(which: int, limits: tuple[int, int]) -> None:
        raise OSError(1, "Operation not permitted")

    monkeypatch.setattr(resource, "getrlimit", lambda which: (1024, 1_048_576))
    monkeypatch.setattr(resource, "setrlimit", refuse)
    said = open_files_room(8000)
    assert said is not None
    assert said.startswith("open-files limit (1024) could not be raised to ")
    assert said.endswith("Operation not permitted")


def test_loopback_addresses_are_told_from_others() -> None:
    from gpuaccept.distributed.group_children import is_loopback

    assert is_loopback("127.0.0.1")
    assert is_loopback("127.0.1.1")  # Debian's /etc/hosts line for the host's own name
    assert is_loopback("::1")
    assert not is_loopback("10.1.2.3")
    assert not is_loopback("fe80::1%eth0")
    assert not is_loopback("gpu-07")  # a name is not judged here


def test_a_node_that_announced_loopback_among_reachable_peers_is_told_whom_to_route_to() -> None:
    """The head node's name often resolves to 127.0.1.1 on the head node itself, so its route
    to the job's store (on itself) says loopback, which no peer can reach: it must route to a
    peer instead. On one host every node is on loopback, and rightly."""
    from gpuaccept.distributed.group_children import peer_to_route_by

    assert peer_to_route_by({0: ("127.0.1.1", 4000), 1: ("10.0.0.2", 4001)}) == ("10.0.0.2", 4001)
    assert peer_to_route_by({0: ("10.0.0.1", 4000), 1: ("10.0.0.2", 4001)}) is None
    assert peer_to_route_by({0: ("127.0.0.1", 4000), 1: ("127.0.0.1", 4001)}) is None
    # a node whose store did not open says so; it is neither
    assert peer_to_route_by({0: ("127.0.1.1", 4000), 1: "node-b's store did not open"}) is None
    assert peer_to_route_by({0: "no store", 1: ("127.0.1.1", 1), 2: ("10.0.0.3", 2)}) == (
        "10.0.0.3",
        2,
    )
