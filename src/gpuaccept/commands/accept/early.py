"""The report of an accept run stopped before it had one of its own (issue #50 §7).

From the first moment accept can be signalled, a signal leaves a report: stopped while the run
was being planned (importing the suite, starting its workers), the INTERRUPTED report of a run
that ran no check stands in for it.
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from gpuaccept.commands.output import Output
    from gpuaccept.errors import Interrupted
    from gpuaccept.results import RunReport


def interrupted_early(
    level: str, device: str, started: datetime, clock: float, error: Interrupted
) -> RunReport:
    """The INTERRUPTED report of a run stopped before any check ran: its mode as asked for, or
    under `auto` as the node's device files say (no torch is imported to tell)."""
    import os

    from gpuaccept.results import RunReport

    cuda = device == "cuda" or (device != "cpu" and os.path.exists("/dev/nvidia0"))
    return RunReport.completed(
        command="accept",
        level=level,
        device_mode="cuda" if cuda else "cpu",
        started=started,
        monotonic_start=clock,
        checks=[],
        environment={},
        interrupted_by=error.signum,
    )


def write_early(report: RunReport, report_dir: Path, out: Output) -> None:
    """The INTERRUPTED report of a run stopped while it was being planned, in --report-dir (a
    directory that cannot take it is said; the exit is the signal's all the same)."""
    from gpuaccept.errors import GpuacceptError
    from gpuaccept.report.json_report import write_json_report

    try:
        out.line(f"[REPORT] {write_json_report(report, report_dir)}")
    except GpuacceptError as error:
        out.error(f"gpuaccept accept: the interrupted run's report was not written: {error}")
