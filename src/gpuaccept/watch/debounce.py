"""Findings held over consecutive polls before they are raised, and cleared when a poll that
could judge them no longer finds them.

The rule is NVSentinel's for the hardware power brake (NVIDIA/NVSentinel PR #1668,
health-monitors/gpu-health-monitor/gpu_health_monitor/dcgm_watcher/dcgm.py,
`_evaluate_gpu_power_brake`: `gpuPowerBrakeMinConsecutivePolls`, default 3; "a clear resets the
streak, and a GPU with no usable sample is skipped and keeps its counter, so a gap in DCGM data
neither raises nor clears a finding"), which its PR #1715 extended to every health-watch incident
after NVLinks briefly down while they train at boot raised a fatal finding on 214 of 288 nodes
with no fault. Here it holds every state a poll reads; an event (an XID seen by NVML, counters
that grew between two polls) cannot be seen again on the next poll and is raised when seen; one
that happens again while it is held (the same counter grown again) is raised again, so that it
is said, counted and handed to the action layer as its first occurrence was.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from gpuaccept.watch.poll import NVML, Finding, Poll


@dataclass(frozen=True)
class Raised:
    finding: Finding
    since: float  # the poll that raised it
    polls: int  # consecutive polls that found it


@dataclass(frozen=True)
class Change:
    raised: tuple[Raised, ...] = ()
    cleared: tuple[Raised, ...] = ()

    @property
    def any(self) -> bool:
        return bool(self.raised or self.cleared)

    @property
    def new_failure(self) -> bool:
        return any(r.finding.fails for r in self.raised)


def not_judged(finding: Finding, unjudged: frozenset[str]) -> bool:
    """Whether a poll that did not find `finding` could not have: its scope, its key or all of
    NVML (for a GPU's scope) went unread."""
    scope = finding.scope
    return (
        finding.key in unjudged
        or scope in unjudged
        or (NVML in unjudged and (scope == NVML or scope.startswith("gpu:")))
    )


@dataclass
class Debouncer:
    polls: int
    streaks: dict[str, tuple[Finding, int]] = field(default_factory=dict)
    raised: dict[str, Raised] = field(default_factory=dict)

    def update(self, poll: Poll) -> Change:
        found = {finding.key: finding for finding in poll.findings}
        new: list[Raised] = []
        for key, finding in found.items():
            count = self.streaks.get(key, (finding, 0))[1] + 1
            self.streaks[key] = (finding, count)
            again = (
                key in self.raised
                and not finding.lasting
                and finding.seen != self.raised[key].finding.seen
            )
            if again:  # an event that happened again while held: news, as its first time was
                self.raised[key] = Raised(finding, poll.at, count)
                new.append(self.raised[key])
            elif key in self.raised:
                self.raised[key] = Raised(finding, self.raised[key].since, count)
            elif not finding.lasting or finding.held or count >= self.polls:
                self.raised[key] = Raised(finding, poll.at, count)
                new.append(self.raised[key])
        cleared: list[Raised] = []
        for key, (finding, _) in list(self.streaks.items()):
            if key in found or not_judged(finding, poll.unjudged):
                continue
            del self.streaks[key]
            if key in self.raised:
                cleared.append(self.raised.pop(key))
        return Change(tuple(new), tuple(cleared))

    @property
    def failing(self) -> list[Raised]:
        return [r for r in self.raised.values() if r.finding.fails]
