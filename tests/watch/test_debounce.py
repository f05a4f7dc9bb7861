"""The debounce's own rules, poll by poll (NVSentinel PR #1668's: a state raised after N polls in
a row, a gap in the readings neither raising nor clearing it)."""

from __future__ import annotations

from gpuaccept.watch.debounce import Debouncer, not_judged
from gpuaccept.watch.poll import NVML, Finding, Poll

BRAKE = Finding("brake:GPU-1", "health", True, "power brake held", "gpu:GPU-1")
ECC = Finding("ecc:GPU-2", "health", True, "volatile DBE", "gpu:GPU-2")
XID = Finding("xid:79", "events", True, "XID 79", "kernel", lasting=False)


def _poll(at: float, *findings: Finding, unjudged: frozenset[str] = frozenset()) -> Poll:
    return Poll(at, 0.1, True, None, (), findings, unjudged, True, "dmesg")


def test_a_finding_is_unjudged_by_its_key_its_scope_or_nvml_for_a_gpu() -> None:
    assert not_judged(BRAKE, frozenset({"brake:GPU-1"}))
    assert not_judged(BRAKE, frozenset({"gpu:GPU-1"}))
    assert not_judged(BRAKE, frozenset({NVML}))
    assert not not_judged(BRAKE, frozenset({"gpu:GPU-2"}))
    assert not not_judged(XID, frozenset({NVML}))  # NVML down does not hide the kernel log
    assert not_judged(Finding("nvml:init", "health", True, "x", NVML), frozenset({NVML}))


def test_a_raised_finding_keeps_the_poll_that_raised_it_and_counts_on() -> None:
    debouncer = Debouncer(2)
    assert not debouncer.update(_poll(1.0, BRAKE)).any
    raised = debouncer.update(_poll(2.0, BRAKE)).raised
    assert [(r.since, r.polls) for r in raised] == [(2.0, 2)]
    assert not debouncer.update(_poll(3.0, BRAKE)).any
    (still,) = debouncer.failing
    assert (still.since, still.polls) == (2.0, 3)


def test_a_gap_in_one_reading_does_not_stop_the_others_from_clearing() -> None:
    """A poll that could not read GPU-1 keeps GPU-1's brake; GPU-2's ECC, read and gone, clears."""
    debouncer = Debouncer(1)
    debouncer.update(_poll(1.0, BRAKE, ECC))
    change = debouncer.update(_poll(2.0, unjudged=frozenset({"gpu:GPU-1"})))
    assert [r.finding.key for r in change.cleared] == ["ecc:GPU-2"]
    assert [r.finding.key for r in debouncer.failing] == ["brake:GPU-1"]
