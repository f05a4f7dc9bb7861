"""MNIST as an HTCondor job receives it: a directory or a tarball, in torchvision's or flat layout.

Every malformed input becomes an InputError naming the file and the fault. Tarballs are checked
member by member before anything is written (no absolute paths, no `..`, no links, no devices,
a size cap) and extracted into a scratch directory that is removed once the arrays are loaded.
"""

from __future__ import annotations

import hashlib
import os
import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

import numpy as np
import numpy.typing as npt

from gpuaccept.errors import InputError
from gpuaccept.mnist.idx import read_idx

SPLITS = {
    "train": ("train-images-idx3-ubyte", "train-labels-idx1-ubyte"),
    "test": ("t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"),
}
FILE_NAMES = tuple(name for pair in SPLITS.values() for name in pair)
IMAGE_SIDE = 28
CLASSES = 10
# MNIST's four files are 55 MB uncompressed; 1 GiB leaves room and still stops a tar bomb.
MAX_TARBALL_BYTES = 1024**3
MAX_TARBALL_MEMBERS = 10_000
_SEARCH_DEPTH = 4


@dataclass(frozen=True)
class MnistData:
    """Images (N x 28 x 28 uint8) and labels (N, int64 in 0..9) of both splits."""

    train_images: npt.NDArray[np.uint8]
    train_labels: npt.NDArray[np.int64]
    test_images: npt.NDArray[np.uint8]
    test_labels: npt.NDArray[np.int64]
    source: str
    sha256: str  # over the four arrays: the same data gives the same digest in any packaging


def _tar_member_fault(member: tarfile.TarInfo) -> str | None:
    name = PurePosixPath(member.name)
    if member.name.startswith(("/", "\\")) or (name.parts and ":" in name.parts[0]):
        return "absolute path"
    if ".." in name.parts:
        return "path with '..'"
    if member.issym() or member.islnk():
        return "link"
    if not (member.isfile() or member.isdir()):
        return "device, fifo or other special file"
    return None


def extract_tarball(tarball: Path, destination: Path, max_bytes: int = MAX_TARBALL_BYTES) -> None:
    """Extract regular files and directories of `tarball`, refusing any hostile member."""
    try:
        with tarfile.open(tarball, "r:*") as archive:
            members = []
            total = 0
            for member in archive:
                fault = _tar_member_fault(member)
                if fault is not None:
                    raise InputError(f"{tarball}: refusing member {member.name!r}: {fault}")
                total += member.size
                if total > max_bytes:
                    raise InputError(
                        f"{tarball}: more than {max_bytes // 2**20} MiB uncompressed "
                        f"(the cap for MNIST data)"
                    )
                members.append(member)
                if len(members) > MAX_TARBALL_MEMBERS:
                    raise InputError(f"{tarball}: more than {MAX_TARBALL_MEMBERS} members")
            # The checks above are ours; the 'data' filter is the standard library's second line.
            archive.extractall(destination, members=members, filter="data")
    except tarfile.TarError as error:
        raise InputError(f"{tarball}: not a readable tar archive ({error})") from None
    except EOFError:
        raise InputError(f"{tarball}: truncated archive") from None
    except OSError as error:
        if isinstance(error, FileNotFoundError) and not tarball.exists():
            raise InputError(f"{tarball}: file not found") from None
        raise InputError(f"{tarball}: cannot extract: {error}") from None


def _find(root: Path, name: str) -> list[Path]:
    """Files called `name` or `name.gz` under root, at most _SEARCH_DEPTH levels down."""
    found: list[Path] = []
    for directory, subdirectories, files in os.walk(root):
        depth = len(Path(directory).relative_to(root).parts)
        if depth >= _SEARCH_DEPTH:
            subdirectories.clear()
        subdirectories.sort()
        found.extend(Path(directory) / f for f in sorted(files) if f in (name, f"{name}.gz"))
    return found


def locate_files(root: Path, shown: str) -> dict[str, Path]:
    """The four IDX files under root: flat, in MNIST/raw (torchvision) or one folder down."""
    located: dict[str, Path] = {}
    for name in FILE_NAMES:
        candidates = _find(root, name)
        if not candidates:
            raise InputError(
                f"{shown}: no {name} (or {name}.gz) found; expected MNIST's four IDX files, "
                f"flat or under MNIST/raw/"
            )
        located[name] = _one_copy(candidates, root, shown) if len(candidates) > 1 else candidates[0]
    return located


def _one_copy(candidates: list[Path], root: Path, shown: str) -> Path:
    """torchvision's download keeps both `X-ubyte` and `X-ubyte.gz` (CHTC's MNIST_data.tar.gz
    has both): copies that hold the same bytes are one file; copies that differ are refused."""
    from gpuaccept.mnist.idx import read_idx_bytes

    first = read_idx_bytes(candidates[0], f"{shown}/{candidates[0].relative_to(root)}")
    for other in candidates[1:]:
        if read_idx_bytes(other, f"{shown}/{other.relative_to(root)}") != first:
            raise InputError(
                f"{shown}: {candidates[0].relative_to(root)} and {other.relative_to(root)} "
                "hold different data; remove the wrong copy"
            )
    # the same data: read the uncompressed copy when there is one (no inflating twice)
    return min(candidates, key=lambda path: (path.name.endswith(".gz"), len(path.parts)))


def _load_split(
    images_path: Path, labels_path: Path, root: Path, shown_root: str
) -> tuple[npt.NDArray[np.uint8], npt.NDArray[np.int64]]:
    shown_images = f"{shown_root}/{images_path.relative_to(root).as_posix()}"
    shown_labels = f"{shown_root}/{labels_path.relative_to(root).as_posix()}"
    images = read_idx(images_path, shown_images)
    labels = read_idx(labels_path, shown_labels)
    if images.dtype != np.uint8 or images.ndim != 3:
        raise InputError(
            f"{shown_images}: expected N x 28 x 28 unsigned bytes, got "
            f"{'x'.join(map(str, images.shape))} {images.dtype.name}"
        )
    if images.shape[1:] != (IMAGE_SIDE, IMAGE_SIDE):
        raise InputError(
            f"{shown_images}: images are {images.shape[1]}x{images.shape[2]}, expected 28x28"
        )
    if labels.dtype != np.uint8 or labels.ndim != 1:
        raise InputError(
            f"{shown_labels}: expected a vector of unsigned bytes, got "
            f"{'x'.join(map(str, labels.shape))} {labels.dtype.name}"
        )
    if len(images) == 0:
        raise InputError(f"{shown_images}: holds no images")
    if len(images) != len(labels):
        raise InputError(
            f"{shown_labels}: {len(labels)} labels for {len(images)} images in {shown_images}"
        )
    if int(labels.max()) >= CLASSES:
        raise InputError(f"{shown_labels}: label {int(labels.max())} outside 0-9")
    # Copies: the parsed arrays are read-only views of the file's bytes, which torch warns about.
    return images.astype(np.uint8), labels.astype(np.int64)


def _load_directory(root: Path, shown: str) -> MnistData:
    located = locate_files(root, shown)
    arrays: list[npt.NDArray[Any]] = []
    for images_name, labels_name in SPLITS.values():
        arrays.extend(_load_split(located[images_name], located[labels_name], root, shown))
    digest = hashlib.sha256()
    for array in arrays:
        digest.update(np.ascontiguousarray(array).tobytes())
    train_images, train_labels, test_images, test_labels = arrays
    return MnistData(
        train_images=train_images,
        train_labels=train_labels,
        test_images=test_images,
        test_labels=test_labels,
        source=shown,
        sha256=digest.hexdigest(),
    )


def load_mnist(path: Path, scratch: Path | None = None) -> MnistData:
    """Load MNIST from a directory or a tarball (extracted under `scratch`, then removed)."""
    from gpuaccept.input_files import refuse_special_file

    refuse_special_file(path, "--data")
    if path.is_dir():
        return _load_directory(path, str(path))
    if not path.exists():
        raise InputError(f"{path}: no such file or directory (pass --data with MNIST's files)")
    if not tarfile.is_tarfile(path):
        raise InputError(f"{path}: neither a directory nor a tar archive")
    if scratch is not None:
        from gpuaccept.output_files import check_output_directory

        check_output_directory(scratch, "--scratch")
    with tempfile.TemporaryDirectory(prefix="gpuaccept-mnist-", dir=scratch) as extracted:
        extract_tarball(path, Path(extracted))
        return _load_directory(Path(extracted), str(path))
