"""Run a function on N local ranks, one process each, with a deadline: NCCL on GPUs, gloo on CPU.

Rendezvous goes through a fresh file store (no port to race for). A rank that raises, dies or
outlives the deadline becomes an exception in the caller, and every rank still alive is killed,
so a hung collective can never hang the suite.
"""

from __future__ import annotations

import contextlib
import datetime
import os
import queue
import tempfile
import time
import traceback
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from gpuaccept.distributed.children import child_process, how_it_ended, process_context
from gpuaccept.errors import GpuacceptError, InputError
from gpuaccept.interrupts import deferred, raise_if_interrupted

RankTarget = Callable[[int, int, Any], Any]


class RanksFailed(GpuacceptError):
    """A rank raised or died."""


class RanksTimedOut(GpuacceptError):
    """Some ranks did not finish before the deadline (a hung collective, typically)."""


def refuse_external_launch(environ: Mapping[str, str] | None = None) -> None:
    """`accept` spawns its own ranks: under torchrun every rank would repeat the whole suite."""
    env = os.environ if environ is None else environ
    world = env.get("WORLD_SIZE", "1")
    if world.strip() not in ("", "0", "1"):
        raise InputError(
            f"gpuaccept accept starts one process per GPU itself; it is running under a "
            f"launcher with WORLD_SIZE={world}: run it once per node, without torchrun"
        )


def _rank_entry(
    target: RankTarget,
    rank: int,
    world_size: int,
    backend: str,
    store_path: str,
    timeout_seconds: float,
    payload: Any,
    results: Any,
) -> None:
    import torch
    import torch.distributed as dist

    try:
        if backend == "nccl":
            torch.cuda.set_device(rank)
        dist.init_process_group(
            backend,
            init_method=f"file://{store_path}",
            rank=rank,
            world_size=world_size,
            timeout=datetime.timedelta(seconds=max(timeout_seconds, 1.0)),
        )
        results.put(("ok", rank, work_then_leave(target, rank, world_size, payload)))
    except BaseException as error:
        results.put(("error", rank, error_line(error)))


def work_then_leave(target: RankTarget, rank: int, world_size: int, payload: Any) -> Any:
    """`target`'s value in an initialised process group, which is then left."""
    import torch.distributed as dist

    try:
        value = target(rank, world_size, payload)
        # A rank whose work needed no message must not tear the group down while a peer is
        # still joining it: the peer's connect then fails ("closed by peer"), as one did on a
        # loaded 2-core machine. Its result is made already, so a failure here is no news.
        with contextlib.suppress(Exception):
            dist.barrier()
        return value
    finally:
        dist.destroy_process_group()


def error_line(error: BaseException) -> str:
    """The error as one line: its type, message and where it was raised. NCCL's errors run over
    several lines, the cause last ("...NCCL version 2.28.9\nncclInvalidUsage: ...\nLast
    error:\nDuplicate GPU detected : rank 0 and rank 1 both on CUDA device 60", seen on an
    H200): a report's evidence and a table's row keep all of it, on one line."""
    last = traceback.extract_tb(error.__traceback__)[-1:]
    where = f" at {Path(last[0].filename).name}:{last[0].lineno}" if last else ""
    said = ""
    for line in filter(None, (line.strip() for line in str(error).splitlines())):
        said += line if not said else (" " if said[-1] in ".:;," else "; ") + line
    return f"{type(error).__name__}: {said}{where}"


def run_ranks(
    target: RankTarget,
    world_size: int,
    payload: Any,
    timeout_seconds: float,
    backend: str,
    environ: Mapping[str, str] | None = None,
) -> list[Any]:
    """Results of `target(rank, world_size, payload)` for every rank, in rank order; `environ`
    is set over this process's environment in the ranks (NCCL reads its settings once per
    process, so a setting for one run needs ranks of its own)."""
    if world_size < 1:
        raise ValueError("world_size must be at least 1")
    results = process_context().Queue()
    with tempfile.TemporaryDirectory(prefix="gpuaccept-ranks-") as scratch:
        store = os.path.join(scratch, "store")
        processes = [
            child_process(
                _rank_entry,
                (target, rank, world_size, backend, store, timeout_seconds, payload, results),
                daemon=True,
                environ=environ,
            )
            for rank in range(world_size)
        ]
        try:
            with deferred():  # every rank started, and so ended below, or none
                for process in processes:
                    process.start()
            return _collect(processes, results, world_size, timeout_seconds)
        finally:
            for process in processes:
                if process.pid is None:
                    continue  # never started (an error while starting an earlier one)
                if process.is_alive():
                    process.kill()
                process.join(timeout=10)


def _collect(
    processes: list[Any], results: Any, world_size: int, timeout_seconds: float
) -> list[Any]:
    deadline = time.monotonic() + timeout_seconds
    done: dict[int, Any] = {}
    while len(done) < world_size:
        raise_if_interrupted()  # a signal whose exception was lost: not minutes more of waiting
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            missing = sorted(set(range(world_size)) - set(done))
            raise RanksTimedOut(
                f"rank(s) {', '.join(map(str, missing))} of {world_size} did not finish within "
                f"{timeout_seconds:g} s (hung collective?)"
            )
        try:
            status, rank, value = results.get(timeout=min(remaining, 0.5))
        except queue.Empty:
            died = _deaths(processes, done)
            if died:
                raise RanksFailed(f"rank process died without a result ({died})") from None
            continue
        if status == "error":
            # A peer's death or error often surfaces first as this rank's connection error:
            # give the peers a moment, and name the dead one or the one that failed on its own,
            # since that is the cause to chase.
            time.sleep(1.0)
            errors = {rank: value, **_more_errors(results)}
            died = _deaths(processes, done)
            cause = f"rank process died without a result ({died}); then " if died else ""
            first = min(errors, key=lambda r: (lost_a_peer(errors[r]), r))
            others = sorted(set(errors) - {first})
            then = f" (then rank(s) {', '.join(map(str, others))} too)" if others else ""
            raise RanksFailed(f"{cause}rank {first} of {world_size} failed: {errors[first]}{then}")
        done[rank] = value
    return [done[rank] for rank in range(world_size)]


# What a rank says when another went away first: gloo's transport ("Connection closed by peer",
# seen here when a peer raised while this rank was still joining; pair.cc), the OS's for a
# reset or broken connection, NCCL's ncclRemoteError (nccl 5067397c src/init.cc:3430)
_PEER_LOSS = (
    "closed by peer",
    "reset by peer",
    "Broken pipe",
    "remote process exited or there was a network error",
)


def lost_a_peer(error: str) -> bool:
    """Whether a rank's error says only that another went away first (its echo, not a cause)."""
    return any(marker in error for marker in _PEER_LOSS)


def _more_errors(results: Any) -> dict[int, str]:
    """The errors other ranks have reported by now (their results are not needed any more)."""
    errors: dict[int, str] = {}
    while True:
        try:
            status, rank, value = results.get_nowait()
        except queue.Empty:
            return errors
        if status == "error":
            errors[rank] = value


def _deaths(processes: list[Any], done: dict[int, Any]) -> str:
    """'rank R exit C, rank S killed by SIGNAL, ...' for ranks that ended without a result and
    not with exit 0 ('' if none)."""
    return ", ".join(
        f"rank {rank} {how_it_ended(process.exitcode)}"
        for rank, process in enumerate(processes)
        if rank not in done and process.exitcode not in (None, 0)
    )
