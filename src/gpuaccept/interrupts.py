"""The signal that stopped a run, kept where the run can ask for it.

The CLI's handler raises `Interrupted` where the main thread is (cli/signals.py). An exception
raised there can be lost: when the signal lands while Python runs a finalizer or another
callback, the exception is printed as "Exception ignored in ..." and the run goes on as if no
signal came (seen in CI: a SIGTERM at start-up, the whole run then completed). So the handler
also notes the signal here, and the run asks at each step (suite/runner.py between checks)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from gpuaccept.errors import Interrupted

_fired: list[int] = []
_deferring = [0]


def note(signum: int) -> None:
    """The first signal of the run."""
    if not _fired:
        _fired.append(signum)


def clear() -> None:
    """The interruption was handled (the run reports it and ends): a later run in this process
    (tests run the CLI in-process) starts without it."""
    _fired.clear()


def raise_if_interrupted() -> None:
    """Raise the noted signal's `Interrupted`: a run that got here got no exception for it."""
    if _fired:
        raise Interrupted(_fired[0])


@contextmanager
def deferred() -> Iterator[None]:
    """A step a signal must not cut in two, such as starting child processes: one interrupted
    there is forked but unknown to its parent, which then neither kills nor waits for it, and it
    dies on its parent's lost queue with a traceback (seen: SIGTERM as `train llm` started its
    ranks). A signal that lands inside is only noted, and raised when the step is done."""
    _deferring[0] += 1
    try:
        yield
    finally:
        _deferring[0] -= 1
    if not _deferring[0]:
        raise_if_interrupted()


@contextmanager
def held() -> Iterator[None]:
    """As `deferred`, for a step that is not a place to stop either (a module's import, whose C++
    set-up aborts the process on an exception): a signal that lands inside is raised when it
    ends; one noted before it is left to the run's next step, as if the step were not there."""
    noted_before = bool(_fired)
    _deferring[0] += 1
    try:
        yield
    finally:
        _deferring[0] -= 1
    if not _deferring[0] and _fired and not noted_before:
        raise Interrupted(_fired[0])


def deferring() -> bool:
    """Whether a signal is to be noted only, and raised when the deferred step ends."""
    return _deferring[0] > 0


def interrupted_cause(error: BaseException) -> Interrupted | None:
    """The signal's Interrupted behind `error`, where Python wrapped it on its way out: raised
    inside a class body being built (pydantic's `__set_name__` during a lazy import), Python
    raises a RuntimeError "Error calling __set_name__" from it, and the run then ended with a
    traceback and exit 1 instead of its INTERRUPTED report and 143."""
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        if isinstance(current, Interrupted):
            return current
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return None
