"""`history list`: the recorded runs, newest first."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Annotated

from gpuaccept.commands.history.common import (
    AS_JSON,
    COMMAND,
    HISTORY,
    NODE,
    known_command,
    opened,
    write_table,
)
from gpuaccept.commands.options import check_bounds, opt

if TYPE_CHECKING:
    from pathlib import Path

    from gpuaccept.commands.output import Output
    from gpuaccept.store.history import RunRow


@dataclass(frozen=True, kw_only=True)
class ListRequest:
    # --history: a file or a postgresql:// URI; None: the default
    history: Annotated[str | None, HISTORY] = None
    node: Annotated[str | None, NODE] = None
    command: Annotated[str | None, COMMAND] = None
    limit: Annotated[int, opt("--limit", "N", "Newest runs to show.", least=1, most=1_000_000)] = 20
    as_json: Annotated[bool, AS_JSON] = False

    def __post_init__(self) -> None:
        check_bounds(self)
        known_command(self.command)


@dataclass(frozen=True)
class ListResult:
    runs: list[RunRow] = field(default_factory=list)  # newest first
    exit_code: int = 0


def run(request: ListRequest, out: Output) -> ListResult:
    """The runs, as a table or JSON. A history file not yet made is an empty list, not an error:
    a new machine has none."""
    from gpuaccept.store.history import history_location, local_file

    path = local_file(history_location(request.history))
    # a dangling link or a loop is opened, and refused; so is a path this user cannot reach
    if path is not None and _absent(path):
        out.line("[]" if request.as_json else f"no runs recorded (no history at {path} yet)")
        return ListResult()
    with opened(request.history) as store:
        runs = store.list_runs(node=request.node, command=request.command, limit=request.limit)
    if request.as_json:
        out.line(json.dumps([_as_json(run) for run in runs], indent=2))
    elif not runs:
        out.line("no runs recorded" + (f" for node {request.node}" if request.node else ""))
    else:
        write_table(
            out,
            ["run", "started (UTC)", "node", "command", "level", "mode", "result", "seconds"],
            [
                [
                    str(run.id),
                    run.started_at[:19],
                    str(run.hostname),
                    run.command,
                    run.level,
                    run.device_mode,
                    run.verdict.label,
                    f"{run.duration_seconds:.1f}",
                ]
                for run in runs
            ],
        )
    return ListResult(runs)


def _as_json(run: RunRow) -> dict[str, object]:
    return {
        "run": run.id,
        "started_at": run.started_at,
        "node": run.hostname,
        "command": run.command,
        "level": run.level,
        "device_mode": run.device_mode,
        "verdict": run.verdict.model_dump(mode="json"),
        "label": run.verdict.label,
        "duration_seconds": run.duration_seconds,
    }


def _absent(path: Path) -> bool:
    """Nothing at `path` (a dangling link is something); unknown (unreachable) is not absent."""
    try:
        return not path.exists() and not path.is_symlink()
    except OSError:
        return False
