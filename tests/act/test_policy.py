"""The decision after a run (issue #31 §2, §3), rule by rule at its bounds: drain a failing node
once, never past the breaker, resume only what gpuaccept drained and only after its level."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest

from gpuaccept.act.policy import Guard, SchedNode, decide, drain_reason, recent_drains

NOW = datetime(2026, 11, 26, 12, 0, 0)


def node(name: str = "n1", reason: str = "", minutes_ago: float | None = 1.0) -> SchedNode:
    when = None if minutes_ago is None else NOW - timedelta(minutes=minutes_ago)
    return SchedNode(name, bool(reason), reason, when if reason else None)


def fleet(count: int, drained: int = 0, minutes_ago: float = 1.0) -> list[SchedNode]:
    return [
        node(f"n{i}", "gpuaccept quick: health" if i < drained else "", minutes_ago)
        for i in range(count)
    ]


def test_a_failing_node_is_drained_with_the_reason_gpuaccept_owns() -> None:
    this = node("n9")
    decision = decide("fail", "quick", ["health", "fabric"], this, [this, *fleet(99)], NOW)
    assert (decision.action, decision.reason) == ("drain", "gpuaccept quick: health, fabric")
    assert decision.why == "failed: drained (gpuaccept quick: health, fabric)"


def test_a_reason_is_cut_to_what_slurm_keeps() -> None:
    assert len(drain_reason("quick", ["x" * 300])) == 200


def test_a_node_drained_already_is_not_drained_again_by_anyone() -> None:
    admin = node("n1", "fan replaced, burn-in pending")
    decision = decide("fail", "quick", ["health"], admin, [admin], NOW)
    assert decision.action == "none"
    assert decision.why == "failed; drained already (fan replaced, burn-in pending)"


@pytest.mark.parametrize(
    ("nodes", "drained", "action"),
    [
        (50, 0, "drain"),  # limit max(1, floor(0.02 x 50)) = 1
        (50, 1, "refused"),
        (100, 1, "drain"),  # limit 2
        (100, 2, "refused"),
        (1000, 19, "drain"),  # limit 20: 2% of a thousand
        (1000, 20, "refused"),
        (1, 0, "drain"),  # the smallest cluster may drain its one node
    ],
)
def test_the_breaker_stops_at_its_share_of_the_partition(
    nodes: int, drained: int, action: str
) -> None:
    partition = fleet(nodes, drained)
    this = partition[-1]
    assert decide("fail", "quick", ["stack"], this, partition, NOW).action == action


def test_a_refusal_says_how_many_where_and_why() -> None:
    partition = fleet(50, 1)
    decision = decide("fail", "quick", ["stack"], partition[-1], partition, NOW)
    assert decision.why == (
        "failed, NOT drained: gpuaccept drained 1 of 50 node(s) in the last 60 min (n0), the "
        "breaker's limit is 1 (2%): a fault on this many nodes at once is more likely the stack "
        "or the site than the hardware; the breaker is tripped and holds until a person resets it"
    )
    many = fleet(50, 7)
    said = decide("fail", "quick", ["stack"], many[-1], many, NOW, Guard(share=0.1)).why
    assert "(n0, n1, n2, n3, n4, ...)" in said


def test_only_drains_within_the_window_and_gpuaccepts_own_count() -> None:
    guard = Guard(minutes=60.0)
    old = node("a", "gpuaccept quick: health", minutes_ago=60.001)
    edge = node("b", "gpuaccept standard: compute", minutes_ago=60.0)
    undated = node("c", "gpuaccept full: burnin", minutes_ago=None)
    admin = node("d", "rack 4 power work", minutes_ago=1.0)
    looks_like = node("e", "gpuaccept-ish: not ours", minutes_ago=1.0)
    counted = recent_drains([old, edge, undated, admin, looks_like], NOW, guard)
    assert [n.name for n in counted] == ["b", "c"]  # an undated drain counts: err on caution


def test_a_site_can_widen_or_narrow_the_breaker() -> None:
    partition = fleet(100, 4)
    this = partition[-1]
    assert decide("fail", "quick", ["x"], this, partition, NOW, Guard(share=0.05)).action == "drain"
    assert decide("fail", "quick", ["x"], this, partition, NOW, Guard(share=0.04)).action == (
        "refused"
    )
    stale = fleet(100, 4, minutes_ago=30.0)
    assert decide("fail", "quick", ["x"], stale[-1], stale, NOW, Guard(minutes=29.0)).action == (
        "drain"
    )


def test_a_node_gpuaccept_drained_returns_after_a_pass_at_the_resume_level() -> None:
    ours = node("n1", "gpuaccept quick: health")
    quick = decide("pass", "quick", [], ours, [ours], NOW)
    assert quick.action == "none"
    assert quick.why == (
        "passed quick; a node gpuaccept drained returns after a passing standard run (or above)"
    )
    for level in ("standard", "full"):
        back = decide("pass", level, [], ours, [ours], NOW)
        assert back.action == "resume"
        assert back.why == f"passed {level}: resumed (gpuaccept had drained it: {ours.reason})"
    strict = Guard(resume_level="full")
    assert decide("pass", "standard", [], ours, [ours], NOW, strict).action == "none"
    lenient = Guard(resume_level="quick")
    assert decide("pass", "quick", [], ours, [ours], NOW, lenient).action == "resume"


def test_a_drain_set_by_anyone_else_is_never_lifted() -> None:
    for reason in ("admin: fan", "gpuaccept: old style", "NHC: check_hw_ib failed", "gpuacceptx"):
        theirs = node("n1", reason)
        decision = decide("pass", "full", [], theirs, [theirs], NOW)
        assert (decision.action, decision.guard) == ("none", None), reason
        assert decision.why == (
            f"passed; drained by someone else ({reason}): not gpuaccept's drain to lift"
        )


def test_a_passing_node_in_service_and_a_run_that_judged_nothing_change_nothing() -> None:
    free = node("n1")
    assert decide("pass", "quick", [], free, [free], NOW).why == "passed; in service"
    ours = node("n2", "gpuaccept quick: health")
    for this in (free, ours):
        decision = decide("not-judged", "full", [], this, [this], NOW)
        assert (decision.action, decision.why) == (
            "none",
            "the run judged nothing: nothing is changed",
        )


def test_every_decision_names_its_node_and_a_drain_without_a_reason_is_said() -> None:
    bare = SchedNode("n7", True, "", None)  # DRAIN with no reason shown
    ours = node("n8", "gpuaccept quick: health")
    free = node("n9")
    cases = [
        decide("not-judged", "quick", [], free, [free], NOW),
        decide("fail", "quick", ["x"], free, [free], NOW),
        decide("fail", "quick", ["x"], bare, [bare], NOW),
        decide("fail", "quick", ["x"], free, [free, ours], NOW),  # refused: ours is recent
        decide("pass", "quick", [], free, [free], NOW),
        decide("pass", "quick", [], bare, [bare], NOW),
        decide("pass", "quick", [], ours, [ours], NOW),
        decide("pass", "standard", [], ours, [ours], NOW),
    ]
    assert [d.node for d in cases] == ["n9", "n9", "n7", "n9", "n9", "n7", "n8", "n8"]
    assert [d.action for d in cases] == [
        "none",
        "drain",
        "none",
        "refused",
        "none",
        "none",  # someone else's drain: a pass would change nothing of theirs
        "none",
        "resume",
    ]
    assert cases[2].why == "failed; drained already (no reason)"
    assert (
        cases[5].why == "passed; drained by someone else (no reason): not gpuaccept's drain to lift"
    )


@pytest.mark.parametrize(
    ("drained", "listed"), [(5, "n0, n1, n2, n3, n4"), (6, "n0, n1, n2, n3, n4, ...")]
)
def test_a_refusal_lists_five_drained_nodes_and_says_when_there_are_more(
    drained: int, listed: str
) -> None:
    partition = fleet(50, drained)
    said = decide("fail", "quick", ["x"], partition[-1], partition, NOW, Guard(share=0.1)).why
    assert f"({listed}), the breaker's limit is 5" in said


STACK = "0123abcd" + "9" * 56


def _drained(name: str, checks: str, stack: str | None, minutes_ago: float = 1.0) -> SchedNode:
    tag = f" [stack {stack[:8]}]" if stack else ""
    return node(name, f"gpuaccept quick: {checks}{tag}", minutes_ago)


def test_a_drain_reason_keeps_the_stack_tag_whatever_the_checks() -> None:
    assert drain_reason("quick", ["stack"], STACK) == "gpuaccept quick: stack [stack 0123abcd]"
    long = drain_reason("full", ["x" * 300], STACK)
    assert len(long) == 200
    assert long.endswith(" [stack 0123abcd]")
    assert drain_reason("quick", ["health"]) == "gpuaccept quick: health"
    assert _drained("a", "health, fabric", STACK).cause() == ("health, fabric", "0123abcd")
    assert _drained("a", "health", None).cause() == ("health", None)
    assert node("b", "admin: fan").cause() is None
    assert node("c").cause() is None
    # a reason without DRAIN (a node down with gpuaccept's old reason) is no drain of gpuaccept's
    assert SchedNode("d", False, "gpuaccept quick: health [stack 0123abcd]", None).cause() is None


def test_the_third_node_on_one_stack_failing_the_same_checks_is_a_regression() -> None:
    wide = Guard(share=0.5)
    this = node("n9")
    two = [_drained("a", "stack", STACK), _drained("b", "stack", STACK)]
    decision = decide("fail", "quick", ["stack"], this, [this, *two, *fleet(20)], NOW, wide, STACK)
    assert decision.action == "refused"
    assert decision.node == "n9"
    assert decision.why == (
        "failed stack, NOT drained: 2 other node(s) on the same software stack (0123abcd) failed "
        "alike in the last 60 min (a, b): a regression of the stack, not this node's "
        "hardware; compare the stack with the last one that passed"
    )
    # one other node is no regression yet
    one = decide("fail", "quick", ["stack"], this, [this, two[0], *fleet(20)], NOW, wide, STACK)
    assert one.action == "drain"
    # another stack, other checks, a drain out of the window, no stack known: not the same cause
    for others, stack in (
        (two, "ffff0000" + "0" * 56),
        ([_drained("a", "health", STACK), _drained("b", "health", STACK)], STACK),
        ([_drained("a", "stack", STACK, 61.0), _drained("b", "stack", STACK, 61.0)], STACK),
        (two, None),
    ):
        partition = [this, *others, *fleet(20)]
        assert decide("fail", "quick", ["stack"], this, partition, NOW, wide, stack).action == (
            "drain"
        ), (others, stack)
    strict = Guard(share=0.5, regression_nodes=1)
    assert (
        decide("fail", "quick", ["stack"], this, [this, two[0], *fleet(20)], NOW, strict, STACK)
    ).action == "refused"


def test_a_regression_of_several_checks_names_them_all() -> None:
    this = node("n9")
    both = [_drained(n, "stack, compute", STACK) for n in ("a", "b")]
    said = decide(
        "fail", "quick", ["stack", "compute"], this, [this, *both], NOW, Guard(share=0.9), STACK
    ).why
    assert said.startswith("failed stack, compute, NOT drained: 2 other node(s)")


def test_a_regression_lists_five_nodes_and_says_when_there_are_more() -> None:
    wide = Guard(share=0.9)
    this = node("n9")
    for count, listed in ((5, "s0, s1, s2, s3, s4"), (6, "s0, s1, s2, s3, s4, ...")):
        others = [_drained(f"s{i}", "stack", STACK) for i in range(count)]
        said = decide("fail", "quick", ["stack"], this, [this, *others], NOW, wide, STACK).why
        assert f"({listed}): a regression" in said


@pytest.mark.parametrize(
    ("action", "repeats", "debounce", "drained"),
    [
        ("rerun", 0, 2, False),  # one slow run is a rerun, not a repair ticket
        ("rerun", 1, 2, True),  # the second in a row drains
        ("rerun", 1, 3, False),
        ("rerun", 2, 3, True),
        ("rerun", 0, 1, True),  # --debounce 1: at once
        ("monitor", 0, 2, False),
        ("none", 0, 2, False),
        ("reset-gpu", 0, 2, True),  # hard faults drain at once
        ("reboot-node", 0, 5, True),
        ("drain", 0, 2, True),
        ("replace", 0, 2, True),
        (None, 0, 2, True),  # a report without a plan is judged as before: drained
    ],
)
def test_a_soft_failure_drains_only_when_it_repeats(
    action: str | None, repeats: int, debounce: int, drained: bool
) -> None:
    this = node("n9")
    decision = decide(
        "fail",
        "quick",
        ["compute"],
        this,
        [this, *fleet(99)],
        NOW,
        Guard(debounce=debounce),
        action=action,
        repeats=repeats,
    )
    assert (decision.action == "drain") is drained, decision.why
    if not drained:
        assert decision.why == (
            f"failed compute (recommended: {action}, not a hard fault): NOT drained until it "
            f"fails {debounce} runs in a row within 24 h; this is {repeats + 1} of {debounce}"
        )
    else:
        said = f"{action}: " if action else ""
        assert decision.reason == f"gpuaccept quick: {said}compute"


def test_a_drain_set_before_actions_existed_is_still_gpuaccepts() -> None:
    old = node("n1", "gpuaccept quick: health [stack 0123abcd]")
    new = node("n2", "gpuaccept quick: replace: health [stack 0123abcd]")
    assert old.cause() == new.cause() == ("health", "0123abcd")
    assert old.drained_by_gpuaccept
    assert new.drained_by_gpuaccept


def test_a_soft_failure_without_a_count_is_its_first_and_names_every_check() -> None:
    from gpuaccept.act.policy import Decision

    this = node("n9")
    decision = decide(
        "fail", "quick", ["compute", "memory"], this, [this], NOW, Guard(), action="rerun"
    )
    assert decision == Decision(
        "none",
        "n9",
        "failed compute, memory (recommended: rerun, not a hard fault): NOT drained until it "
        "fails 2 runs in a row within 24 h; this is 1 of 2",
    )


def test_nodes_failing_alike_in_the_same_round_count_for_the_regression() -> None:
    """`failing_now` (one node-verdict round): two other nodes failing the same checks on the
    same stack right now make a regression as two recent drains do, and so do one of each."""
    wide = Guard(share=0.5)
    this = node("n9")
    partition = [this, *fleet(20)]
    both = decide(
        "fail", "quick", ["stack"], this, partition, NOW, wide, STACK, failing_now=("x", "y")
    )
    assert both.action == "refused"
    assert both.regression == "0123abcd"
    assert "2 other node(s) on the same software stack (0123abcd) failed alike" in both.why
    assert "(x, y)" in both.why
    mixed = decide(
        "fail",
        "quick",
        ["stack"],
        this,
        [*partition, _drained("a", "stack", STACK)],
        NOW,
        wide,
        STACK,
        failing_now=("x",),
    )
    assert mixed.action == "refused"
    assert "(a, x)" in mixed.why
    alone = decide(
        "fail", "quick", ["stack"], this, partition, NOW, wide, STACK, failing_now=("x",)
    )
    assert alone.action == "drain"
    assert alone.regression is None
    # no stack known: no regression can be told, whatever fails alike
    blind = decide(
        "fail", "quick", ["stack"], this, partition, NOW, wide, None, failing_now=("x", "y")
    )
    assert blind.action == "drain"
    # the breaker's refusal names no stack
    tight = decide("fail", "quick", ["stack"], this, [this, _drained("b", "other", STACK)], NOW)
    assert tight.action == "refused"
    assert tight.regression is None
