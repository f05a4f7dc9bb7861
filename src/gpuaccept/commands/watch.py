"""`gpuaccept watch`: a host daemon between jobs (issue #54 §1).

Every `interval` seconds it polls NVML and the kernel log (`watch.poll`, judged by accept's own
rules), holds each finding over `debounce_polls` consecutive polls (`watch.debounce`), serves
what it sees as Prometheus metrics (`watch.metrics`), and when the raised findings change writes a
record to the history (a run of command `watch`: the stores' interface is unchanged) and hands a
new failure to the action layer (`act.slurm.act_on_node`: the same guards, modes and records as
`act slurm`; shadow by default).

It survives what a host does to a daemon: NVML failing (no driver, a driver being reloaded) is a
poll that judges no GPU, counted and said once, and NVML is read again at the next poll; a
history that cannot be written (a full disk, a database away) keeps its records in a bounded
queue and tries again at each poll; a scheduler that does not answer is counted and said.
SIGTERM or SIGINT ends the wait, the queue is flushed once more, and it exits 0: a daemon
asked to stop that stopped cleanly has done its job (the run commands' 143 says a verdict was
cut short; a watch has no verdict to cut).
"""

from __future__ import annotations

import math
import os
import signal
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

from gpuaccept.commands.act import (
    ACT_STATE,
    BREAKER_MINUTES,
    BREAKER_PARTITION,
    BREAKER_SHARE,
    MODES,
    RESUME_LEVEL,
    Guarding,
)
from gpuaccept.commands.options import HISTORY, NO_HISTORY, RULES, opt
from gpuaccept.errors import EnvironmentProblem, InputError

if TYPE_CHECKING:
    from gpuaccept.actions import ActionRules
    from gpuaccept.commands.output import Output
    from gpuaccept.results import RunReport
    from gpuaccept.store.base import HistoryLocation
    from gpuaccept.watch.debounce import Change, Debouncer, Raised
    from gpuaccept.watch.metrics import WatchState
    from gpuaccept.watch.poll import Poll

DEFAULT_PORT = 9847  # loopback by default; no registry entry is claimed for it
MAX_PENDING = 1000  # records kept while the history refuses them (a full disk); the oldest go
# the level a watch's drain reason carries: its findings are judged by the quick level's health
# and events checks, and a pass at the resume level (standard) returns the node, as after accept
ACT_LEVEL = "quick"
_ONCE = "One poll, judged at once; exit 1 on a fail, 3 if NVML could not be read."


@dataclass(frozen=True, kw_only=True)
class WatchRequest:
    interval: Annotated[
        float, opt("--interval", "SECONDS", "Seconds between polls (0.1-3600).")
    ] = 10.0
    debounce_polls: Annotated[
        int, opt("--debounce-polls", "N", "Polls a state holds before raised.")
    ] = 3
    # 0: any free port; None: no metrics server (a library caller's)
    metrics_port: Annotated[
        int | None, opt("--metrics-port", "PORT", "Prometheus port (0: any free).")
    ] = DEFAULT_PORT
    metrics_address: Annotated[
        str, opt("--metrics-address", "ADDR", "Address to serve metrics on (loopback).")
    ] = "127.0.0.1"
    once: Annotated[bool, opt("--once", text=_ONCE)] = False
    polls: Annotated[
        int | None, opt("--polls", "N", "Stop after N polls (default: run until told).")
    ] = None
    history: Annotated[str | None, HISTORY] = None  # None: the default history
    no_history: Annotated[bool, NO_HISTORY] = False
    act: Annotated[str, opt("--act", "MODE", "report, shadow or enforce (as `act slurm`).")] = (
        "shadow"
    )
    # None: GPUACCEPT_NODE_NAME, SLURMD_NODENAME, ..., the host name
    node: Annotated[str | None, opt("--node", "NAME", "The scheduler's name for this node.")] = None
    partition: Annotated[str | None, BREAKER_PARTITION] = None  # the nodes the breaker counts
    rules: Annotated[Path | None, RULES] = None  # a site's action tables over the built-in ones
    # the guards `act slurm` takes that a watch's drain meets (commands.act.Guarding)
    resume_level: Annotated[str, RESUME_LEVEL] = "standard"
    breaker_share: Annotated[float, BREAKER_SHARE] = 0.02
    breaker_minutes: Annotated[float, BREAKER_MINUTES] = 60.0
    state: Annotated[Path | None, ACT_STATE] = None
    # NVML's event watcher beside the polls (off: the benchmark's A/B)
    nvml_events: Annotated[
        bool, opt("--nvml-events/--no-nvml-events", text="Watch NVML's events beside the polls.")
    ] = True

    def __post_init__(self) -> None:
        if not (math.isfinite(self.interval) and 0.1 <= self.interval <= 3600):
            raise InputError(f"--interval {self.interval:g}: give seconds from 0.1 to 3600")
        if not 1 <= self.debounce_polls <= 100:
            raise InputError(f"--debounce-polls {self.debounce_polls}: give polls from 1 to 100")
        if self.metrics_port is not None and not 0 <= self.metrics_port <= 65535:
            raise InputError(f"--metrics-port {self.metrics_port}: give a port from 0 to 65535")
        if self.polls is not None and self.polls < 1:
            raise InputError(f"--polls {self.polls}: give at least 1")
        if self.act not in MODES:
            raise InputError(f"--act {self.act!r}: give one of {', '.join(MODES)}")
        if self.no_history and self.history is not None:
            raise InputError("--history names where to record: not with --no-history")

    @property
    def guarding(self) -> Guarding:
        return Guarding(
            resume_level=self.resume_level,
            breaker_share=self.breaker_share,
            breaker_minutes=self.breaker_minutes,
            state=self.state,
        )


@dataclass(frozen=True)
class WatchResult:
    """0: stopped as asked (a signal, --polls), or --once found nothing failing; 1: --once
    found a failing finding; 3: --once could not read NVML and found nothing failing."""

    exit_code: int
    polls: int
    raised: tuple[Raised, ...]
    records: int  # written to the history
    metrics_port: int | None
    stopped_by: str | None = None  # SIGTERM, SIGINT


def run(request: WatchRequest, out: Output) -> WatchResult:
    from gpuaccept.act.ledger import check_state_path, default_state
    from gpuaccept.commands.act import checked_guard
    from gpuaccept.commands.recording import history_target
    from gpuaccept.probe.hardware import check_nvml_init_timeout_setting
    from gpuaccept.probe.kernel_log import check_kernel_log_setting
    from gpuaccept.probe.sysfs import check_sysfs_root_setting
    from gpuaccept.watch.debounce import Debouncer
    from gpuaccept.watch.metrics import WatchState, serve
    from gpuaccept.watch.poll import Poller

    check_kernel_log_setting()
    check_sysfs_root_setting()  # the ports' counters are read at every poll
    check_nvml_init_timeout_setting()
    checked_guard(request.act, request.guarding)
    rules = _rules(request.rules)
    # a history that cannot be opened is refused now; one that fills up later is survived
    location = history_target(request.history, request.no_history, out)
    if request.act != "report":
        check_state_path(request.guarding.state or default_state())
    node = _node(request.node)
    state = WatchState()
    debounce = 1 if request.once else request.debounce_polls
    poller = Poller(rules, window=debounce, events=request.nvml_events and not request.once)
    loop = _Loop(request, out, state, Debouncer(debounce), node, rules, location)
    server, port = None, None
    if request.metrics_port is not None and not request.once:
        try:
            server, port = serve(state, node, request.metrics_address, request.metrics_port)
        except OSError as error:
            where = f"{request.metrics_address}:{request.metrics_port}"
            raise InputError(
                f"--metrics-port: cannot listen on {where}: {error.strerror}"
            ) from None
        out.line(f"[WATCH] metrics on http://{request.metrics_address}:{port}/metrics")
    how = (
        "one poll, judged at once"
        if request.once
        else f"polling every {request.interval:g} s, a state raised after {debounce} poll(s)"
    )
    out.line(f"[WATCH] {node}: {how}, action layer: {request.act}, history: {location or 'none'}")
    stop = threading.Event()
    try:
        with _stopped_by_signals(stop) as fired:
            while True:
                began = time.monotonic()
                try:
                    poll = poller.poll()
                except Exception as error:  # a fault of the watch's own: said, counted, survived
                    with state.lock:
                        state.poll_errors += 1
                    out.error(f"watch: the poll failed: {_first_line(error)}")
                else:
                    loop.once(poll)
                if request.once or (request.polls and state.polls >= request.polls):
                    break
                if stop.wait(max(0.0, request.interval - (time.monotonic() - began))):
                    break
    finally:
        poller.close()
        loop.flush()
        if server is not None:
            server.shutdown()
            server.server_close()
    stopped_by = signal.Signals(fired[0]).name if fired else None
    if stopped_by:
        out.line(f"[WATCH] stopped by {stopped_by} after {state.polls} poll(s)")
    if state.history_pending:
        out.error(f"watch: {state.history_pending} record(s) could not be written to the history")
    failing = bool(request.once and any(r.finding.fails for r in state.raised))
    code = 1 if failing else 0
    if request.once and not failing and state.last is not None and not state.last.nvml_up:
        # one poll that read no GPU judged none: a node whose driver cannot load must not read
        # as a healthy one to whatever runs --once (a health check, a cron job)
        out.line("[WATCH] NOT JUDGED: NVML was not read, so no GPU was judged (exit 3)")
        code = EnvironmentProblem.exit_code
    return WatchResult(code, state.polls, state.raised, state.history_writes, port, stopped_by)


@contextmanager
def _stopped_by_signals(stop: threading.Event) -> Iterator[list[int]]:
    """SIGTERM and SIGINT end the wait between polls (a poll under way finishes first)."""
    fired: list[int] = []
    if threading.current_thread() is not threading.main_thread():
        yield fired
        return

    def handler(signum: int, frame: Any) -> None:
        if not fired:
            fired.append(signum)
        stop.set()

    previous = {s: signal.signal(s, handler) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield fired
    finally:
        for signum, old in previous.items():
            signal.signal(signum, old)


def _rules(path: Path | None) -> ActionRules:
    from gpuaccept.actions import builtin_rules, load_rules

    return builtin_rules() if path is None else load_rules(path)


def _node(given: str | None) -> str:
    from gpuaccept.record.identity import resolve_node_name

    if given is not None:
        if not given.strip() or not given.isprintable() or len(given) > 200:
            raise InputError("--node: give the node's name (printable, 200 characters at most)")
        return given.strip()
    name = resolve_node_name(os.environ, socket.gethostname())["name"]
    if not name:
        raise InputError("watch: this host has no name: give --node")
    return name


class _Loop:
    """One poll's consequences: the state a scrape reads, the lines said, the history's records
    and the action layer."""

    def __init__(
        self,
        request: WatchRequest,
        out: Output,
        state: WatchState,
        debouncer: Debouncer,
        node: str,
        rules: ActionRules,
        location: HistoryLocation | None,
    ) -> None:
        self.request, self.out, self.state, self.debouncer = request, out, state, debouncer
        self.node, self.rules, self.location = node, rules, location
        self.pending: list[RunReport] = []
        self.nvml_said: bool | None = None
        self.ports_said: bool | None = None
        self.history_failing = False

    def once(self, poll: Poll) -> None:
        change = self.debouncer.update(poll)
        raised = tuple(self.debouncer.raised.values())
        with self.state.lock:
            self.state.polls += 1
            self.state.nvml_errors += 0 if poll.nvml_up else 1
            self.state.last = poll
            self.state.raised = raised
            for r in change.raised:
                if not r.finding.lasting:
                    severity = "fail" if r.finding.fails else "warn"
                    self.state.events[(r.finding.check, severity)] += 1
        self._say(poll, change)
        if change.any or self.state.polls == 1:
            self._queue(poll, raised)
        self._write()
        if change.new_failure:
            self._act(raised)

    def _say(self, poll: Poll, change: Change) -> None:
        if self.nvml_said is not poll.nvml_up:
            if poll.nvml_up:
                self.out.line(f"[WATCH] NVML read: {len(poll.gpus)} GPU(s)")
            else:
                again = "" if self.request.once else "; tried again at each poll"
                self.out.error(f"watch: NVML not read ({poll.nvml_problem}){again}")
            self.nvml_said = poll.nvml_up
        if self.ports_said is not poll.ports_readable:
            if poll.ports_readable:
                if self.ports_said is not None:
                    self.out.line("[WATCH] the InfiniBand/RoCE ports' counters are read again")
            else:
                said = next((n for n in poll.notes if "InfiniBand" in n), "not read")
                self.out.error(f"watch: {said}; their growth is not judged until they are read")
            self.ports_said = poll.ports_readable
        for r in change.raised:
            word = "FAIL" if r.finding.fails else "WARN"
            # a state's own text judges one poll ("power brake ... in 1 of 1 samples"): the
            # streak that raised it is the watch's, said here
            held = f" (held {r.polls} polls in a row)" if r.finding.lasting and r.polls > 1 else ""
            self.out.line(f"[WATCH] {word} ({r.finding.check}): {r.finding.text}{held}")
        for r in change.cleared:
            self.out.line(f"[WATCH] cleared ({r.finding.check}): {r.finding.text}")

    def _queue(self, poll: Poll, raised: tuple[Raised, ...]) -> None:
        if self.location is None:
            return
        self.pending.append(_record(poll, raised, self.node, self.request, self.rules))
        if len(self.pending) > MAX_PENDING:
            del self.pending[0]
            with self.state.lock:
                self.state.history_dropped += 1
        with self.state.lock:
            self.state.history_pending = len(self.pending)

    def _write(self) -> None:
        if not self.pending or self.location is None:
            return
        from gpuaccept.store.history import History

        try:
            with History.open(self.location) as history:
                history.append([(report, "watch") for report in self.pending])
        except Exception as error:  # a full disk, a database away: kept for the next poll
            with self.state.lock:
                self.state.history_errors += 1
            if not self.history_failing:
                self.out.error(
                    f"watch: the history {self.location} did not take the record "
                    f"({_first_line(error)}); kept, tried again at each poll"
                )
            self.history_failing = True
            return
        if self.history_failing:
            self.out.line(f"[WATCH] the history takes records again ({len(self.pending)} written)")
        self.history_failing = False
        with self.state.lock:
            self.state.history_writes += len(self.pending)
            self.state.history_pending = 0
        self.pending = []

    def flush(self) -> None:
        self._write()

    def _act(self, raised: tuple[Raised, ...]) -> None:
        from gpuaccept.actions import plan_actions

        failing = [r for r in raised if r.finding.fails]
        checks = sorted({r.finding.check for r in failing})
        action = plan_actions(_checks(raised, frozenset()), self.rules).action.value
        with self.state.lock:
            self.state.action_calls += 1
        if self.request.act == "report":
            self.out.line(
                f"[ACT] report: {self.node}: fail ({', '.join(checks)}), recommended action "
                f"{action} (nothing acted on)"
            )
            return
        try:
            decision, changed = _hand_over(self.request, self.node, checks, action, failing)
        except Exception as error:  # Slurm's commands missing or not answering: said, survived
            with self.state.lock:
                self.state.action_errors += 1
            self.out.error(f"watch: the action layer could not decide: {_first_line(error)}")
            return
        if changed:
            self.out.line(f"[ACT] {self.node}: NOT acted on: it changed ({changed})")
        elif self.request.act == "shadow":
            would = {"drain": "would drain", "resume": "would resume"}.get(decision.action)
            said = f"{would}: {decision.why}" if would else decision.why
            self.out.line(f"[ACT] shadow: {self.node}: {said} (nothing changed: --act shadow)")
        else:
            self.out.line(f"[ACT] {self.node}: {decision.why}")


def _hand_over(
    request: WatchRequest, node: str, checks: list[str], action: str, failing: list[Raised]
) -> tuple[Any, str]:
    """The failure through the guards of `act slurm` (the breaker, only its own, the records)."""
    from gpuaccept.act.ledger import default_state
    from gpuaccept.act.rounds import NodeRun
    from gpuaccept.act.slurm import act_on_node
    from gpuaccept.commands.act import checked_guard

    guard = checked_guard(request.act, request.guarding)
    # the debounce already held: the polls that found it, less this one, are its repeats
    repeats = max(r.polls for r in failing) - 1
    run = NodeRun(node, "fail", ACT_LEVEL, tuple(checks), None, action, repeats)
    state = request.guarding.state or default_state()
    return act_on_node(run, guard, state, request.act, request.partition)


def _checks(raised: tuple[Raised, ...], unjudged: frozenset[str]) -> list[Any]:
    """One result per watched check, holding its raised findings (their causes kept, which the
    action plan reads)."""
    from gpuaccept.checks.judging import Findings
    from gpuaccept.results import CheckResult, Status
    from gpuaccept.watch.poll import FABRIC, KERNEL, NVML, PORTS, WATCHED_CHECKS

    unread = {"health": {NVML}, "events": {NVML, KERNEL}, "fabric": {KERNEL, PORTS}}
    results = []
    for check in WATCHED_CHECKS:
        found = Findings(check, "FABRIC" if check == FABRIC else "HEALTH")
        for r in raised:
            if r.finding.check == check:
                (found.failures if r.finding.fails else found.warnings).append(r.finding.text)
        if not found.failures and not found.warnings and unread[check] <= unjudged:
            results.append(
                CheckResult(
                    name=check,
                    area=found.area,
                    status=Status.SKIP,
                    message="not read in this poll",
                )
            )
            continue
        results.append(found.conclude("nothing raised"))
    return results


def _record(
    poll: Poll, raised: tuple[Raised, ...], node: str, request: WatchRequest, rules: ActionRules
) -> RunReport:
    """The raised findings at this poll as a run of command `watch` (level `watch`)."""
    from gpuaccept.results import RunReport

    at = datetime.fromtimestamp(poll.at, UTC)
    environment = {
        "node": {"name": node, "source": "--node" if request.node else "watch"},
        "gpus": [{"index": g.index, "uuid": g.uuid, "name": g.name} for g in poll.gpus],
        "watch": {
            "interval_seconds": request.interval,
            "debounce_polls": request.debounce_polls,
            "nvml": poll.nvml_problem or "read",
            "kernel_log": poll.kernel_log_source,
            "ports": "read" if poll.ports_readable else "not read",
            "raised_since": {
                r.finding.key: datetime.fromtimestamp(r.since, UTC).isoformat() for r in raised
            },
        },
    }
    return RunReport.completed(
        command="watch",
        level="watch",
        device_mode="cuda",
        started=at,
        monotonic_start=time.monotonic() - poll.seconds,
        checks=_checks(raised, poll.unjudged),
        environment=environment,
        rules=rules,
    )


def _first_line(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    return f"{type(error).__name__}: {text[0] if text else ''}".rstrip(": ")
