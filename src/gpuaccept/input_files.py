"""Every file a user hands gpuaccept to read: refused unless it is a regular file (or, where a
directory is expected, a directory), and read with a size cap.

A FIFO, a character device or a socket given as an input would block a read for ever (or, like
/dev/zero, never end), so it is refused with its kind named rather than opened.
"""

from __future__ import annotations

import stat
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gpuaccept.errors import InputError

if TYPE_CHECKING:
    from pydantic import ValidationError

_KINDS = (
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


def special_file_kind(path: Path) -> str | None:
    """What a path is when it is neither a regular file nor a directory; None otherwise (a missing
    path included: callers say 'not found' in their own words)."""
    try:
        mode = path.stat().st_mode
    except (OSError, ValueError):
        return None
    for test, kind in _KINDS:
        if test(mode):
            return kind
    return None


def refuse_special_file(path: Path, what: str) -> None:
    """InputError when `path` is a FIFO, device or socket: gpuaccept never reads from one."""
    kind = special_file_kind(path)
    if kind is not None:
        raise InputError(f"{what} {path}: is {kind}, not a regular file; refusing to read it")


def read_input_bytes(path: Path, what: str, max_bytes: int) -> bytes:
    """The bytes of a regular file, at most `max_bytes`; InputError naming the file otherwise."""
    refuse_special_file(path, what)
    try:
        if path.is_dir():
            raise InputError(f"{what} {path}: is a directory, expected a file")
        if path.stat().st_size > max_bytes:  # refused before a byte of it is read
            raise InputError(f"{what} {path}: larger than {max_bytes} bytes; not a {what} file")
        with path.open("rb") as stream:
            data = stream.read(max_bytes + 1)
    except FileNotFoundError:
        raise InputError(f"{what} {path}: no such file") from None
    except OSError as error:
        raise InputError(f"{what} {path}: cannot read: {error.strerror or error}") from None
    if len(data) > max_bytes:
        raise InputError(f"{what} {path}: larger than {max_bytes} bytes; not a {what} file")
    return data


def read_toml_input(path: Path, what: str, shown: str, max_bytes: int) -> dict[str, Any]:
    """A TOML file a user hands in, parsed; any fault is one InputError that starts `shown`
    (e.g. "baseline FILE") and calls the file `what` ("baseline")."""
    import tomllib

    data = read_input_bytes(path, what, max_bytes)
    try:
        return tomllib.loads(data.decode("utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as error:
        raise InputError(f"{shown}: not valid TOML: {error}") from None
    except RecursionError:
        raise InputError(f"{shown}: nested too deeply to be a {what}") from None


def first_validation_error(error: ValidationError) -> str:
    """`where: what` of the first fault pydantic found, for a one-line InputError."""
    first = error.errors()[0]
    where = ".".join(str(part) for part in first["loc"]) or "top level"
    return f"{where}: {first['msg']}"
