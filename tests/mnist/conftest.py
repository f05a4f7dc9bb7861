"""Generated, learnable MNIST-format data in the layouts a job may bring it in."""

from __future__ import annotations

import tarfile
from pathlib import Path

import pytest

from gpuaccept.mnist.data import MnistData, load_mnist
from gpuaccept.mnist.synthetic import write_mnist_files

TRAIN_COUNT, TEST_COUNT = 6144, 1000


@pytest.fixture(scope="session")
def flat_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("mnist-flat")
    write_mnist_files(directory, TRAIN_COUNT, TEST_COUNT, seed=0)
    return directory


@pytest.fixture(scope="session")
def torchvision_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """torchvision's layout, gzipped: data/MNIST/raw/*-ubyte.gz."""
    root = tmp_path_factory.mktemp("mnist-torchvision")
    write_mnist_files(root / "MNIST" / "raw", TRAIN_COUNT, TEST_COUNT, seed=0, compress=True)
    return root


@pytest.fixture(scope="session")
def tarball(torchvision_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """MNIST_data.tar.gz as an HTCondor job receives it: a top folder holding torchvision's tree."""
    path = tmp_path_factory.mktemp("mnist-tar") / "MNIST_data.tar.gz"
    with tarfile.open(path, "w:gz") as archive:
        archive.add(torchvision_dir / "MNIST", arcname="data/MNIST")
    return path


@pytest.fixture(scope="session")
def small_tarball(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A third of the data, for CLI and job tests that judge behaviour, not accuracy: each of
    them starts Python processes that train, and the suite must stay fast on 2 cores."""
    root = tmp_path_factory.mktemp("mnist-small")
    write_mnist_files(root / "MNIST" / "raw", 2048, 500, seed=0, compress=True)
    path = root / "MNIST_data.tar.gz"
    with tarfile.open(path, "w:gz") as archive:
        archive.add(root / "MNIST", arcname="data/MNIST")
    return path


@pytest.fixture(scope="session")
def small_mnist(flat_dir: Path) -> MnistData:
    return load_mnist(flat_dir)
