"""`accept --json`: stdout carries one JSON document, the report, and nothing else.

Rendering, so it lives at the CLI edge: the run itself (commands.accept) only hands the report
over as soon as it is complete.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from gpuaccept.commands.accept.early import interrupted_early
from gpuaccept.errors import Interrupted

if TYPE_CHECKING:
    from gpuaccept.results import RunReport


@contextlib.contextmanager
def json_on_stdout(level: str, device: str) -> Iterator[list[RunReport]]:
    """From the moment the option is parsed, stdout carries the report and nothing else. File
    descriptor 1 itself is pointed at stderr for the run (so a library or a worker writing to
    it, in this process or one it starts, lands on stderr); the last report put in the list
    goes to the saved stdout at the end. A signal before the run has a report too (an
    INTERRUPTED one)."""
    import os
    import sys

    from gpuaccept.cli.signals import interrupts_as_exceptions

    started, clock = datetime.now(UTC), time.monotonic()
    sys.stdout.flush()
    saved = os.dup(1)
    os.dup2(2, 1)
    report_out: list[RunReport] = []
    try:
        with contextlib.redirect_stdout(sys.stderr), interrupts_as_exceptions():
            try:
                yield report_out
            except Interrupted as error:
                if not report_out:  # stopped before the run had a report
                    report_out.append(interrupted_early(level, device, started, clock, error))
                raise
    finally:
        sys.stderr.flush()
        os.dup2(saved, 1)
        os.close(saved)
        if report_out:
            sys.stdout.write(report_out[-1].model_dump_json(indent=2) + "\n")
            sys.stdout.flush()
