"""Children forked from the torch-preloaded server see their caller's environment as it is now."""

from __future__ import annotations

import os
import subprocess
import sys
from typing import Any

import pytest

from gpuaccept.distributed import children
from gpuaccept.distributed.local_ranks import run_ranks


def _what_a_rank_sees(rank: int, world: int, names: tuple[str, ...]) -> dict[str, Any]:
    import sys

    import torch

    return {
        "environ": {name: os.environ.get(name) for name in names},
        "threads": torch.get_num_threads(),
        "parent": os.getppid(),
        "torch_before_target": "torch" in sys.modules,
    }


def test_a_child_adopts_the_environment_of_its_caller_not_of_the_server(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # the server starts (or already runs) with one environment...
    monkeypatch.setenv("GPUACCEPT_TEST_SETTING", "at-server-start")
    monkeypatch.setenv("GPUACCEPT_TEST_GONE", "set")
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    children.start_server()
    # ...and the caller's changes since then still reach every child
    monkeypatch.setenv("GPUACCEPT_TEST_SETTING", "now")
    monkeypatch.delenv("GPUACCEPT_TEST_GONE")
    monkeypatch.setenv("OMP_NUM_THREADS", "2")
    names = ("GPUACCEPT_TEST_SETTING", "GPUACCEPT_TEST_GONE", "OMP_NUM_THREADS")
    seen = run_ranks(_what_a_rank_sees, 2, names, 60, "gloo")
    for rank in seen:
        assert rank["environ"] == {
            "GPUACCEPT_TEST_SETTING": "now",
            "GPUACCEPT_TEST_GONE": None,
            "OMP_NUM_THREADS": "2",
        }
        assert rank["threads"] == 2  # read at torch's import, in the server: set again
        assert rank["parent"] != os.getpid()  # forked by the server, not by this process


def test_ranks_given_settings_of_their_own_see_them_over_the_callers_and_the_caller_not(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # how the NVLink-off screen hands NCCL its switches: NCCL reads them once per process
    monkeypatch.setenv("GPUACCEPT_TEST_SETTING", "caller")
    monkeypatch.setenv("NCCL_P2P_DISABLE", "0")
    names = ("GPUACCEPT_TEST_SETTING", "NCCL_P2P_DISABLE", "NCCL_NVLS_ENABLE")
    overrides = {"NCCL_P2P_DISABLE": "1", "NCCL_NVLS_ENABLE": "0"}
    seen = run_ranks(_what_a_rank_sees, 2, names, 60, "gloo", environ=overrides)
    for rank in seen:
        assert rank["environ"] == {
            "GPUACCEPT_TEST_SETTING": "caller",
            "NCCL_P2P_DISABLE": "1",
            "NCCL_NVLS_ENABLE": "0",
        }
    assert os.environ["NCCL_P2P_DISABLE"] == "0"
    assert "NCCL_NVLS_ENABLE" not in os.environ
    plain = run_ranks(_what_a_rank_sees, 1, names, 60, "gloo")
    assert plain[0]["environ"]["NCCL_P2P_DISABLE"] == "0"  # the next ranks: the caller's again


# Imports torch, then the server's other preloads with os.environ recording which of our modules
# read it (the libraries under them read a few settings of their own, e.g. pydantic its plugins).
_RECORD_ENVIRONMENT_READS = """
import collections.abc, os, sys
import torch
from gpuaccept.distributed.children import PRELOAD

class Recording(collections.abc.MutableMapping):
    def __init__(self, real):
        self.real, self.read = real, set()
    def _note(self, key):
        frame = sys._getframe(1)
        while frame.f_globals.get("__name__") in ("collections.abc", "os", "__main__"):
            frame = frame.f_back
        reader = frame.f_globals.get("__name__", "")
        if reader.startswith("gpuaccept"):
            self.read.add(f"{reader}: {key}")
    def __getitem__(self, key):
        self._note(key)
        return self.real[key]
    def __setitem__(self, key, value):
        self.real[key] = value
    def __delitem__(self, key):
        del self.real[key]
    def __iter__(self):
        self._note("(every name)")
        return iter(self.real)
    def __len__(self):
        return len(self.real)

os.environ = recording = Recording(os.environ)
for name in PRELOAD[1:]:
    __import__(name)
print(sorted(recording.read))
"""


def test_nothing_the_server_preloads_besides_torch_reads_the_environment() -> None:
    """A preloaded module that read a setting at import would keep the server's value in every
    child, whatever the caller's environment says."""
    done = subprocess.run(
        [sys.executable, "-c", _RECORD_ENVIRONMENT_READS],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    assert children.PRELOAD[0] == "torch"
    assert done.stdout.strip() == "[]", done.stdout


def _bind_under(directory: str) -> bool:
    """Whether a Unix socket binds at the forkserver's path shape under `directory`."""
    import socket

    path = os.path.join(directory, "pymp-" + "x" * 8, "listener-" + "y" * 8)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with socket.socket(socket.AF_UNIX) as listener:
        try:
            listener.bind(path)
        except OSError:
            return False
    os.unlink(path)
    return True


def test_the_forkserver_is_used_exactly_where_its_socket_path_fits() -> None:
    import shutil
    import tempfile

    base = tempfile.mkdtemp(dir="/tmp")  # pytest's own directories are too deep to start from
    try:
        longest = os.path.join(base, "d" * (75 - len(base) - 1))  # 75 + 32 = 107 bytes
        too_long = longest + "e"
        for directory in (longest, too_long):
            os.makedirs(directory)
        assert children.forkserver_fits(longest)
        assert _bind_under(longest)
        assert not children.forkserver_fits(too_long)
        assert not _bind_under(too_long)
    finally:
        shutil.rmtree(base)


def test_ranks_still_run_under_a_temporary_directory_too_deep_for_the_forkserver(
    tmp_path: Any,
) -> None:
    """A deep TMPDIR (pytest's, a batch system's) made every local rank fail to start."""
    deep = tmp_path / ("d" * 100)
    deep.mkdir()
    script = (
        "import tempfile; from gpuaccept.distributed import children, local_ranks;"
        "import tests.distributed.test_children as t;"
        "assert not children.forkserver_fits();"
        "seen = local_ranks.run_ranks(t._what_a_rank_sees, 2, ('TMPDIR',), 120, 'gloo');"
        "print([rank['environ']['TMPDIR'] == tempfile.gettempdir() for rank in seen])"
    )
    done = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "TMPDIR": str(deep)},
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[True, True]"
    assert sorted(deep.iterdir()) == []  # spawn's helpers clean up after themselves too


def _sleep_then_say_pid(rank: int, world: int, seconds: float) -> int:
    import time

    time.sleep(seconds)
    return os.getpid()


def test_a_noted_signal_ends_the_wait_for_the_ranks_and_the_ranks(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The handler's exception can be lost (raised in a finalizer): the wait for the ranks asks
    for the noted signal, so the run stops within a poll, not after every rank's work, and the
    ranks are killed on the way out."""
    import contextlib
    import signal
    import threading
    import time

    from gpuaccept import interrupts
    from gpuaccept.distributed import local_ranks
    from gpuaccept.errors import Interrupted

    # only the wait may notice it here (the start's deferral asks too, when the note is early)
    monkeypatch.setattr(local_ranks, "deferred", contextlib.nullcontext)

    noted = threading.Timer(2.0, interrupts.note, (signal.SIGTERM,))
    started = time.monotonic()
    noted.start()
    try:
        with pytest.raises(Interrupted):
            run_ranks(_sleep_then_say_pid, 2, 120.0, 180, "gloo")
    finally:
        noted.cancel()
        interrupts.clear()
    assert time.monotonic() - started < 60


def test_a_signal_inside_a_deferred_step_is_raised_when_it_ends() -> None:
    """Starting children must not be cut in two: inside `deferred` the handler only notes the
    signal; the step completes, and the signal is raised right after it (and nested steps wait
    for the outermost)."""
    import signal

    from gpuaccept import interrupts
    from gpuaccept.cli.signals import interrupts_as_exceptions
    from gpuaccept.errors import Interrupted

    steps: list[str] = []

    def run() -> None:
        with interrupts_as_exceptions(), interrupts.deferred():
            with interrupts.deferred():
                os.kill(os.getpid(), signal.SIGTERM)
                steps.append("inner done")
            steps.append("outer done")
        steps.append("after")  # never: the signal is raised as the outer step ends

    try:
        with pytest.raises(Interrupted) as raised:
            run()
    finally:
        interrupts.clear()
    assert raised.value.signum == signal.SIGTERM
    assert steps == ["inner done", "outer done"]
    assert not interrupts.deferring()
