"""`history trend`: one figure over time, oldest first, per node and GPU."""

from __future__ import annotations

import json
from dataclasses import dataclass
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
from gpuaccept.commands.options import arg, opt
from gpuaccept.errors import InputError

if TYPE_CHECKING:
    from gpuaccept.commands.output import Output
    from gpuaccept.store.history import MetricPoint


_LEVEL = "Only runs of this level (accept: quick, standard, full; bench: the benchmark)."


@dataclass(frozen=True, kw_only=True)
class TrendRequest:
    metric: Annotated[str, arg("A figure's name, or CHECK/NAME (e.g. matmul/...")]
    history: Annotated[str | None, HISTORY] = None
    node: Annotated[str | None, NODE] = None
    command: Annotated[str | None, COMMAND] = None
    level: Annotated[str | None, opt("--level", "LEVEL", _LEVEL)] = None
    as_json: Annotated[bool, AS_JSON] = False

    def __post_init__(self) -> None:
        known_command(self.command)


@dataclass(frozen=True)
class TrendResult:
    points: list[MetricPoint]  # oldest first
    kinds: dict[int, str]  # run id -> "COMMAND LEVEL (MODE)"
    mixed: list[str]  # the kinds of run the points come from, sorted ("?" for a run not listed)
    exit_code: int = 0


def run(request: TrendRequest, out: Output) -> TrendResult:
    """The figure's points; a figure no run recorded (under the filters) is refused."""
    from gpuaccept.results import device_label

    metric, node, command, level = request.metric, request.node, request.command, request.level
    with opened(request.history) as store:
        points = store.points(metric, node=node, command=command, level=level)
        kinds = {
            run.id: f"{run.command} {run.level} ({run.device_mode})"
            for run in store.list_runs(node=node, command=command)
        }
    if not points:
        raise InputError(
            f"no figure named {metric!r} recorded"
            + (f" for node {node}" if node else "")
            + (f" by {command} runs" if command else "")
            + (f" at level {level}" if level else "")
            + " (`gpuaccept history show RUN` lists a run's figures)"
        )
    mixed = sorted({kinds.get(p.run_id, "?") for p in points})
    result = TrendResult(points, kinds, mixed)
    if request.as_json:
        out.line(json.dumps(_as_json(result, metric), indent=2))
        return result
    if len(mixed) > 1:
        # as `history compare` says: a quick run's figure is not a standard run's, nor a bench's
        out.line(
            f"[WARN] these figures come from {len(mixed)} kinds of run ({'; '.join(mixed)}), "
            "which measure different sizes: compare like with like (--command, --level)"
        )
    write_table(
        out,
        ["started (UTC)", "run", "kind", "node", "device", "metric", "value", "unit"],
        [
            [
                p.started_at[:19],
                str(p.run_id),
                kinds.get(p.run_id, "?"),
                str(p.hostname),
                device_label(p.device_index),
                p.metric,
                f"{p.value:.4g}",
                p.unit,
            ]
            for p in points
        ],
    )
    return result


def _as_json(result: TrendResult, metric: str) -> dict[str, object]:
    from gpuaccept.results import device_label

    return {
        "metric": metric,
        "kinds": result.mixed,
        "points": [
            {
                "started_at": p.started_at,
                "run": p.run_id,
                "kind": result.kinds.get(p.run_id),
                "node": p.hostname,
                "device": device_label(p.device_index),
                "metric": p.metric,
                "value": p.value,
                "unit": p.unit,
            }
            for p in result.points
        ],
    }
