"""`gpuaccept accept` as a library call: plan -> run -> write, on one node or across nodes."""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from gpuaccept.commands.accept.across_nodes import accept_across_nodes
from gpuaccept.commands.accept.early import interrupted_early, write_early
from gpuaccept.commands.accept.one_node import run_suite, write_outputs
from gpuaccept.commands.accept.plan import plan_accept
from gpuaccept.errors import InputError, Interrupted
from gpuaccept.interrupts import interrupted_cause

if TYPE_CHECKING:
    from gpuaccept.commands.accept.request import AcceptRequest
    from gpuaccept.commands.output import Output
    from gpuaccept.results import RunReport


@dataclass(frozen=True)
class AcceptResult:
    """How an accept run ended: the process's exit code (0 fit, 1 failed or not judged, 130/143
    interrupted) and the report written (None on a rank other than its node's first)."""

    exit_code: int
    report: RunReport | None


def run(
    request: AcceptRequest, out: Output, written: list[RunReport] | None = None
) -> AcceptResult:
    """Plan the run (refusing bad input before any work), run the suite, write what was asked.

    `written` receives the final report as soon as it is complete, for a caller that prints it
    whatever happens next (--json). A refused input raises its InputError (one line), a signal
    while planning raises Interrupted after writing the INTERRUPTED report to --report-dir; a
    signal once the checks run ends the run with its report written and the signal's exit code.
    """
    # nothing to import or start before the `try`: a signal from the first moment the caller
    # catches them leaves the early report (the modules above are light, loaded with this one)
    written = written if written is not None else []
    started, clock = datetime.now(UTC), time.monotonic()
    one_node = True
    try:
        plan = plan_accept(request, out)
        one_node = plan.launch is None
        if plan.launch is not None:
            if request.as_json:
                raise InputError(
                    f"--json is for one node: under {plan.launch.launcher} each node writes its "
                    "own JSON report (--report-dir)"
                )
            code, report = accept_across_nodes(plan, plan.launch, out)
            return AcceptResult(exit_code=code, report=report)
        reports, interrupted = run_suite(plan, out)
        report = write_outputs(plan, reports, interrupted, written, out)
        return AcceptResult(exit_code=report.verdict.exit_code, report=report)
    except BaseException as raised:  # Interrupted is one, as KeyboardInterrupt is
        # a signal while a module is imported may come out wrapped (interrupted_cause)
        error = raised if isinstance(raised, Interrupted) else interrupted_cause(raised)
        if error is None:
            raise
        # with --json the caller reports the early stop on stdout; under a launcher every
        # node writes its own, so only one node's own --report-dir gets it here
        if not request.as_json and request.report_dir is not None and one_node and not written:
            early = interrupted_early(request.level, request.device, started, clock, error)
            write_early(early, request.report_dir, out)
        if error is raised:
            raise
        raise error from None
