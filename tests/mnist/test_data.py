"""Loading MNIST from directories and tarballs; every malformed input is refused by name."""

from __future__ import annotations

import gzip
import io
import os
import shutil
import tarfile
from pathlib import Path

import numpy as np
import pytest

from gpuaccept.errors import InputError
from gpuaccept.mnist.data import extract_tarball, load_mnist
from gpuaccept.mnist.idx import write_idx
from tests.mnist.conftest import TEST_COUNT, TRAIN_COUNT


def test_every_layout_gives_the_same_data(
    flat_dir: Path, torchvision_dir: Path, tarball: Path, tmp_path: Path
) -> None:
    flat = load_mnist(flat_dir)
    assert flat.train_images.shape == (TRAIN_COUNT, 28, 28)
    assert flat.test_labels.shape == (TEST_COUNT,)
    assert set(np.unique(flat.train_labels)) == set(range(10))
    scratch = tmp_path / "scratch"
    for other in (load_mnist(torchvision_dir), load_mnist(tarball, scratch)):
        assert other.sha256 == flat.sha256
        assert np.array_equal(other.train_images, flat.train_images)
    assert list(scratch.iterdir()) == []  # the extracted copy is removed once loaded


def _copy(source: Path, tmp_path: Path) -> Path:
    target = tmp_path / "data"
    shutil.copytree(source, target)
    return target


def _refused(path: Path, *expected: str) -> str:
    with pytest.raises(InputError) as raised:
        load_mnist(path)
    message = str(raised.value)
    for fragment in expected:
        assert fragment in message
    assert "\n" not in message
    return message


def test_missing_file_is_named(flat_dir: Path, tmp_path: Path) -> None:
    data = _copy(flat_dir, tmp_path)
    (data / "t10k-labels-idx1-ubyte").unlink()
    _refused(data, "t10k-labels-idx1-ubyte", "no ")


def _torchvision_download(flat_dir: Path, root: Path) -> Path:
    """What torchvision's MNIST download leaves: raw/ with each file plain and gzipped, and the
    old processed/*.pt files (CHTC's MNIST_data.tar.gz was made from such a tree)."""
    raw = root / "MNIST" / "raw"
    raw.mkdir(parents=True)
    for source in flat_dir.iterdir():
        shutil.copy(source, raw / source.name)
        (raw / f"{source.name}.gz").write_bytes(gzip.compress(source.read_bytes()))
    (root / "MNIST" / "processed").mkdir()
    for name in ("training.pt", "test.pt"):
        (root / "MNIST" / "processed" / name).write_bytes(b"torch pickles, ignored")
    return root


def test_torchvisions_own_download_is_read_as_one_copy(flat_dir: Path, tmp_path: Path) -> None:
    flat = load_mnist(flat_dir)
    root = _torchvision_download(flat_dir, tmp_path / "tv")
    for path in (root, root / "MNIST" / "raw"):
        assert load_mnist(path).sha256 == flat.sha256
    tarball = tmp_path / "MNIST_data.tar.gz"
    with tarfile.open(tarball, "w:gz") as archive:
        archive.add(root / "MNIST", arcname="data/MNIST")
    assert load_mnist(tarball, tmp_path / "scratch").sha256 == flat.sha256


def test_copies_that_disagree_are_refused(flat_dir: Path, tmp_path: Path) -> None:
    root = _torchvision_download(flat_dir, tmp_path / "tv")
    gz = root / "MNIST" / "raw" / "t10k-labels-idx1-ubyte.gz"
    labels = np.zeros(TEST_COUNT, dtype=np.uint8)
    write_idx(tmp_path / "other", labels)
    gz.write_bytes(gzip.compress((tmp_path / "other").read_bytes()))
    _refused(root, "t10k-labels-idx1-ubyte", "hold different data")


def test_copies_in_two_folders_are_one_file_when_equal(flat_dir: Path, tmp_path: Path) -> None:
    data = _copy(flat_dir, tmp_path)
    (data / "old").mkdir()
    shutil.copy(data / "train-images-idx3-ubyte", data / "old" / "train-images-idx3-ubyte")
    assert load_mnist(data).sha256 == load_mnist(flat_dir).sha256


def test_a_gzip_file_of_two_members_is_read_whole(flat_dir: Path, tmp_path: Path) -> None:
    data = _copy(flat_dir, tmp_path)
    original = data / "t10k-images-idx3-ubyte"
    raw = original.read_bytes()
    half = len(raw) // 2
    (data / "t10k-images-idx3-ubyte.gz").write_bytes(
        gzip.compress(raw[:half]) + gzip.compress(raw[half:])
    )
    original.unlink()
    assert load_mnist(data).sha256 == load_mnist(flat_dir).sha256


def test_a_fifo_as_data_or_idx_file_is_refused_not_read(flat_dir: Path, tmp_path: Path) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    _refused(fifo, "--data", "FIFO")
    data = _copy(flat_dir, tmp_path)
    (data / "t10k-labels-idx1-ubyte").unlink()
    os.mkfifo(data / "t10k-labels-idx1-ubyte")
    _refused(data, "t10k-labels-idx1-ubyte", "FIFO")


def test_a_scratch_that_is_a_file_is_refused(tarball: Path, tmp_path: Path) -> None:
    scratch = tmp_path / "file"
    scratch.write_text("not a directory")
    with pytest.raises(InputError, match=r"--scratch .*is a file"):
        load_mnist(tarball, scratch)


def test_mismatched_counts(flat_dir: Path, tmp_path: Path) -> None:
    data = _copy(flat_dir, tmp_path)
    write_idx(data / "t10k-labels-idx1-ubyte", np.zeros(TEST_COUNT - 1, dtype=np.uint8))
    _refused(data, "t10k-labels-idx1-ubyte", f"{TEST_COUNT - 1} labels for {TEST_COUNT} images")


def test_label_out_of_range(flat_dir: Path, tmp_path: Path) -> None:
    data = _copy(flat_dir, tmp_path)
    labels = np.zeros(TEST_COUNT, dtype=np.uint8)
    labels[7] = 10
    write_idx(data / "t10k-labels-idx1-ubyte", labels)
    _refused(data, "t10k-labels-idx1-ubyte", "label 10 outside 0-9")


def test_wrong_image_size(flat_dir: Path, tmp_path: Path) -> None:
    data = _copy(flat_dir, tmp_path)
    write_idx(data / "t10k-images-idx3-ubyte", np.zeros((TEST_COUNT, 32, 32), dtype=np.uint8))
    _refused(data, "t10k-images-idx3-ubyte", "32x32, expected 28x28")


def test_truncated_idx_in_a_directory(flat_dir: Path, tmp_path: Path) -> None:
    data = _copy(flat_dir, tmp_path)
    images = data / "train-images-idx3-ubyte"
    images.write_bytes(images.read_bytes()[:5000])
    _refused(data, f"{data}/train-images-idx3-ubyte", "truncated")


def test_absent_path(tmp_path: Path) -> None:
    _refused(tmp_path / "nowhere.tar.gz", "no such file or directory")


def test_not_a_tarball(tmp_path: Path) -> None:
    junk = tmp_path / "MNIST_data.tar.gz"
    junk.write_bytes(b"certainly not a tar archive" * 100)
    _refused(junk, str(junk), "neither a directory nor a tar archive")


def test_truncated_tarball(tarball: Path, tmp_path: Path) -> None:
    cut = tmp_path / "MNIST_data.tar.gz"
    cut.write_bytes(tarball.read_bytes()[: tarball.stat().st_size // 2])
    message = _refused(cut, str(cut))
    assert "truncated" in message or "not a readable tar" in message


# Hostile tarballs: each holds one bad member beside a harmless file.
def _hostile(tmp_path: Path, member: tarfile.TarInfo, payload: bytes = b"") -> Path:
    path = tmp_path / "hostile.tar"
    with tarfile.open(path, "w") as archive:
        harmless = tarfile.TarInfo("readme.txt")
        harmless.size = 2
        archive.addfile(harmless, io.BytesIO(b"hi"))
        archive.addfile(member, io.BytesIO(payload) if payload else None)
    return path


def _member(
    name: str, kind: bytes = tarfile.REGTYPE, size: int = 0, link: str = ""
) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type, info.size, info.linkname = kind, size, link
    return info


@pytest.mark.parametrize(
    ("member", "fault"),
    [
        (_member("/tmp/gpuaccept-escape", size=3), "absolute path"),
        (_member("../gpuaccept-escape", size=3), "'..'"),
        (_member("data/../../gpuaccept-escape", size=3), "'..'"),
        (_member("evil-link", tarfile.SYMTYPE, link="/etc/passwd"), "link"),
        (_member("evil-hardlink", tarfile.LNKTYPE, link="readme.txt"), "link"),
        (_member("evil-device", tarfile.CHRTYPE), "device"),
        (_member("evil-fifo", tarfile.FIFOTYPE), "fifo"),
    ],
)
def test_hostile_members_are_refused_before_anything_is_written(
    tmp_path: Path, member: tarfile.TarInfo, fault: str
) -> None:
    payload = b"pwn" if member.isfile() else b""
    archive = _hostile(tmp_path, member, payload)
    destination = tmp_path / "out" / "scratch"
    destination.mkdir(parents=True)
    with pytest.raises(InputError) as raised:
        extract_tarball(archive, destination)
    assert fault in str(raised.value)
    assert str(archive) in str(raised.value)
    assert list(destination.iterdir()) == []  # not even the harmless member
    assert not (tmp_path / "out" / "gpuaccept-escape").exists()


def test_size_cap(tmp_path: Path) -> None:
    archive = _hostile(tmp_path, _member("big", size=4096), b"x" * 4096)
    with pytest.raises(InputError, match="uncompressed"):
        extract_tarball(archive, tmp_path / "out", max_bytes=1024)


def test_hostile_tarball_through_load(tmp_path: Path) -> None:
    archive = _hostile(tmp_path, _member("../escape", size=3), b"pwn")
    _refused(archive, str(archive), "'..'")
