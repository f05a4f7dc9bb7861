"""Shared fixtures: the repository root and its parsed manifests."""

from __future__ import annotations

import os
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.cpu_turns import held

REPO = Path(__file__).resolve().parent.parent

# One thread per torch process, this one and every process a test starts: the suite runs a test
# per core, most tests start two ranks or a worker, and on 2 cores more threads only spin.
# CPU tests judge logic, never CPU throughput; a caller's own setting wins.
os.environ.setdefault("OMP_NUM_THREADS", "1")


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """`-n auto` (pyproject's addopts): one pytest worker more than this process may use cores.
    Many tests wait (on Slurm, a timeout, a rank, a subprocess) rather than compute; the extra
    worker fills those waits. Measured on 2 cores: 345 s with 3 workers, 389 s with 2, 397 s
    with 4 (more workers only contend)."""
    return len(os.sched_getaffinity(0)) + 1


@pytest.fixture(autouse=True)
def _one_gpu_test_at_a_time(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[None]:
    """GPU tests judge the GPU's own figures, so none may share it with another: across
    pytest-xdist's workers (and any other pytest on this machine) they take one lock in turn.
    A lock, not xdist_group: pytest-xdist 3.8 groups by rewriting `item._nodeid`, which
    pytest 9.2 no longer reads, so its groups are silently ignored."""
    if request.node.get_closest_marker("gpu") is None:
        yield
        return
    # every worker's basetemp (popen-gwN) shares this parent; without xdist it is pytest-of-USER
    with held(tmp_path_factory.getbasetemp().parent / "gpuaccept-gpu-tests.lock"):
        yield


# Modules whose tests start Python processes (CLI runs, suites in workers, ranks, job scripts)
# or train models: seconds each on 2 cores. `pytest -m "not slow"` leaves them out.
SLOW_MODULES = frozenset(
    {
        "tests/checks/test_distributed_checks.py",
        "tests/distributed/test_children.py",
        "tests/measure/test_collectives.py",
        "tests/measure/test_nbody_fused.py",
        "tests/mnist/test_cli_train.py",
        "tests/mnist/test_job_script.py",
        "tests/mnist/test_train.py",
        "tests/suite/test_runner.py",
        "tests/sweeps/test_sweeps.py",
        "tests/test_cli_accept.py",
        "tests/test_cli_bench.py",
        "tests/test_cli_inputs.py",
        "tests/test_job_scripts.py",
        "tests/test_multinode.py",
        "tests/test_isolate_nodes.py",
        "tests/test_slurm.py",
        "tests/checks/test_load.py",
    }
)


# The longest files of the everyday suite, by their summed test time in a run of it here
# (2026-11-29, 3 workers: 97, 60, 58, 38, 31, 29, 29, 27, 22, 21, 20, 20, 20 s), start first:
# pytest-xdist hands out files in collection order, and one of these started last would run
# alone at the end. Preflight's file mostly waits on its budgets, so it goes first, beside the
# others' work. (The Slurm, multi-node and isolation files are `service` tests now, run apart.)
LONGEST_FIRST = (
    "tests/commands/test_preflight.py",
    "tests/test_cli_accept.py",
    "tests/mnist/test_cli_train.py",
    "tests/test_cli_bench.py",
    "tests/test_cli_inputs.py",
    "tests/report/test_fleet_html.py",
    "tests/llm/test_cli_llm_signals.py",
    "tests/suite/test_runner.py",
    "tests/checks/test_network.py",
    "tests/act/test_fleet.py",
    "tests/burnin/test_run.py",
)


def _file_of(item: pytest.Item) -> str:
    return item.nodeid.split("::", 1)[0]


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark the slow modules; `gpu` tests run only where torch sees a CUDA GPU, elsewhere they
    skip and say why. The longest files come first, each file's tests still together and in
    order."""
    rank = {path: place for place, path in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(_file_of(item), len(rank)))
    for item in items:
        if _file_of(item) in SLOW_MODULES:
            item.add_marker(pytest.mark.slow)
    gpu_items = [item for item in items if item.get_closest_marker("gpu")]
    if not gpu_items:
        return
    import torch

    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU: torch sees none on this machine")
    for item in gpu_items:
        item.add_marker(skip)


@pytest.fixture(scope="session")
def repo() -> Path:
    return REPO


@pytest.fixture(scope="session")
def pixi_manifest() -> dict[str, Any]:
    with (REPO / "pixi.toml").open("rb") as handle:
        return tomllib.load(handle)


@pytest.fixture(scope="session")
def pyproject() -> dict[str, Any]:
    with (REPO / "pyproject.toml").open("rb") as handle:
        return tomllib.load(handle)


@pytest.fixture(autouse=True, scope="session")
def _no_history_of_the_user(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Module fixtures run before the per-test history below is set: without this, a run they
    start recorded into the user's own history (and compared itself with it)."""
    session = tmp_path_factory.mktemp("session")
    places = {"GPUACCEPT_HISTORY": "history.sqlite", "GPUACCEPT_ACT_STATE": "act-state.json"}
    kept = {name: os.environ.get(name) for name in places}
    for name, file in places.items():
        os.environ[name] = str(session / file)
    yield
    for name, value in kept.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value


@pytest.fixture(autouse=True)
def _history_in_tmp(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> Path:
    """Runs under test record into a temporary history, never the user's own; `act` keeps its
    records (the breaker's trip, held regressions) beside it, one per test."""
    path = tmp_path_factory.mktemp("history") / "history.sqlite"
    monkeypatch.setenv("GPUACCEPT_HISTORY", str(path))
    monkeypatch.setenv("GPUACCEPT_ACT_STATE", str(path.with_name("act-state.json")))
    return path


@pytest.fixture(autouse=True)
def _no_cuda_driver_asked(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """The fabric check asks the CUDA driver whether the GPUs support dma-buf (probe/dmabuf.py):
    a test that judges a node tree in this process must get the same answer on a GPU machine as
    on this one (none: the tests are hermetic to the hardware). GPU tests ask the real driver;
    tests of the probe put their own stand-in library in."""
    if request.node.get_closest_marker("gpu") is not None:
        return
    from gpuaccept.probe import dmabuf

    def no_driver() -> None:
        raise OSError("libcuda.so.1: not asked in the CPU tests (tests/conftest.py)")

    monkeypatch.setattr(dmabuf, "_load_libcuda", no_driver)


@pytest.fixture(autouse=True)
def _signal_handlers_restored() -> Iterator[None]:
    """A test that interrupts the CLI in-process leaves SIGINT/SIGTERM ignored, as the CLI means
    to (the process is on its way out). In a test worker that outlives it, every later child
    would start with them ignored, and a bash job script cannot trap a signal ignored at its
    start: its SIGTERM forwarding silently stopped working for the rest of the worker's tests."""
    import signal

    kept = {signum: signal.getsignal(signum) for signum in (signal.SIGINT, signal.SIGTERM)}
    yield
    for signum, handler in kept.items():
        signal.signal(signum, handler)


@pytest.fixture(scope="session")
def pg_server() -> Iterator[Any]:
    """A real PostgreSQL server (tests/pg_server.py) for this worker's session; the tests that
    need one skip, saying why, where none can be started."""
    from tests import pg_server as server

    why = server.why_not()
    if why is not None:
        pytest.skip(f"no PostgreSQL server here: {why}")
    with server.running() as running:
        yield running


@pytest.fixture
def pg_history(pg_server: Any, monkeypatch: pytest.MonkeyPatch) -> str:
    """A new, empty database on the test server: its postgresql:// URI (no password in it: the
    client finds it in PGPASSFILE, as a node would in ~/.pgpass)."""
    monkeypatch.setenv("PGPASSFILE", str(pg_server.passfile))
    return str(pg_server.database())
