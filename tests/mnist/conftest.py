"""Generated, learnable MNIST-format data in the layouts a job may bring it in."""

from __future__ import annotations

import gzip
import tarfile
from pathlib import Path

import pytest

from gpuaccept.mnist.data import MnistData, load_mnist
from gpuaccept.mnist.idx import read_idx, write_idx
from gpuaccept.mnist.synthetic import write_mnist_files

TRAIN_COUNT, TEST_COUNT = 6144, 1000
SMALL_TRAIN_COUNT, SMALL_TEST_COUNT = 2048, 500


@pytest.fixture(scope="session")
def flat_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("mnist-flat")
    write_mnist_files(directory, TRAIN_COUNT, TEST_COUNT, seed=0)
    return directory


@pytest.fixture(scope="session")
def torchvision_dir(flat_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """torchvision's layout, gzipped: data/MNIST/raw/*-ubyte.gz (flat_dir's digits: drawing
    them takes seconds)."""
    root = tmp_path_factory.mktemp("mnist-torchvision")
    raw = root / "MNIST" / "raw"
    raw.mkdir(parents=True)
    for idx in flat_dir.iterdir():
        (raw / f"{idx.name}.gz").write_bytes(gzip.compress(idx.read_bytes(), mtime=0))
    return root


@pytest.fixture(scope="session")
def tarball(torchvision_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """MNIST_data.tar.gz as an HTCondor job receives it: a top folder holding torchvision's tree."""
    path = tmp_path_factory.mktemp("mnist-tar") / "MNIST_data.tar.gz"
    with tarfile.open(path, "w:gz") as archive:
        archive.add(torchvision_dir / "MNIST", arcname="data/MNIST")
    return path


@pytest.fixture(scope="session")
def small_tarball(flat_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A third of the data, for CLI and job tests that judge behaviour, not accuracy: each of
    them starts Python processes that train, and the suite must stay fast on 2 cores."""
    root = tmp_path_factory.mktemp("mnist-small")
    raw = root / "MNIST" / "raw"
    raw.mkdir(parents=True)
    for prefix, count in (("train", SMALL_TRAIN_COUNT), ("t10k", SMALL_TEST_COUNT)):
        for kind in ("images-idx3", "labels-idx1"):
            name = f"{prefix}-{kind}-ubyte"
            write_idx(raw / f"{name}.gz", read_idx(flat_dir / name)[:count])
    path = root / "MNIST_data.tar.gz"
    with tarfile.open(path, "w:gz") as archive:
        archive.add(root / "MNIST", arcname="data/MNIST")
    return path


@pytest.fixture(scope="session")
def small_mnist(flat_dir: Path) -> MnistData:
    return load_mnist(flat_dir)
