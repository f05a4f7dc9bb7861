"""`history gpu`: one GPU's life, followed by its UUID across hosts."""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Annotated

from gpuaccept.commands.history.common import AS_JSON, HISTORY, opened, write_table
from gpuaccept.commands.options import arg, check_bounds, opt
from gpuaccept.errors import InputError

if TYPE_CHECKING:
    from gpuaccept.act.offenders import GpuLife
    from gpuaccept.commands.output import Output

_GPU_UUID = re.compile(r"(GPU|MIG)-[0-9A-Fa-f-]{8,64}")


@dataclass(frozen=True, kw_only=True)
class GpuRequest:
    # as NVML says it: GPU-... (or MIG-...)
    uuid: Annotated[str, arg("The GPU's UUID (GPU-...), as NVML says.")]
    history: Annotated[str | None, HISTORY] = None
    limit: Annotated[int, opt("--limit", "N", "Newest runs to read.", least=1, most=10_000)] = 100
    as_json: Annotated[bool, AS_JSON] = False

    def __post_init__(self) -> None:
        check_bounds(self)
        if not _GPU_UUID.fullmatch(self.uuid):
            raise InputError(
                f"{self.uuid!r} is not a GPU UUID (GPU-xxxxxxxx-..., from nvidia-smi -L)"
            )


@dataclass(frozen=True)
class GpuResult:
    life: GpuLife
    exit_code: int = 0


def run(request: GpuRequest, out: Output) -> GpuResult:
    """Every run the GPU took part in, what each recommended for it, and whether it is a repeat
    offender. A UUID no stored run names is refused (exit 2), as `history show` of an unknown
    run is: a script must never read "no such GPU" as a GPU with a clean life."""
    from gpuaccept.act.offenders import gpu_life

    uuid = request.uuid
    with opened(request.history) as store:
        found = store.gpu_runs(uuid, request.limit)
        reports = {row.id: store.report(row.id) for row, _, _ in found}
        if not found:
            raise InputError(
                f"history {store.path}: no run recorded with GPU {uuid} (check the UUID "
                "against `nvidia-smi -L` on its node, and that its runs went to this history)"
            )
    rows = [
        (row.id, row.started_at, row.hostname, row.command, row.verdict.label, index, serial)
        for row, index, serial in found
    ]
    life = gpu_life(uuid, rows, reports)
    if request.as_json:
        out.line(json.dumps({**asdict(life), "said": life.said}, indent=2, default=str))
        return GpuResult(life)
    write_table(
        out,
        ["run", "started (UTC)", "host", "index", "command", "result", "action for it"],
        [
            [
                str(r.run),
                r.started_at[:19],
                str(r.host),
                "" if r.index is None else str(r.index),
                r.command,
                r.verdict,
                r.action.value,
            ]
            for r in life.runs
        ],
    )
    out.line(life.said)
    return GpuResult(life)
