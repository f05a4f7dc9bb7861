"""Size arguments as nccl-tests takes them: 8, 64K, 256M, 1G (binary units), swept by a factor."""

from __future__ import annotations

import re

from gpuaccept.errors import InputError

_UNITS = {"": 1, "K": 1024, "M": 1024**2, "G": 1024**3}
_SIZE = re.compile(r"^\s*(\d+)\s*([KMG]?)B?\s*$", re.IGNORECASE)


def parse_size(text: str, flag: str) -> int:
    """Bytes for '8', '64K', '256M', '1G' (1K = 1024); anything else is an InputError."""
    match = _SIZE.match(text)
    if not match:
        raise InputError(f"{flag} {text!r}: expected a positive size such as 8, 64K, 256M or 1G")
    value = int(match.group(1)) * _UNITS[match.group(2).upper()]
    if value < 1:
        raise InputError(f"{flag} {text!r}: size must be positive")
    return value


def size_text(size: int) -> str:
    """A byte count as people write it, in the units the size flags take: 8 B, 64 KiB, 256 MiB,
    1 GiB; a size that is no whole unit keeps its bytes (3000 B)."""
    for unit, scale in (("GiB", 1024**3), ("MiB", 1024**2), ("KiB", 1024)):
        if size >= scale and size % scale == 0:
            return f"{size // scale} {unit}"
    return f"{size} B"


def sweep_text(sizes: list[int]) -> str:
    """`16 MiB..64 MiB`, or one size alone."""
    if sizes[0] == sizes[-1]:
        return size_text(sizes[0])
    return f"{size_text(sizes[0])}..{size_text(sizes[-1])}"


def size_sweep(begin: int, end: int, factor: int, begin_flag: str = "-b") -> list[int]:
    """begin, begin x factor, ... up to end (inclusive), as nccl-tests -b/-e/-f sweep."""
    if begin < 1:
        raise InputError(f"{begin_flag} must be positive (got {begin})")
    if end < begin:
        raise InputError(f"end size {end} is below the begin size {begin}")
    if factor < 2 and end != begin:
        raise InputError(f"-f must be at least 2 (got {factor})")
    sizes = [begin]
    while sizes[-1] * factor <= end and end != begin:
        sizes.append(sizes[-1] * factor)
    return sizes


MAX_RANGE_VALUES = 100_000  # a range is built in memory: 10^12 values would never finish


def int_range(text: str, flag: str) -> list[int]:
    """'4096' or '1024:8192:1024' (start:stop:step, inclusive) or '1024,2048': matmul shapes."""
    try:
        if ":" in text:
            start, stop, step = (int(part) for part in text.split(":"))
            if step < 1 or stop < start:
                raise ValueError
            if (stop - start) // step + 1 > MAX_RANGE_VALUES:
                raise InputError(
                    f"{flag} {text!r}: {(stop - start) // step + 1:,} values; at most "
                    f"{MAX_RANGE_VALUES:,} (a larger STEP)"
                )
            values = list(range(start, stop + 1, step))
        else:
            values = [int(part) for part in text.split(",")]
    except ValueError:
        raise InputError(
            f"{flag} {text!r}: expected N, N,M,... or START:STOP:STEP with STOP >= START, STEP >= 1"
        ) from None
    if not values or min(values) < 1:
        raise InputError(f"{flag} {text!r}: sizes must be positive")
    return values
