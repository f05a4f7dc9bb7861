"""Child processes that start with torch already imported: forked from one server that imported it.

Every warm worker and every local rank used to be a fresh interpreter importing torch (about 2 s
of CPU on the development machine, more on a shared file system, times one per GPU). They now
fork from a multiprocessing forkserver that imported torch once. The server never touches CUDA
(importing torch does not), so each child still makes its own CUDA context, as a spawned one did.

A forkserver child inherits the server's environment, fixed when the server started, not its
caller's. So every child is handed its caller's environment as it is now and adopts it before
its target runs; the one setting read at import time that matters here, OMP_NUM_THREADS, is
applied again through torch.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import tempfile
from collections.abc import Callable, Mapping
from multiprocessing.context import ForkServerContext, SpawnContext
from multiprocessing.process import BaseProcess
from typing import Any

# What the server imports before it forks anything: torch, and the check context with the
# pydantic models every check's job carries (a third of a second more per child otherwise).
# A module listed here must read no environment at import: it would keep the server's values.
PRELOAD = ["torch", "gpuaccept.checks.context"]

# The forkserver listens on a Unix socket at <temp dir>/pymp-XXXXXXXX/listener-XXXXXXXX
# (multiprocessing/connection.py arbitrary_address, util.get_temp_dir), and a socket path holds
# at most 107 bytes (sun_path is 108, sys/un.h; CPython keeps one for the NUL). Under a longer
# temporary directory (a deep TMPDIR, as a batch system or pytest gives) the first child fails
# to start with "AF_UNIX path too long".
_SOCKET_PATH_MAX = 107
_SOCKET_SUFFIX = len("/pymp-XXXXXXXX/listener-XXXXXXXX")


def how_it_ended(exitcode: int) -> str:
    """A child's non-zero exit in words: 'exit 7', or the signal that killed it by name. SIGKILL
    names the kernel's out-of-memory killer, its usual sender on a node (mm/oom_kill.c,
    __oom_kill_task: `force_sig(SIGKILL, p)`, torvalds/linux 01017a22), so an operator looks in
    the kernel log rather than at the GPU."""
    if exitcode >= 0:
        return f"exit {exitcode}"
    try:
        name = signal.Signals(-exitcode).name
    except ValueError:
        return f"killed by signal {-exitcode}"
    if -exitcode == signal.SIGKILL:
        return f"killed by {name}: the out-of-memory killer's signal, see the kernel log (dmesg)"
    return f"killed by {name}"


def forkserver_fits(temp_dir: str | None = None) -> bool:
    """Whether the forkserver's socket path fits under `temp_dir` (default: the current one)."""
    where = tempfile.gettempdir() if temp_dir is None else temp_dir
    return len(os.fsencode(os.path.abspath(where))) + _SOCKET_SUFFIX <= _SOCKET_PATH_MAX


def process_context() -> ForkServerContext | SpawnContext:
    """The forkserver context, with torch preloaded; spawn where the platform has no forkserver
    or its socket would not fit under the temporary directory (each child then imports torch
    itself: slower to start, same results)."""
    if "forkserver" not in multiprocessing.get_all_start_methods() or not forkserver_fits():
        return multiprocessing.get_context("spawn")
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(PRELOAD)  # no effect once the server runs, which is fine
    return context


def start_server() -> None:
    """Start the server now, so its torch import runs beside this process's own start-up."""
    if isinstance(process_context(), ForkServerContext):
        from multiprocessing import forkserver

        forkserver.ensure_running()


def child_process(
    target: Callable[..., Any],
    args: tuple[Any, ...],
    *,
    name: str | None = None,
    daemon: bool | None = None,
    environ: Mapping[str, str] | None = None,
) -> BaseProcess:
    """An unstarted child that runs `target(*args)` in this process's current environment,
    with `environ`'s variables set over it."""
    return process_context().Process(
        target=_in_environment,
        args=({**os.environ, **(environ or {})}, target, args),
        name=name,
        daemon=daemon,
    )


def _in_environment(
    environ: dict[str, str], target: Callable[..., Any], args: tuple[Any, ...]
) -> Any:
    adopt_environment(environ)
    return target(*args)


def adopt_environment(environ: dict[str, str]) -> None:
    """Make this process's environment `environ`, and its torch thread count follow it."""
    if environ != os.environ:
        os.environ.clear()
        os.environ.update(environ)
    threads = environ.get("OMP_NUM_THREADS", "").strip()
    if threads.isdigit() and int(threads) > 0:
        import torch

        if torch.get_num_threads() != int(threads):
            torch.set_num_threads(int(threads))
