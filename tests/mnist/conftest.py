"""Generated, learnable MNIST-format data in the layouts a job may bring it in."""

from __future__ import annotations

import fcntl
import os
import tarfile
from pathlib import Path

import pytest

from gpuaccept.mnist.data import MnistData, load_mnist
from gpuaccept.mnist.idx import read_idx, write_idx
from gpuaccept.mnist.synthetic import write_mnist_files

TRAIN_COUNT, TEST_COUNT = 6144, 1000
SMALL_TRAIN_COUNT, SMALL_TEST_COUNT = 2048, 500


def _this_runs_temp(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The temporary directory of this pytest run, shared by its pytest-xdist workers (each has
    its own basetemp below it); a single process's own basetemp."""
    basetemp = tmp_path_factory.getbasetemp()
    return basetemp.parent if os.environ.get("PYTEST_XDIST_WORKER") else basetemp


@pytest.fixture(scope="session")
def flat_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The digits, drawn once per run (seconds of CPU): the first worker to ask draws them while
    the others wait on the lock, then all read the same files."""
    directory = _this_runs_temp(tmp_path_factory) / "mnist-flat-shared"
    complete = directory.with_name("mnist-flat-shared.complete")  # the tests list the directory
    with directory.with_name("mnist-flat-shared.lock").open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not complete.exists():
            directory.mkdir(exist_ok=True)
            write_mnist_files(directory, TRAIN_COUNT, TEST_COUNT, seed=0)
            complete.touch()
    return directory


def _torchvision_tree(flat_dir: Path, root: Path, train_count: int, test_count: int) -> Path:
    """torchvision's layout under `root` (MNIST/raw/*-ubyte.gz), holding the first digits of
    flat_dir's: drawing them again would take seconds."""
    raw = root / "MNIST" / "raw"
    raw.mkdir(parents=True)
    for prefix, count in (("train", train_count), ("t10k", test_count)):
        for kind in ("images-idx3", "labels-idx1"):
            name = f"{prefix}-{kind}-ubyte"
            write_idx(raw / f"{name}.gz", read_idx(flat_dir / name)[:count])
    return root


def _job_tarball(tree: Path, path: Path) -> Path:
    """MNIST_data.tar.gz as an HTCondor job receives it: a top folder holding torchvision's tree."""
    with tarfile.open(path, "w:gz") as archive:
        archive.add(tree / "MNIST", arcname="data/MNIST")
    return path


@pytest.fixture(scope="session")
def torchvision_dir(flat_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """torchvision's layout, gzipped: data/MNIST/raw/*-ubyte.gz."""
    root = tmp_path_factory.mktemp("mnist-torchvision")
    return _torchvision_tree(flat_dir, root, TRAIN_COUNT, TEST_COUNT)


@pytest.fixture(scope="session")
def tarball(torchvision_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _job_tarball(torchvision_dir, tmp_path_factory.mktemp("mnist-tar") / "MNIST_data.tar.gz")


@pytest.fixture(scope="session")
def small_tarball(flat_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A third of the data, for CLI and job tests that judge behaviour, not accuracy: each of
    them starts Python processes that train, and the suite must stay fast on 2 cores."""
    root = tmp_path_factory.mktemp("mnist-small")
    tree = _torchvision_tree(flat_dir, root, SMALL_TRAIN_COUNT, SMALL_TEST_COUNT)
    return _job_tarball(tree, root / "MNIST_data.tar.gz")


@pytest.fixture(scope="session")
def small_mnist(flat_dir: Path) -> MnistData:
    return load_mnist(flat_dir)
