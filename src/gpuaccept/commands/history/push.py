"""`history push`: the runs the spool kept while their history could not be reached, delivered.

Each is stored once, whatever was stored before. A history that cannot be reached is refused
(exit 2) and the spool keeps every run; a spooled file that is not a report is left in place,
said, and refused once the others are delivered.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated

from gpuaccept.commands.history.common import HISTORY, opened

if TYPE_CHECKING:
    from gpuaccept.commands.output import Output
    from gpuaccept.store.spool import Delivery


@dataclass(frozen=True, kw_only=True)
class PushRequest:
    history: Annotated[str | None, HISTORY] = None


@dataclass(frozen=True)
class PushResult:
    delivery: Delivery | None  # None: the spool was empty, the history not opened
    exit_code: int = 0


def run(request: PushRequest, out: Output) -> PushResult:
    from gpuaccept.store.spool import SpoolError, deliver, pending, spool_dir

    waiting = pending()  # a spool that cannot be read is refused before the history is opened
    if not waiting:
        out.line(f"[HISTORY] nothing to push: the spool {spool_dir()} is empty")
        return PushResult(None)
    with opened(request.history, create=True) as store:
        delivery = deliver(store)
        where = store.path
    for line in delivery.lines():
        out.line(f"[HISTORY] {line}")
    out.line(f"[HISTORY] pushed {len(delivery.delivered)} run(s) to {where}")
    if delivery.refused or delivery.problem:
        raise SpoolError(
            f"{len(delivery.refused)} spooled file(s) are not reports; left in {spool_dir()}"
        )
    return PushResult(delivery)
