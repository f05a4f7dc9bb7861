"""gpuaccept's own records of what it did to a fleet (issue #49 §2, §3): the circuit breaker's trip
and the regressions it holds, with every change and who made it.

The scheduler keeps the drains (their reasons say whose they are); what it cannot keep is a
decision that must outlive its window: a tripped breaker stays tripped until a person resets it,
and a stack found regressed stays held until a person clears it. They live in one JSON file an
operator can read (`--state FILE`, `GPUACCEPT_ACT_STATE`, else the user's data directory beside
the history). Every health check of a cluster must share it for the breaker to count the cluster:
put it on shared storage. A decision reads it, and an enforced one writes it back, under one lock
(`lock_ledger`): two nodes' health checks that fail at once are decided one after the other, so
the breaker's count never misses the other's drain.
"""

from __future__ import annotations

import errno
import fcntl
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from gpuaccept.errors import EnvironmentProblem, InputError

STATE_ENV = "GPUACCEPT_ACT_STATE"
# a year of hourly trips and resets is under 20,000 events; the file stays small to read at
# every health check
EVENTS_KEPT = 1000
# the longest breaker window `act` takes (--breaker-minutes: a week)
DRAINS_KEPT = timedelta(days=7)
MAX_STATE_BYTES = 16 * 1024 * 1024
LOCK_SECONDS = 60.0

Event = Literal["tripped", "reset", "regression", "cleared"]


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class TripRecord(_Frozen):
    at: datetime
    why: str


class RegressionRecord(_Frozen):
    stack: str = Field(pattern=r"^[0-9a-f]{8}$")
    checks: tuple[str, ...]
    nodes: tuple[str, ...]
    since: datetime


class DrainRecord(_Frozen):
    node: str
    at: datetime


class LedgerEvent(_Frozen):
    at: datetime
    event: Event
    by: str  # "gpuaccept" for its own trips and holds; the person's name otherwise
    why: str
    stack: str | None = None


class Ledger(_Frozen):
    version: Literal[1] = 1
    tripped: TripRecord | None = None
    regressions: tuple[RegressionRecord, ...] = ()
    # the drains gpuaccept made, for the breaker: a drain an administrator lifted since still
    # counts in its window (the scheduler's state no longer shows it)
    drains: tuple[DrainRecord, ...] = ()
    # a person's reset of the breaker: drains before it are no longer counted (they vouched)
    counted_from: datetime | None = None
    events: tuple[LedgerEvent, ...] = ()

    def held_regressions(self) -> dict[str, tuple[str, ...]]:
        return {r.stack: r.checks for r in self.regressions}

    def drained(self, now: datetime, node: str) -> Ledger:
        """A drain made now (those older than the longest breaker window are let go)."""
        at = _aware(now)
        kept = tuple(d for d in self.drains if d.at >= at - DRAINS_KEPT)
        return self.model_copy(update={"drains": (*kept, DrainRecord(node=node, at=at))})

    def drains_since(self, since: datetime) -> list[str]:
        """The nodes of the drains made at `since` or later, one per drain."""
        start = _aware(since)
        return [d.node for d in self.drains if d.at >= start]

    def window_start(self, since: datetime) -> datetime:
        """`since`, or the last reset when it is later (in `since`'s form: naive or aware)."""
        if self.counted_from is None or _aware(since) >= self.counted_from:
            return since
        start = self.counted_from
        return start if since.tzinfo is not None else start.astimezone().replace(tzinfo=None)

    def _with_event(self, event: LedgerEvent, **changes: object) -> Ledger:
        events = (*self.events, event)[-EVENTS_KEPT:]
        return self.model_copy(update={**changes, "events": events})

    def trip(self, now: datetime, why: str) -> Ledger:
        """The breaker tripped (a trip already held is kept as it was: the first one says when
        the fleet started failing)."""
        if self.tripped is not None:
            return self
        at = _aware(now)
        return self._with_event(
            LedgerEvent(at=at, event="tripped", by="gpuaccept", why=why),
            tripped=TripRecord(at=at, why=why),
        )

    def reset(self, now: datetime, by: str, why: str) -> Ledger:
        if self.tripped is None:
            raise InputError("the circuit breaker is not tripped: nothing to reset")
        at = _aware(now)
        return self._with_event(
            LedgerEvent(at=at, event="reset", by=by, why=why), tripped=None, counted_from=at
        )

    def hold_regression(
        self, now: datetime, stack: str, checks: tuple[str, ...], nodes: tuple[str, ...]
    ) -> Ledger:
        """Hold `stack` as regressed (a stack held already is kept as it was)."""
        if stack in self.held_regressions():
            return self
        record = RegressionRecord(stack=stack, checks=checks, nodes=nodes, since=_aware(now))
        why = f"{len(nodes)} node(s) failed alike ({', '.join(checks)}): {', '.join(nodes[:5])}"
        return self._with_event(
            LedgerEvent(at=record.since, event="regression", by="gpuaccept", why=why, stack=stack),
            regressions=(*self.regressions, record),
        )

    def clear_regression(self, now: datetime, stack: str, by: str, why: str) -> Ledger:
        if stack not in self.held_regressions():
            held = ", ".join(self.held_regressions()) or "none"
            raise InputError(f"stack {stack} is not held as a regression (held: {held})")
        kept = tuple(r for r in self.regressions if r.stack != stack)
        return self._with_event(
            LedgerEvent(at=_aware(now), event="cleared", by=by, why=why, stack=stack),
            regressions=kept,
        )


def _aware(moment: datetime) -> datetime:
    """A time with its offset (a naive one is the machine's local time, as Slurm's are)."""
    return moment.astimezone() if moment.tzinfo is None else moment


def default_state(environ: dict[str, str] | None = None) -> Path:
    """$GPUACCEPT_ACT_STATE, else the user's data directory (XDG), else ~/.local/share."""
    from gpuaccept.data_home import user_data_path

    return user_data_path(STATE_ENV, "act-state.json", environ)


def load_ledger(path: Path) -> Ledger:
    """The records in `path`; none yet when the file does not exist. InputError naming the file
    for anything else that is not a ledger."""
    from gpuaccept.input_files import read_input_bytes

    shown = f"act state {path}"
    if not path.exists() and not path.is_symlink():
        return Ledger()
    data = read_input_bytes(path, "act state", MAX_STATE_BYTES)
    try:
        return Ledger.model_validate_json(data)
    except ValidationError as error:
        first = error.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "the document"
        raise InputError(
            f"{shown}: not gpuaccept's act state ({where}: {first['msg']}); fix or move it "
            "(a person's reset is recorded in it: do not delete it blindly)"
        ) from None


def save_ledger(path: Path, ledger: Ledger) -> None:
    from gpuaccept.output_files import write_text_atomically

    write_text_atomically(path, ledger.model_dump_json(indent=2) + "\n", "--state")


def reset_breaker(path: Path, by: str, why: str) -> Ledger:
    """A person's reset of the breaker, recorded under the records' lock."""
    with lock_ledger(path):
        ledger = load_ledger(path).reset(now_utc(), by, why)
        save_ledger(path, ledger)
    return ledger


def clear_regression(path: Path, stack: str, by: str, why: str) -> Ledger:
    """A person's clearing of a held stack, recorded under the records' lock."""
    with lock_ledger(path):
        ledger = load_ledger(path).clear_regression(now_utc(), stack, by, why)
        save_ledger(path, ledger)
    return ledger


def check_state_path(path: Path) -> None:
    """Refuse, before anything is asked of the scheduler, a state file that cannot be kept."""
    from gpuaccept.output_files import check_output_file

    check_output_file(path, "--state")
    if path.exists() or path.is_symlink():
        load_ledger(path)


@contextmanager
def lock_ledger(path: Path, seconds: float = LOCK_SECONDS) -> Iterator[None]:
    """Hold the state's lock (a file beside it) for a read, decide, act and write."""
    lock = path.with_name(path.name + ".lock")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        descriptor = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o644)
    except OSError as error:
        raise InputError(
            f"--state {path}: cannot open its lock {lock}: {error.strerror or error}"
        ) from None
    try:
        deadline = time.monotonic() + seconds
        while True:
            try:
                fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except OSError as error:
                if error.errno not in (errno.EAGAIN, errno.EACCES):
                    raise EnvironmentProblem(
                        f"--state {path}: cannot lock it: {error.strerror or error}"
                    ) from None
                if time.monotonic() > deadline:
                    raise EnvironmentProblem(
                        f"--state {path}: another gpuaccept act held it for over {seconds:g} s; "
                        "nothing was changed"
                    ) from None
                time.sleep(0.05)
        yield
    finally:
        os.close(descriptor)


def now_utc() -> datetime:
    return datetime.now(UTC)
