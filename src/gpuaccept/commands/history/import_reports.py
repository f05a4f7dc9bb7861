"""`history import`: JSON reports (e.g. from HTCondor jobs) added to a history.

Every file is checked before the history is opened, so one malformed report, or one dated after
now, imports none; then they are stored in batches, each one transaction. A report already
stored (same content) is not stored twice, so an import stopped part-way is finished by running
it again.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

from gpuaccept.commands.history.common import HISTORY, opened
from gpuaccept.commands.options import arg

if TYPE_CHECKING:
    from gpuaccept.commands.output import Output


_REPORTS = "JSON reports (e.g. from HTCondor jobs), or directories of them (their *.json files)."


@dataclass(frozen=True, kw_only=True)
class ImportRequest:
    reports: Annotated[list[Path], arg(_REPORTS)]
    history: Annotated[str | None, HISTORY] = None


@dataclass(frozen=True)
class ImportResult:
    new: int  # runs stored by this import
    again: int  # reports the history already held
    exit_code: int = 0


def run(request: ImportRequest, out: Output) -> ImportResult:
    """Each stored report said as it is stored (a long import shows its progress)."""
    from gpuaccept.store.importing import check_reports, report_files, store_reports

    found = report_files(request.reports)
    check_reports(found.reports)
    if found.captures:
        out.line(
            f"[HISTORY] skipped {len(found.captures)} environment capture(s) (*.env.json): not "
            "runs; each report holds its own"
        )
    new = again = 0
    with opened(request.history, create=True) as store:
        for done in store_reports(store, found.reports):
            new, again = new + done.new, again + (not done.new)
            said = "" if done.new else " (already recorded)"
            out.line(f"[HISTORY] {done.source}: run {done.run_id}{said}")
    out.line(f"[HISTORY] imported {new} new run(s), {again} already recorded")
    return ImportResult(new, again)
