"""The processes a suite leaves behind, read from /proc: what tests of killing and signals judge."""

from __future__ import annotations

from pathlib import Path

# multiprocessing's helpers, not workers: the resource tracker, and the forkserver the workers
# and ranks fork from (it lives while its caller or any of its children does). A forked child
# keeps the server's command line, so the server is the one whose parent has another.
_TRACKER, _SERVER = b"multiprocessing.resource_tracker", b"multiprocessing.forkserver"


def _stat(pid: int) -> list[str] | None:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None


def workers_of(root: int, *, helpers: bool = False) -> list[int]:
    """Every live process below `root` (children, and the forkserver's children), without
    multiprocessing's helpers unless `helpers`."""
    parents: dict[int, int] = {}
    commands: dict[int, bytes] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        fields = _stat(int(entry.name))
        try:
            command = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if fields is not None and fields[0] != "Z":
            parents[int(entry.name)] = int(fields[1])
            commands[int(entry.name)] = command
    below: set[int] = set()
    frontier = {root}
    while frontier:
        frontier = {pid for pid, ppid in parents.items() if ppid in frontier} - below
        below |= frontier

    def helper(pid: int) -> bool:
        command, parent = commands[pid], commands.get(parents[pid], b"")
        return _TRACKER in command or (_SERVER in command and _SERVER not in parent)

    return sorted(pid for pid in below if helpers or not helper(pid))


def gone(pid: int) -> bool:
    """Dead: no such process, or a zombie only waiting for its parent (or init) to reap it."""
    fields = _stat(pid)
    return fields is None or fields[0] == "Z"
