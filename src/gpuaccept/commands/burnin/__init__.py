"""`burnin` as a library call: hours of load on every GPU of the node, judged window by window.

`run(BurnInRequest(...), out)` plans (refusing bad input in one line before any work), runs the
windows not done yet (`gpuaccept.burnin.run`'s loop), then writes, records and says the verdict;
every line goes to `out`. The answer's exit code is the command's.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from typing import TYPE_CHECKING

from gpuaccept.commands.burnin.plan import CPU_STRAGGLER_TOLERANCE_PERCENT, BurnInJob, plan
from gpuaccept.commands.burnin.request import BurnInRequest, BurnInResult

if TYPE_CHECKING:
    from gpuaccept.commands.output import Output

__all__ = [
    "CPU_STRAGGLER_TOLERANCE_PERCENT",
    "BurnInJob",
    "BurnInRequest",
    "BurnInResult",
    "plan",
    "run",
]


def run(
    request: BurnInRequest,
    out: Output,
    *,
    signals: Callable[[], AbstractContextManager[object]] = nullcontext,
) -> BurnInResult:
    """The burn-in `request` asks for, from its checkpoint's next window when it has one.

    `signals` is entered once the job is planned and held to the end: the CLI's
    `interrupts_as_exceptions`, so SIGINT/SIGTERM stop the windows as `Interrupted` (the report
    is written and says so) while a signal during planning ends the process as it always has.
    """
    from gpuaccept.commands.burnin.windows import run_windows
    from gpuaccept.commands.burnin.write import write

    job = plan(request, out)
    with signals():
        report, stopped = run_windows(job, out)
        if report is None:  # a scheduler's checkpoint, not an outcome: no report yet
            assert job.checkpoint_exit_code is not None, "only --checkpoint-every stops early"
            return BurnInResult(exit_code=job.checkpoint_exit_code)
        report, written = write(job, report, stopped, out)
    return BurnInResult(exit_code=report.verdict.exit_code, report=report, report_path=written)
