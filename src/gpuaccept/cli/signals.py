"""SIGINT and SIGTERM as an exception the suite can act on (the CLI edge owns signal policy).

The first signal raises `Interrupted` where the main thread is; any further one is ignored while
gpuaccept stops its workers and writes what it has, so a second Ctrl-C cannot leave orphans or a
traceback behind.
"""

from __future__ import annotations

import signal
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType

from gpuaccept import interrupts
from gpuaccept.errors import Interrupted

_SIGNALS = (signal.SIGINT, signal.SIGTERM)


@contextmanager
def interrupts_as_exceptions() -> Iterator[None]:
    fired: list[int] = []

    def handler(signum: int, frame: FrameType | None) -> None:
        if fired:
            return
        fired.append(signum)
        interrupts.note(signum)  # asked for again at the run's next step, should this be lost
        if interrupts.deferring():
            return  # raised when the step that must not be cut ends (interrupts.deferred)
        raise Interrupted(signum)

    previous = {signum: signal.signal(signum, handler) for signum in _SIGNALS}
    try:
        yield
    except Interrupted:
        # delivered: the run ends with it. Not at the start, and not on a normal end: a signal
        # lost in this block (or before a nested one, as accept --json's) stops the run's next step
        interrupts.clear()
        raise
    finally:
        for signum, old in previous.items():
            # After an interruption the process is on its way out: a late second Ctrl-C must not
            # kill it between writing the report and exiting with 130/143.
            signal.signal(signum, signal.SIG_IGN if fired else old)
