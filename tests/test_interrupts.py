"""interrupts.held: a step a signal must not cut (torch's import: an exception raised inside its
C++ set-up aborts the process with no report) raises a signal that landed inside when it ends,
and leaves one noted before it to the run's next step, where it was raised before the step
existed (tests/mnist/test_cli_train.py: a lost signal stops training after its epoch)."""

from __future__ import annotations

import signal

import pytest

from gpuaccept import interrupts
from gpuaccept.errors import Interrupted


@pytest.fixture(autouse=True)
def _no_signal_left() -> object:
    interrupts.clear()
    yield
    interrupts.clear()


def _step_signalled_inside(ran_to_the_end: list[bool]) -> None:
    with interrupts.held():
        assert interrupts.deferring()  # the handler notes it and returns, raising nothing
        interrupts.note(signal.SIGTERM)
        ran_to_the_end.append(True)


def test_a_signal_inside_is_raised_when_the_step_ends() -> None:
    ran_to_the_end: list[bool] = []
    with pytest.raises(Interrupted) as raised:
        _step_signalled_inside(ran_to_the_end)
    assert ran_to_the_end == [True]
    assert raised.value.signum == signal.SIGTERM
    assert not interrupts.deferring()


def test_a_signal_noted_before_is_left_to_the_runs_next_step() -> None:
    interrupts.note(signal.SIGINT)
    with interrupts.held():
        pass  # no raise here
    with pytest.raises(Interrupted):
        interrupts.raise_if_interrupted()


def _outer_step(seen: list[bool]) -> None:
    with interrupts.deferred():
        with interrupts.held():
            interrupts.note(signal.SIGTERM)
        seen.append(interrupts.deferring())  # still inside the outer step: nothing raised yet


def test_nested_in_a_deferred_step_it_waits_for_the_outer_one() -> None:
    seen: list[bool] = []
    with pytest.raises(Interrupted):
        _outer_step(seen)
    assert seen == [True]


def test_a_signal_python_wrapped_on_its_way_out_is_found_behind_it() -> None:
    """Raised inside a class body being built (pydantic's __set_name__ during a lazy import),
    Interrupted comes out as RuntimeError("Error calling __set_name__ ...") from it."""

    def builds_a_model_when_the_signal_lands() -> None:
        # what Python does with an exception raised by __set_name__ while building a class
        raise RuntimeError("Error calling __set_name__") from Interrupted(signal.SIGTERM)

    with pytest.raises(RuntimeError) as wrapped:
        builds_a_model_when_the_signal_lands()
    found = interrupts.interrupted_cause(wrapped.value)
    assert isinstance(found, Interrupted)
    assert found.exit_code == 143
    assert interrupts.interrupted_cause(RuntimeError("no signal behind it")) is None
    looped = RuntimeError("a")
    looped.__context__ = RuntimeError("b")
    looped.__context__.__context__ = looped  # a cycle ends the walk, not the process
    assert interrupts.interrupted_cause(looped) is None
