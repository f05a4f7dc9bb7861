"""IDX parsing: every header field and the length are checked; the file is named in each error."""

from __future__ import annotations

import gzip
import struct
from pathlib import Path

import numpy as np
import pytest

from gpuaccept.errors import InputError
from gpuaccept.mnist.idx import encode_idx, read_idx, write_idx


@pytest.mark.parametrize("name", ["images-idx3-ubyte", "images-idx3-ubyte.gz"])
def test_round_trip(tmp_path: Path, name: str) -> None:
    array = np.arange(2 * 3 * 4, dtype=np.uint8).reshape(2, 3, 4)
    write_idx(tmp_path / name, array)
    read = read_idx(tmp_path / name)
    assert read.shape == (2, 3, 4)
    assert np.array_equal(read, array)


def test_header_is_mnist_s(tmp_path: Path) -> None:
    data = encode_idx(np.zeros((5, 28, 28), dtype=np.uint8))
    assert data[:4] == b"\x00\x00\x08\x03"  # the magic number MNIST's image files start with
    assert struct.unpack(">3I", data[4:16]) == (5, 28, 28)


def _fault(tmp_path: Path, name: str, data: bytes) -> str:
    (tmp_path / name).write_bytes(data)
    with pytest.raises(InputError) as raised:
        read_idx(tmp_path / name)
    message = str(raised.value)
    assert str(tmp_path / name) in message
    assert "\n" not in message
    return message


GOOD = encode_idx(np.ones((4, 28, 28), dtype=np.uint8))


def test_wrong_magic(tmp_path: Path) -> None:
    assert "not an IDX file" in _fault(tmp_path, "x-ubyte", b"\x12\x34" + GOOD[2:])


def test_unknown_dtype_code(tmp_path: Path) -> None:
    assert "not an IDX file" in _fault(tmp_path, "x-ubyte", b"\x00\x00\x07\x03" + GOOD[4:])


def test_truncated_data(tmp_path: Path) -> None:
    assert "truncated" in _fault(tmp_path, "x-ubyte", GOOD[:-100])


def test_truncated_header(tmp_path: Path) -> None:
    assert "truncated IDX header" in _fault(tmp_path, "x-ubyte", GOOD[:9])


def test_empty_file(tmp_path: Path) -> None:
    assert "no header" in _fault(tmp_path, "x-ubyte", b"")


def test_trailing_bytes(tmp_path: Path) -> None:
    assert "trailing bytes" in _fault(tmp_path, "x-ubyte", GOOD + b"\x00")


def test_truncated_gzip(tmp_path: Path) -> None:
    assert "truncated gzip" in _fault(tmp_path, "x-ubyte.gz", gzip.compress(GOOD)[:-20])


def test_not_gzip(tmp_path: Path) -> None:
    assert "not a valid gzip" in _fault(tmp_path, "x-ubyte.gz", GOOD)


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="file not found"):
        read_idx(tmp_path / "absent-ubyte")


def test_a_huge_plain_file_is_refused_before_it_is_read(tmp_path: Path) -> None:
    sparse = tmp_path / "x-ubyte"
    with sparse.open("wb") as stream:
        stream.write(GOOD[:16])
        stream.truncate(3 * 2**30)  # 3 GiB, sparse: reading it whole would take 3 GiB
    import resource

    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    with pytest.raises(InputError, match="not an MNIST file"):
        read_idx(sparse)
    grown_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
    assert grown_kib < 512 * 1024  # nowhere near the 3 GiB a whole read would take


@pytest.mark.parametrize(
    ("header", "fragment"),
    [
        (b"\x00\x00\x08\xff", "not an IDX file"),  # 255 dimensions
        (b"\x00\x00\x08\x03" + struct.pack(">3I", 2**32 - 1, 2**32 - 1, 2**32 - 1), "truncated"),
    ],
)
def test_absurd_headers_are_refused(tmp_path: Path, header: bytes, fragment: str) -> None:
    assert fragment in _fault(tmp_path, "x-ubyte", header + b"\x00" * 64)
