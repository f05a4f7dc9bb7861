"""What to do with a node after a run, decided from its verdict and the scheduler's state
(issue #31 §2, §3). Pure: `act.slurm` reads the state and carries the decision out.

- **Only its own** (issue #49 §1): a node is touched only while the scheduler shows it in service,
  or held by gpuaccept itself. A node that is DOWN, FAIL, in maintenance, reserved, rebooting, not
  responding, or drained, cordoned or tainted by anyone else is `held` (SchedNode.held says by
  what): it is never drained, resumed or re-reasoned, and the refusal is recorded under the guard
  `not-ours`. NHC (mej/nhc at 9c4a38c) leaves a DOWN node alone when marking offline
  (helpers/node-mark-offline:91 "Not changing state of down node"), onlines a down, drained,
  failed or maintenance node only when the note is its own (helpers/node-mark-online:68-76), and
  ignores states it does not know (:65). gpuaccept is stricter on one point, on purpose: DOWN set
  over its own drain holds the node (a RESUME would clear the DOWN too, which it did not set).
- A failing node is drained, with a reason gpuaccept owns (`gpuaccept <level>: <checks>`), unless
  it is drained already (one cause is acted on once) or the **circuit breaker** refuses:
  gpuaccept drained `limit` nodes of the partition within the last `minutes` already. A refusal
  **trips** the breaker, and a tripped breaker holds (no new drain anywhere) until a person
  resets it (`act breaker reset`, act.ledger); it never holds back the return to service of a
  node gpuaccept drained that passes (NVSentinel's breaker waits for a person too, and its users
  complain that it also blocks uncordoning recovered nodes: NVIDIA/NVSentinel PR #1852).
- A passing node that gpuaccept drained is resumed only after a pass at `resume_level` or above
  (default standard: the quick health check that drained it is not enough to return it). A drain
  with any other reason is not gpuaccept's to lift, whatever the run says.
- A run that judged nothing changes nothing.
- **Debounce**: a failure whose recommended action is soft (`rerun`: a figure below its floor, a
  check that could not complete) drains only when the node failed `debounce` runs in a row
  (default 2) within `debounce_hours` (24); a hard fault (reset-gpu, reboot-node, drain, replace)
  drains at once. One slow run is a rerun, not a repair ticket.
- **A regression is not a hardware fault**: a drain's reason carries the software stack's digest
  (`record.environment.stack_sha256`, 8 hex digits); when `regression_nodes` other nodes on the
  same stack failed **alike** within the window, this failure is the stack's, not this node's: it
  is not drained, and the refusal names the stack (exit 4, as the breaker's). Two failures are
  alike when they share a failed check (`alike`): a broken driver or library fails the checks
  that use it on every node, and each node may fail one more of its own (a slow link, a warm
  GPU) beside it; equal sets would let that one extra check hide the regression. The debounce
  counts a node's runs in a row the same way (act.repeats.consecutive_failures). A regression
  found is **held** in gpuaccept's records (act.ledger) until a person clears it: a failure on
  that stack alike to it is never drained, whatever the window; a new stack is not held.

The breaker's default, 2% of the partition in 60 minutes (at least one node): Meta's Llama 3
405B run on 16,384 H100s, 8 to a server (2,048 nodes), saw 419 unexpected interruptions in 54
days, one every 3 hours, most of them GPU and HBM3 faults (DatacenterDynamics on the Llama 3
paper's table: datacenterdynamics.com/en/news/meta-report-details-hundreds-of-gpu-and-hbm3-related-
interruptions-to-llama-3-training-run): 0.016% of the nodes in an hour. Drains of 2% of a
partition within one hour (one round of the health check at HealthCheckInterval=3600) are over a
hundred times that rate: a driver or library update, a facility event or gpuaccept itself, not
independent hardware faults. NVSentinel's 50% in 5 minutes (the issue's figure) stops a fault
that fails every node only after half the cluster is gone.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Literal

from gpuaccept.actions import Action as RecommendedAction
from gpuaccept.suite.selection import LEVELS

OWN_REASON = re.compile(r"^gpuaccept (quick|standard|full): ")
# a check's name as reports write it (the suite's and the multi-node ones')
_CHECK_NAME = re.compile(r"^[a-z0-9][a-z0-9_.-]*$")
# a failure's recommended action, as a drain's reason says it (never `none`: a failure is at
# least a rerun)
_ACTIONS_SAID = "|".join(
    re.escape(a.value) for a in RecommendedAction if a is not RecommendedAction.NONE
)
# `gpuaccept LEVEL: [ACTION: ]CHECKS [stack DIGEST]`: the action is absent from the drains of
# gpuaccept before actions existed, which stay gpuaccept's own (and are resumed as such)
_REASON = re.compile(
    r"^gpuaccept (?:quick|standard|full): "
    rf"(?:(?:{_ACTIONS_SAID}): )?"
    r"(?P<checks>.*?)(?: \[stack (?P<stack>[0-9a-f]{8})\])?$"
)
STACK_DIGITS = 8
REASON_LIMIT = 200

Action = Literal["drain", "resume", "none", "refused"]
# the guards that refuse: the circuit breaker, the regression rule, a node that is not
# gpuaccept's to change
GuardName = Literal["breaker", "regression", "not-ours"]
GUARDS: tuple[GuardName, ...] = ("breaker", "regression", "not-ours")
# A failure whose recommended action (gpuaccept.actions) leaves the node in service: a figure
# below its floor, a check that could not complete. It drains only when it repeats.
SOFT_ACTIONS = frozenset(a.value for a in RecommendedAction if not a.takes_out_of_service)
Verdict = Literal["pass", "fail", "not-judged"]


@dataclass(frozen=True)
class Guard:
    share: float = 0.02  # of the partition's nodes gpuaccept may drain within `minutes`
    minutes: float = 60.0
    resume_level: str = "standard"
    # other nodes on one stack failing the same checks within `minutes` that make a regression
    regression_nodes: int = 2
    # consecutive failing runs (this one included) before a soft failure drains (issue #31 §2)
    debounce: int = 2
    debounce_hours: float = 24.0

    def limit(self, nodes: int) -> int:
        """How many drains within the window the partition tolerates (at least one)."""
        return max(1, math.floor(self.share * nodes))


@dataclass(frozen=True)
class SchedNode:
    name: str
    drained: bool  # DRAIN set (draining or drained, whatever else its state says)
    reason: str  # "" when none
    reason_time: datetime | None  # when the reason was set (the scheduler's local time)
    # whether gpuaccept set the drain, where the scheduler says so apart from the reason (a
    # Kubernetes taint is gpuaccept's by its key); None: read from the reason (Slurm)
    ours: bool | None = None
    # why the node is not gpuaccept's to change ("" when it is in service or held by gpuaccept
    # alone): a state or flag set by someone else (DOWN, FAIL, MAINTENANCE, a reservation, a
    # reboot, not responding, another's drain, cordon or taint)
    held: str = ""

    @property
    def drained_by_gpuaccept(self) -> bool:
        if self.held:
            return False
        if self.ours is not None:
            return self.drained and self.ours
        return self.drained and is_own_reason(self.reason)

    @property
    def gpuaccepts_mark(self) -> bool:
        """Whether gpuaccept's drain is on the node, whatever else holds it (the breaker counts
        it: gpuaccept took the node out, even if someone else holds it now)."""
        if self.ours is not None:
            return self.drained and self.ours
        return self.drained and is_own_reason(self.reason)

    def cause(self) -> tuple[str, str | None] | None:
        """(failed checks, stack digest) of a drain gpuaccept set; None for any other."""
        found = _REASON.match(self.reason) if self.gpuaccepts_mark else None
        return (found.group("checks"), found.group("stack")) if found else None


def is_own_reason(reason: str) -> bool:
    """Whether a drain's reason is one gpuaccept writes, whole: `gpuaccept LEVEL: [ACTION: ]
    CHECKS[ [stack DIGEST]]`, CHECKS check names (the last may be cut). A person's note that
    starts the same way ("gpuaccept standard: HOLD for RMA case 4411, do not resume") is theirs."""
    found = _REASON.match(reason)  # its start is OWN_REASON's
    if found is None:
        return False
    names = found.group("checks").split(", ")
    return bool(names) and all(_CHECK_NAME.match(name) for name in names)


def alike(checks: str | tuple[str, ...] | list[str], others: str | tuple[str, ...]) -> bool:
    """Whether two failures share a failed check (a drain's reason lists them joined by ", ")."""
    mine = set(checks.split(", ") if isinstance(checks, str) else checks) - {""}
    theirs = set(others.split(", ") if isinstance(others, str) else others) - {""}
    return bool(mine & theirs)


@dataclass(frozen=True)
class Decision:
    action: Action
    node: str
    why: str  # for the operator, one line
    reason: str = ""  # the scheduler reason a drain sets
    regression: str | None = None  # the stack digest a refusal blames
    guard: GuardName | None = None  # the guard that refused (action "refused")
    trips: bool = False  # this refusal tripped the breaker
    regression_checks: tuple[str, ...] = ()  # the failed checks a new regression holds


def returns_to_service(level: str, resume_level: str) -> bool:
    """Whether a pass at `level` may return a node gpuaccept took out (a level it does not know
    returns nothing)."""
    return level in LEVELS and LEVELS.index(level) >= LEVELS.index(resume_level)


def drain_reason(
    level: str, failed_checks: list[str], stack: str | None = None, action: str | None = None
) -> str:
    """`gpuaccept LEVEL: ACTION: CHECKS [stack DIGEST]` (ACTION: what the report recommends,
    gpuaccept.actions), within what Slurm keeps (the checks are cut, never the stack tag the
    regression rule reads)."""
    tag = f" [stack {stack[:STACK_DIGITS]}]" if stack else ""
    said = f"{action}: " if action else ""
    head = f"gpuaccept {level}: {said}{', '.join(failed_checks)}"
    return head[: REASON_LIMIT - len(tag)] + tag


def _drained_for(node: SchedNode) -> list[str]:
    """The checks gpuaccept's drain names (a name cut at the reason's end is a prefix)."""
    cause = node.cause()
    return [c for c in cause[0].split(", ") if c] if cause else []


def _named(names: list[str]) -> str:
    """The first five names, and "..." when there are more."""
    return ", ".join(names[:5]) + (", ..." if len(names) > 5 else "")


def recent_drains(nodes: list[SchedNode], now: datetime, guard: Guard) -> list[SchedNode]:
    """The nodes gpuaccept drained within the guard's window (an undated one counts: a breaker
    that cannot tell errs on the side of draining less)."""
    since = now - timedelta(minutes=guard.minutes)
    return [
        n for n in nodes if n.gpuaccepts_mark and (n.reason_time is None or n.reason_time >= since)
    ]


@dataclass(frozen=True)
class Trip:
    """The breaker tripped: when and why (it holds until a person resets it)."""

    at: datetime
    why: str


def _breaker_holds(trip: Trip) -> str:
    return (
        f"the circuit breaker tripped at {trip.at.isoformat(timespec='seconds')} ({trip.why}) "
        "and holds until a person resets it (gpuaccept act breaker reset --by NAME --why TEXT)"
    )


def decide(
    verdict: Verdict,
    level: str,
    failed_checks: list[str],
    node: SchedNode,
    partition: list[SchedNode],
    now: datetime,
    guard: Guard | None = None,
    stack: str | None = None,
    action: str | None = None,
    repeats: int = 0,
    failing_now: tuple[str, ...] = (),
    tripped: Trip | None = None,
    held_regressions: Mapping[str, tuple[str, ...]] | None = None,
    counted: list[str] | None = None,
    ran: tuple[str, ...] | None = None,
) -> Decision:
    """The action on `node` for a run of `level` with `verdict`; `partition`: every node the
    breaker counts (the node itself included); `stack`: the run's stack digest; `action`: the
    report's recommended action, said in the drain's reason; `repeats`: the node's failing runs
    just before this one (the debounce of a soft failure); `failing_now`: the other nodes whose
    runs judged at the same time (one round) failed alike on the same stack, which the
    regression rule counts beside the recent drains: a round in which every node fails alike
    drains none; `tripped`: the breaker's trip, when it holds; `held_regressions`: the stacks
    gpuaccept holds as regressed (digest -> the checks that failed alike); `counted`: the drains
    the breaker counts (node names, one per drain within the window, from gpuaccept's records
    and the scheduler's), else the scheduler's recent drains alone; `ran`: the checks a passing
    run ran (None: not known), which must include those the node was drained for."""
    guard = guard or Guard()
    if verdict == "not-judged":
        return Decision("none", node.name, "the run judged nothing: nothing is changed")
    if node.held:
        # a failure gpuaccept would have drained is refused; a pass would have changed nothing
        # of theirs (only gpuaccept's own drain is ever lifted): no refusal to alert on
        if verdict == "pass":
            return Decision(
                "none", node.name, f"passed; {node.held}: not gpuaccept's to change, left as it is"
            )
        return Decision(
            "refused",
            node.name,
            f"failed; {node.held}: not gpuaccept's to change, left as it is",
            guard="not-ours",
        )
    if verdict == "fail":
        if node.drained:
            return Decision(
                "none", node.name, f"failed; drained already ({node.reason or 'no reason'})"
            )
        if action in SOFT_ACTIONS and repeats + 1 < guard.debounce:
            return Decision(
                "none",
                node.name,
                f"failed {', '.join(failed_checks)} (recommended: {action}, not a hard fault): "
                f"NOT drained until it fails {guard.debounce} runs in a row within "
                f"{guard.debounce_hours:g} h; this is {repeats + 1} of {guard.debounce}",
            )
        recent = recent_drains(partition, now, guard)
        reason = drain_reason(level, failed_checks, stack, action)
        if stack is not None:
            digest = stack[:STACK_DIGITS]
            held = (held_regressions or {}).get(digest)
            if held is not None and alike(failed_checks, held):
                return Decision(
                    "refused",
                    node.name,
                    f"failed {', '.join(failed_checks)}, NOT drained: the software stack "
                    f"{digest} is held as a regression of {', '.join(held)} until a person "
                    f"clears it (gpuaccept act regression clear {digest} --by NAME --why TEXT) "
                    "or the node runs another stack",
                    regression=digest,
                    guard="regression",
                )
            # this run's cause, read back as any drain's: the same cut checks, the same tag
            cause = SchedNode("", True, reason, None).cause()
            same = [
                n
                for n in recent
                if (c := n.cause()) is not None
                and cause is not None
                and c[1] == cause[1]
                and alike(c[0], cause[0])
            ]  # never this node: not drained
            others = list(dict.fromkeys([n.name for n in same] + list(failing_now)))
            if len(others) >= guard.regression_nodes:
                return Decision(
                    "refused",
                    node.name,
                    f"failed {', '.join(failed_checks)}, NOT drained: {len(others)} "
                    f"other node(s) on the same software stack ({digest}) failed "
                    f"alike in the last {guard.minutes:g} min ({_named(others)}): a "
                    "regression of the stack, not this node's hardware; compare the stack with "
                    "the last one that passed",
                    regression=digest,
                    guard="regression",
                    regression_checks=tuple(failed_checks),
                )
        if tripped is not None:
            return Decision(
                "refused",
                node.name,
                f"failed, NOT drained: {_breaker_holds(tripped)}",
                guard="breaker",
            )
        limit = guard.limit(len(partition))
        names = [n.name for n in recent] if counted is None else counted
        drained = _named(list(dict.fromkeys(names)))
        if len(names) >= limit:
            return Decision(
                "refused",
                node.name,
                f"failed, NOT drained: gpuaccept drained {len(names)} of {len(partition)} "
                f"node(s) in the last {guard.minutes:g} min ({drained}), the breaker's "
                f"limit is {limit} ({guard.share:.0%}): a fault on this many nodes at once is more "
                "likely the stack or the site than the hardware; the breaker is tripped and "
                "holds until a person resets it",
                guard="breaker",
                trips=True,
            )
        return Decision("drain", node.name, f"failed: drained ({reason})", reason)
    if not node.drained:
        return Decision("none", node.name, "passed; in service")
    if not node.drained_by_gpuaccept:
        return Decision(
            "none",
            node.name,
            f"passed; drained by someone else ({node.reason or 'no reason'}): not gpuaccept's "
            "drain to lift",
        )
    if not returns_to_service(level, guard.resume_level):
        return Decision(
            "none",
            node.name,
            f"passed {level}; a node gpuaccept drained returns after a passing "
            f"{guard.resume_level} run (or above)",
        )
    drained_for = _drained_for(node)
    missing = [c for c in drained_for if ran is not None and not any(r.startswith(c) for r in ran)]
    if missing:
        return Decision(
            "none",
            node.name,
            f"passed {level}, but without {', '.join(missing)}, which it was drained for: it "
            "returns after a passing run of those checks",
        )
    return Decision(
        "resume", node.name, f"passed {level}: resumed (gpuaccept had drained it: {node.reason})"
    )
