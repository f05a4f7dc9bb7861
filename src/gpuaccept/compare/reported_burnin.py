"""A finished burn-in is not reported twice: a checkpoint's windows against the burn-ins the
history holds. The history is read above the burn-in, so this lives here and not in
burnin/checkpoint.py (issue #51 §2: burnin/ sits below the stores).
"""

from __future__ import annotations

from pathlib import Path

from gpuaccept.burnin.checkpoint import FLAG
from gpuaccept.burnin.plan import BurnInProgress
from gpuaccept.errors import InputError
from gpuaccept.store.base import HistoryLocation

# the newest burn-ins of the node read for a finished checkpoint's windows (each a report)
REPORTED_BURNINS_READ = 50


def refuse_a_reported_burnin(
    path: Path, progress: BurnInProgress, hostname: str, history: HistoryLocation
) -> None:
    """A checkpoint that holds every window of its plan is judged again and reported, for the
    run that was stopped after its last window and before its report. One whose windows a
    report in the history already holds is a finished burn-in shown again (the same load, the
    same PASS, a new date): InputError naming that run. A history that cannot be reached now
    has nothing to compare with (the run's report waits in the spool)."""
    from gpuaccept.burnin.checks import windows_digest
    from gpuaccept.store.history import History, HistoryUnreachable

    digest = progress.records_sha256()
    try:
        # opened as the run's recording opens it (created when new): a damaged or foreign
        # database stops the run here, in one line, as it would a moment later
        with History.open(history) as store:
            for run in store.list_runs(
                node=hostname, command="burnin", limit=REPORTED_BURNINS_READ
            ):
                if windows_digest(store.report(run.id)) == digest:
                    raise InputError(
                        f"{FLAG} {path}: its {progress.next_window} windows are already "
                        f"reported, as run {run.id} ({run.started_at[:19]}); a finished burn-in "
                        "is not reported again: start a new one with another checkpoint file"
                    )
    except HistoryUnreachable:
        return
