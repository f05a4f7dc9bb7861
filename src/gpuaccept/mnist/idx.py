"""The IDX file format of MNIST, read and written without torchvision.

Header: two zero bytes, a dtype code, the number of dimensions, then each dimension as a
big-endian uint32; the data follow, big-endian, with nothing after them.
"""

from __future__ import annotations

import gzip
import math
import struct
import zlib
from pathlib import Path

import numpy as np
import numpy.typing as npt

from gpuaccept.errors import InputError

# dtype code -> numpy dtype (big-endian, as the format stores it)
IDX_DTYPES: dict[int, str] = {
    0x08: "u1",
    0x09: "i1",
    0x0B: ">i2",
    0x0C: ">i4",
    0x0D: ">f4",
    0x0E: ">f8",
}
# A decompressed MNIST image file is 47 MB; a cap keeps a gzip bomb from filling memory.
MAX_DECOMPRESSED_BYTES = 512 * 1024 * 1024
MAX_DIMENSIONS = 8  # MNIST uses 1 (labels) and 3 (images); 255 is a header, not data


def read_idx_bytes(path: Path, shown: str) -> bytes:
    """An IDX file's bytes, inflated when its name ends in .gz."""
    return _read_bytes(path, shown)


def _read_bytes(path: Path, shown: str) -> bytes:
    from gpuaccept.input_files import refuse_special_file

    refuse_special_file(path, "IDX file")
    try:
        size = path.stat().st_size
        if size > MAX_DECOMPRESSED_BYTES:  # checked before reading: a 3 GiB file is not MNIST
            raise InputError(
                f"{shown}: {size} bytes, more than {MAX_DECOMPRESSED_BYTES // 2**20} MiB "
                "(not an MNIST file)"
            )
        raw = path.read_bytes()
    except FileNotFoundError:
        raise InputError(f"{shown}: file not found") from None
    except OSError as error:
        raise InputError(f"{shown}: cannot read: {error.strerror}") from None
    if not path.name.endswith(".gz"):
        return raw
    return _gunzip(raw, shown)


def _gunzip(raw: bytes, shown: str) -> bytes:
    """Every member of a gzip file (several concatenated members are one valid file, as
    `cat a.gz b.gz` makes), capped so a gzip bomb cannot fill memory."""
    parts: list[bytes] = []
    size = 0
    rest = raw
    while True:
        inflater = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)
        try:
            part = inflater.decompress(rest, MAX_DECOMPRESSED_BYTES + 1 - size)
        except zlib.error as error:
            raise InputError(f"{shown}: not a valid gzip file ({error})") from None
        size += len(part)
        parts.append(part)
        if size > MAX_DECOMPRESSED_BYTES or inflater.unconsumed_tail:
            raise InputError(
                f"{shown}: decompresses to more than {MAX_DECOMPRESSED_BYTES // 2**20} MiB "
                f"(not an MNIST file)"
            )
        if not inflater.eof:
            raise InputError(f"{shown}: truncated gzip file")
        rest = inflater.unused_data
        if not rest.strip(b"\0"):  # trailing zero padding, as some tools write, is allowed
            return b"".join(parts)


def parse_idx(data: bytes, shown: str) -> npt.NDArray[np.generic]:
    """The array an IDX file holds; every header field and the length are checked."""
    if len(data) < 4:
        raise InputError(f"{shown}: truncated IDX file ({len(data)} bytes, no header)")
    zero, code, ndim = struct.unpack_from(">HBB", data)
    if zero != 0 or code not in IDX_DTYPES or not 0 < ndim <= MAX_DIMENSIONS:
        raise InputError(
            f"{shown}: not an IDX file (magic 0x{data[:4].hex()}; expected 0x0000 then a "
            f"dtype code and 1 to {MAX_DIMENSIONS} dimensions)"
        )
    header = 4 + 4 * ndim
    if len(data) < header:
        raise InputError(f"{shown}: truncated IDX header ({len(data)} of {header} bytes)")
    dims = struct.unpack_from(f">{ndim}I", data, 4)
    dtype = np.dtype(IDX_DTYPES[code])
    expected = header + math.prod(dims) * dtype.itemsize  # Python ints: no overflow
    if len(data) != expected:
        fault = "truncated" if len(data) < expected else "trailing bytes after the data"
        raise InputError(
            f"{shown}: {fault}: header says {'x'.join(map(str, dims))} {dtype.name} values "
            f"({expected} bytes), file has {len(data)} bytes"
        )
    return np.frombuffer(data, dtype=dtype, offset=header).reshape(dims)


def read_idx(path: Path, shown: str | None = None) -> npt.NDArray[np.generic]:
    """Read an IDX file (gzipped when its name ends in .gz); `shown` names it in errors."""
    return parse_idx(_read_bytes(path, shown or str(path)), shown or str(path))


def encode_idx(array: npt.NDArray[np.generic]) -> bytes:
    """The IDX bytes of `array` (uint8 only: what MNIST uses)."""
    if array.dtype != np.uint8:
        raise ValueError("encode_idx writes uint8 arrays only")
    header = struct.pack(">HBB", 0, 0x08, array.ndim) + struct.pack(f">{array.ndim}I", *array.shape)
    return header + np.ascontiguousarray(array).tobytes()


def write_idx(path: Path, array: npt.NDArray[np.generic]) -> None:
    """Write `array` as IDX, gzipped when the name ends in .gz (deterministic bytes)."""
    data = encode_idx(array)
    if path.name.endswith(".gz"):
        data = gzip.compress(data, mtime=0)
    path.write_bytes(data)
