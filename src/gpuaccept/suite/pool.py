"""The suite's side of its warm workers: start them together, hand out jobs, wait with deadlines,
and replace a worker that crashed or outlived its job.

A worker that times out is killed with its whole process group (rank processes it started go
with it); the slot gets a fresh worker the next time a job needs it.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import signal
import time
from dataclasses import dataclass
from multiprocessing.connection import wait
from typing import Any

from gpuaccept.distributed.children import child_process, how_it_ended
from gpuaccept.interrupts import deferred
from gpuaccept.suite.worker import HOST_SLOT, Job, Reply, WorkerSpec, worker_main

# Importing torch and making a CUDA context takes seconds; on a loaded node or a slow shared
# file system it can take minutes. Past this, the worker counts as failed to start.
STARTUP_TIMEOUT_SECONDS = 300.0
# After one rank of a group fails, how long its peers get to report before they are killed.
PEER_GRACE_SECONDS = 2.0
# How long workers get to exit by themselves at the end of a run before they are killed.
CLOSE_GRACE_SECONDS = 5.0


@dataclass(frozen=True)
class Failure:
    """Why a job has no reply: the worker timed out, died, or never started."""

    message: str


Outcome = Reply | Failure


class _Worker:
    def __init__(self, spec: WorkerSpec) -> None:
        self.spec = spec
        self.connection, child = multiprocessing.Pipe(duplex=True)
        self.process = child_process(
            worker_main, (child, spec), name=f"gpuaccept-worker-{spec.slot}"
        )
        self.process.start()
        child.close()
        self.ready = False
        self.started = time.monotonic()

    def how_it_died(self) -> str:
        self.process.join(timeout=1)
        code = self.process.exitcode
        if code is None:
            return "stopped answering"
        return f"died ({how_it_ended(code)})" if code < 0 else f"died (exit code {code})"

    def kill(self) -> None:
        if self.process.pid is not None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.process.pid, signal.SIGKILL)
            with contextlib.suppress(ProcessLookupError, PermissionError):
                self.process.kill()
        self.process.join(timeout=10)
        self.connection.close()


class WorkerPool:
    """Workers by slot; slot i owns GPU i (`gpus[i]` = (index, uuid)) or, in CPU mode, the CPU;
    HOST_SLOT owns none."""

    def __init__(self, device_mode: str, gpus: list[tuple[int, str | None]]) -> None:
        self.device_mode = device_mode
        self._gpus = gpus
        self._workers: dict[int, _Worker] = {}

    def _spec(self, slot: int) -> WorkerSpec:
        if slot == HOST_SLOT:
            return WorkerSpec(slot, "cpu", None)
        if self.device_mode == "cuda":
            index, uuid = self._gpus[slot]
            return WorkerSpec(slot, "cuda", index, uuid)
        return WorkerSpec(slot, "cpu", None)

    def live_slots(self) -> list[int]:
        """The slots that have a worker now (a killed one is gone until a job needs it)."""
        return sorted(self._workers)

    def start(self, slots: list[int]) -> None:
        """Start a worker for every slot that has none (they boot in parallel)."""
        with deferred():  # each started worker is in the pool, so the pool's close ends it
            for slot in slots:
                if slot not in self._workers:
                    self._workers[slot] = _Worker(self._spec(slot))

    def await_ready(self, slots: list[int]) -> dict[int, Failure]:
        """Wait until the given slots' workers have booted; a failure for each that did not."""
        self.start(slots)
        failures: dict[int, Failure] = {}
        pending = {slot for slot in slots if not self._workers[slot].ready}
        while pending:
            by_connection = {self._workers[slot].connection: slot for slot in pending}
            oldest = min(self._workers[slot].started for slot in pending)
            remaining = STARTUP_TIMEOUT_SECONDS - (time.monotonic() - oldest)
            ready = wait(list(by_connection), timeout=max(remaining, 0))
            if not ready:
                for slot in pending:
                    failures[slot] = Failure(
                        f"worker did not start within {STARTUP_TIMEOUT_SECONDS:g} s"
                    )
                    self.discard(slot)
                return failures
            for connection in ready:
                slot = by_connection[connection]  # type: ignore[index]
                worker = self._workers[slot]
                try:
                    message = worker.connection.recv()
                except (EOFError, OSError):
                    failures[slot] = Failure(f"worker could not start: it {worker.how_it_died()}")
                    self.discard(slot)
                else:
                    worker.ready = message[0] == "ready"
                pending.discard(slot)
        return failures

    def run(
        self, jobs: dict[int, Job], timeout_seconds: float, *, together: bool = False
    ) -> dict[int, Outcome]:
        """Run each job on its slot's worker at once; every job gets the same deadline.

        `together`: the jobs are ranks of one process group, so once one fails the others can
        only hang in their next collective; they get a short grace, then are killed.
        """
        outcomes: dict[int, Outcome] = dict(self.await_ready(list(jobs)))
        if together and outcomes:
            # a group with a missing rank can only hang: run none of it
            for slot in jobs:
                outcomes.setdefault(slot, Failure("not run: a peer rank's worker did not start"))
            return outcomes
        running: dict[Any, int] = {}
        for slot, job in jobs.items():
            if slot in outcomes:
                continue
            worker = self._workers[slot]
            try:
                worker.connection.send(job)
            except (OSError, ValueError) as error:
                outcomes[slot] = Failure(f"could not hand the job to its worker: {error}")
                self.discard(slot)
                continue
            running[worker.connection] = slot
        deadline = time.monotonic() + timeout_seconds
        peer_failed = False
        while running:
            remaining = deadline - time.monotonic()
            ready = wait(list(running), timeout=remaining) if remaining > 0 else []
            if not ready:
                for slot in running.values():
                    outcomes[slot] = Failure(
                        "stopped: a peer rank failed first"
                        if peer_failed
                        else f"timed out after {timeout_seconds:g} s"
                    )
                    self.discard(slot)
                break
            for connection in ready:
                slot = running.pop(connection)
                outcome = self._receive(slot)
                outcomes[slot] = outcome
                failed = isinstance(outcome, Failure) or not outcome.ok
                if failed and together and not peer_failed:
                    peer_failed = True
                    deadline = min(deadline, time.monotonic() + PEER_GRACE_SECONDS)
        return outcomes

    def _receive(self, slot: int) -> Outcome:
        worker = self._workers[slot]
        try:
            reply: Reply = worker.connection.recv()
        except (EOFError, OSError):
            how = worker.how_it_died()
            self.discard(slot)
            return Failure(f"worker process {how} before reporting a result")
        if not reply.ok:
            # An exception may have left a CUDA context broken: start clean next time.
            self.discard(slot)
        return reply

    def discard(self, slot: int) -> None:
        """Kill the slot's worker (and its process group); the next job starts a fresh one."""
        worker = self._workers.pop(slot, None)
        if worker is not None:
            worker.kill()

    def close(self, *, kill: bool = False) -> None:
        """Stop every worker: politely (they finish nothing new) or, with `kill`, at once.

        Every worker is told first and then awaited, so they shut down (torch, CUDA context) side
        by side rather than one after another; one that has not gone within the grace is killed.
        """
        if not kill:
            for worker in self._workers.values():
                if worker.process.is_alive():
                    with contextlib.suppress(OSError, ValueError):
                        worker.connection.send(None)
            deadline = time.monotonic() + CLOSE_GRACE_SECONDS
            for worker in self._workers.values():
                worker.process.join(timeout=max(deadline - time.monotonic(), 0))
        for slot in list(self._workers):
            self.discard(slot)
