"""Every file gpuaccept writes goes through here: checked before a run, written so nothing is lost.

- A path is checked before the run it belongs to: a directory, a special file, a parent that is
  a file, or a place without write permission is refused then, not after minutes of measuring.
- A symbolic link is followed: its target is written and the link stays a link.
- A character device or FIFO (/dev/null, /dev/stdout, a named pipe) is written through, never
  replaced; any other non-regular file is refused.
- A regular file is replaced atomically (a temporary file in the same directory, then a rename),
  so a reader sees the old content or the new, never half of either; an existing file keeps
  its permissions, a new one gets 0666 less the umask (reports are read by other users).
- `write_new_file` never replaces anything: concurrent runs each get their own file.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import tempfile
from pathlib import Path

from gpuaccept.errors import InputError


class OutputError(InputError):
    """An output path that cannot be written as asked (exit 2)."""


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _shown(path: Path, flag: str) -> str:
    return f"{flag} {path}" if flag else str(path)


def _reason(error: OSError) -> str:
    return error.strerror or str(error)


def _resolved(path: Path) -> Path:
    """The path a write lands on: symbolic links followed (a dangling one to its target)."""
    try:
        return Path(os.path.realpath(path))
    except (OSError, ValueError):
        return path


def _target_mode(path: Path) -> tuple[Path, int | None]:
    """Where a write to `path` lands (links followed) and what stands there (None: nothing yet);
    other OS errors go to the caller, which words them for its moment (check or write)."""
    target = _resolved(path)
    try:
        return target, target.stat().st_mode
    except FileNotFoundError:
        return target, None


def check_output_file(path: Path, flag: str = "") -> None:
    """Refuse, before any work, an output path that could not be written as a file."""
    shown = _shown(path, flag)
    try:
        target, mode = _target_mode(path)
    except NotADirectoryError:
        raise OutputError(f"{shown}: a parent of it is a file, not a directory") from None
    except OSError as error:
        raise OutputError(f"{shown}: cannot be checked: {_reason(error)}") from None
    if mode is not None:
        if stat.S_ISDIR(mode):
            raise OutputError(f"{shown}: is a directory, expected a file path")
        if stat.S_ISCHR(mode) or stat.S_ISFIFO(mode):
            if not os.access(target, os.W_OK):
                raise OutputError(f"{shown}: not writable")
            return
        if not stat.S_ISREG(mode):
            raise OutputError(f"{shown}: not a regular file (a socket or block device?)")
        if not os.access(target, os.W_OK):
            raise OutputError(f"{shown}: not writable")
    check_output_directory(target.parent, flag, shown=shown)


def check_output_directory(directory: Path, flag: str = "", *, shown: str | None = None) -> None:
    """Make sure `directory` exists (created if need be) and can take new files."""
    shown = shown or _shown(directory, flag)
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except FileExistsError:
        raise OutputError(f"{shown}: {directory} is a file, not a directory") from None
    except NotADirectoryError:
        raise OutputError(f"{shown}: a parent of {directory} is a file, not a directory") from None
    except OSError as error:
        raise OutputError(f"{shown}: cannot create {directory}: {_reason(error)}") from None
    if not os.access(directory, os.W_OK | os.X_OK):
        raise OutputError(f"{shown}: {directory} is not writable")


def _write_through(target: Path, data: bytes) -> None:
    with target.open("wb") as stream:
        stream.write(data)


def _temporary_copy(directory: Path, name: str, data: bytes, mode: int) -> str:
    handle, temp = tempfile.mkstemp(prefix=f".{name}.", dir=directory)
    try:
        os.fchmod(handle, mode)
        with os.fdopen(handle, "wb") as stream:
            stream.write(data)
            stream.flush()
            os.fsync(stream.fileno())
    except BaseException:
        Path(temp).unlink(missing_ok=True)
        raise
    return temp


def write_bytes_atomically(path: Path, data: bytes, flag: str = "") -> None:
    """Write `data` to `path` as the module docstring says; OutputError if it cannot be done."""
    shown = _shown(path, flag)
    try:
        target, mode = _target_mode(path)
    except OSError as error:
        raise OutputError(f"{shown}: cannot write: {_reason(error)}") from None
    try:
        if mode is not None and (stat.S_ISCHR(mode) or stat.S_ISFIFO(mode)):
            _write_through(target, data)
            return
        if mode is not None and not stat.S_ISREG(mode):
            kind = "a directory" if stat.S_ISDIR(mode) else "not a regular file"
            raise OutputError(f"{shown}: {kind}; nothing written")
        target.parent.mkdir(parents=True, exist_ok=True)
        keep = stat.S_IMODE(mode) if mode is not None else 0o666 & ~_umask()
        temp = _temporary_copy(target.parent, target.name, data, keep)
        try:
            os.replace(temp, target)
        except BaseException:
            Path(temp).unlink(missing_ok=True)
            raise
    except OSError as error:
        raise OutputError(f"{shown}: cannot write: {_reason(error)}") from None


def write_text_atomically(path: Path, text: str, flag: str = "") -> None:
    write_bytes_atomically(path, text.encode("utf-8"), flag)


def write_new_file(directory: Path, name: str, text: str, flag: str = "") -> Path:
    """Write a new file in `directory` named `name` (or `stem-2.ext`, ...): never replaces one."""
    return write_new_bytes(directory, name, text.encode("utf-8"), flag)


def write_new_bytes(directory: Path, name: str, data: bytes, flag: str = "") -> Path:
    """`write_new_file` for bytes."""
    shown = _shown(directory, flag)
    stem, dot, suffix = name.rpartition(".")
    if not dot:
        stem, suffix = name, ""
    try:
        directory.mkdir(parents=True, exist_ok=True)
        temp = _temporary_copy(directory, name, data, 0o666 & ~_umask())
    except OSError as error:
        raise OutputError(f"{shown}: cannot write {name}: {_reason(error)}") from None
    try:
        for attempt in range(1, 1000):
            candidate = directory / (name if attempt == 1 else f"{stem}-{attempt}.{suffix}")
            try:
                os.link(temp, candidate)  # atomic, and fails rather than replace
            except FileExistsError:
                continue
            except OSError as error:
                if error.errno not in (errno.EPERM, errno.ENOTSUP, errno.EXDEV):
                    raise
                # a file system without hard links: exclusive create, then the content
                try:
                    descriptor = os.open(candidate, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
                except FileExistsError:
                    continue
                with os.fdopen(descriptor, "wb") as stream:
                    stream.write(data)
            return candidate
        raise OutputError(f"{shown}: {name} and 998 numbered variants exist already")
    except OSError as error:
        raise OutputError(f"{shown}: cannot write {name}: {_reason(error)}") from None
    finally:
        with contextlib.suppress(OSError):
            os.unlink(temp)


def _identity(path: Path) -> tuple[str, object]:
    """What two names of one file share: (device, inode) when it exists, else where a write to
    it lands (symbolic links followed)."""
    target = _resolved(path)
    try:
        info = target.stat()
    except OSError:
        return ("path", str(target))
    if stat.S_ISCHR(info.st_mode) or stat.S_ISFIFO(info.st_mode):
        return ("stream", id(path))  # /dev/null or a pipe, written through: never a collision
    return ("inode", (info.st_dev, info.st_ino))


def refuse_collisions(
    outputs: dict[str, Path | None], inputs: dict[str, Path | None] | None = None
) -> None:
    """Refuse, before any work, an output that is also an input or another output: writing it
    would destroy what the user handed in, or keep one of two outputs. Keys are the flags."""
    seen: dict[tuple[str, object], str] = {}
    for flag, path in (inputs or {}).items():
        if path is not None:
            seen.setdefault(_identity(path), flag)
    taken_inputs = dict(seen)
    for flag, path in outputs.items():
        if path is None or str(path) == "-":
            continue
        identity = _identity(path)
        if identity[0] == "stream":
            continue
        other = seen.get(identity)
        if other is not None:
            what = "input" if identity in taken_inputs else "output"
            raise OutputError(
                f"{flag} {path}: is also the {what} {other}; writing it would destroy it "
                "(name another file)"
            )
        seen[identity] = flag
