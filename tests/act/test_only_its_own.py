"""What gpuaccept does to a node must be safe (issue #49 §1-§4): only its own drains, a breaker
that stays tripped, a regression remembered, escalation as the field does it. Each test is one
of the issue's findings, replayed: the rounds through Slurm's `sinfo -O` lines and Kubernetes'
node lists, the commands through tests/fake_slurm."""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gpuaccept.act.kubernetes import parse_nodes
from gpuaccept.act.ledger import Ledger, load_ledger
from gpuaccept.act.policy import Guard, SchedNode
from gpuaccept.act.rounds import NodeRun, Round, decide_round
from gpuaccept.act.slurm import parse_sinfo
from gpuaccept.cli import app
from tests.act.test_act_record import _samples
from tests.act.test_fleet import _act, _report

T0 = datetime(2026, 11, 28, 1, 0, 0)
OURS = "gpuaccept quick: drain: compute [stack aaaaaaaa]"


def _line(name: str, state: str, reason: str = "none", since: str = "Unknown") -> str:
    return f"{name:<24}|{state:<40}|{since:<20}|{reason}"


# Slurm's node states as `sinfo -O StateComplete` prints them (base+FLAG..., lower case;
# SchedMD/slurm src/common/slurm_protocol_defs.c node_states[] and node_state_flags[])
@pytest.mark.parametrize(
    ("state", "reason", "held"),
    [
        ("idle", "none", ""),
        ("mixed", "none", ""),
        ("allocated+completing", "none", ""),
        ("idle+drain", OURS, ""),
        ("mixed+drain", OURS, ""),
        ("idle+drain", "admin: DIMM swap", "drained by someone else (admin: DIMM swap)"),
        ("idle+drain", "NHC: check_hw_ib failed", "drained by someone else (NHC: check_hw_ib f"),
        ("down", "admin: bad PSU", "Slurm shows it DOWN"),
        ("down+drain", OURS, "Slurm shows it DOWN+DRAIN"),
        ("down+not_responding", "Not responding", "Slurm shows it DOWN+NOT_RESPONDING"),
        ("idle+fail", "admin: failing fan", "Slurm shows it IDLE+FAIL"),
        ("allocated+fail", "admin", "Slurm shows it ALLOCATED+FAIL"),
        ("idle+maintenance", "none", "Slurm shows it IDLE+MAINTENANCE"),
        ("idle+reserved", "none", "Slurm shows it IDLE+RESERVED"),
        ("idle+reboot_requested", "reboot", "Slurm shows it IDLE+REBOOT_REQUESTED"),
        ("idle+reboot_issued", "reboot", "Slurm shows it IDLE+REBOOT_ISSUED"),
        ("idle+not_responding", "none", "Slurm shows it IDLE+NOT_RESPONDING"),
        ("idle*", "none", "Slurm shows it IDLE*"),
        ("idle+powered_down", "none", "Slurm shows it IDLE+POWERED_DOWN"),
        ("future", "none", "Slurm shows it FUTURE"),
        ("unknown", "none", "Slurm shows it UNKNOWN"),
        ("idle+some_flag_slurm_adds_later", "none", "Slurm shows it IDLE+SOME_FLAG_SLURM_"),
    ],
)
def test_slurm_states_are_read_as_slurm_defines_them(state: str, reason: str, held: str) -> None:
    (node,) = parse_sinfo(_line("n1", state, reason))
    assert node.held.startswith(held), node.held
    assert bool(node.held) == bool(held), node.held
    for verdict, level in (("fail", "quick"), ("pass", "full")):
        done = _one(verdict, level, [node])
        if held:
            # never drained, resumed or re-reasoned, and it says why; a failure it would have
            # drained is a refusal (recorded, exported); a pass would have changed nothing of
            # theirs: no refusal to alert on
            expected = ("refused", "not-ours") if verdict == "fail" else ("none", None)
            assert (done.action, done.guard) == expected
            assert node.held in done.why


def _one(verdict: str, level: str, nodes: list[SchedNode], now: datetime = T0) -> object:
    run = NodeRun(
        "n1", verdict, level, ("compute",) if verdict == "fail" else (), "aaaaaaaa", "drain"
    )  # type: ignore[arg-type]
    return decide_round([run], nodes, Ledger(), now, Guard()).decisions[0]


def _kube(taints: list[dict[str, str]], unschedulable: bool = False) -> SchedNode:
    document = {
        "kind": "NodeList",
        "items": [
            {
                "kind": "Node",
                "metadata": {"name": "n1"},
                "spec": {"taints": taints, "unschedulable": unschedulable},
            }
        ],
    }
    (node,) = parse_nodes(document, "test")
    return node.sched_node()


@pytest.mark.parametrize(
    ("taints", "unschedulable", "held"),
    [
        ([], False, False),
        # a GPU pool's placement taint is no hold: healthy GPU nodes carry it for good
        ([{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}], False, False),
        ([{"key": "dedicated", "value": "ml", "effect": "PreferNoSchedule"}], False, False),
        ([], True, True),  # cordoned: kubectl drain, NVSentinel's quarantine
        ([{"key": "node.kubernetes.io/unreachable", "effect": "NoExecute"}], False, True),
        ([{"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"}], False, True),
        ([{"key": "node.kubernetes.io/out-of-service", "effect": "NoExecute"}], False, True),
        (
            [{"key": "node.cloudprovider.kubernetes.io/shutdown", "effect": "NoSchedule"}],
            False,
            True,
        ),
        ([{"key": "ToBeDeletedByClusterAutoscaler", "effect": "NoSchedule"}], False, True),
        ([{"key": "example.com/remediation", "effect": "NoExecute"}], False, True),
        # NVSentinel's quarantine may taint without a cordon (operator review; its own e2e test
        # tests/fault_quarantine_special_modes_test.go expects this taint after an XID 79)
        ([{"key": "AggregatedNodeHealth", "value": "False", "effect": "NoSchedule"}], False, True),
        (
            [{"key": "AggregatedNodeHealth", "value": "False", "effect": "PreferNoSchedule"}],
            False,
            True,
        ),
    ],
)
def test_kubernetes_holds_are_another_controllers_and_placement_taints_are_not(
    taints: list[dict[str, str]], unschedulable: bool, held: bool
) -> None:
    node = _kube(taints, unschedulable)
    done = _one("fail", "quick", [node])
    if held:
        assert (done.action, done.guard) == ("refused", "not-ours")
    else:
        assert done.action == "drain"


def _fleet_round(
    nodes: dict[str, tuple[str, str, str]],
    runs: list[NodeRun],
    ledger: Ledger,
    now: datetime,
    guard: Guard,
) -> Round:
    """One round against `nodes` (name -> Slurm state, reason, since), carried out on them as
    scontrol would."""
    lines = "\n".join(_line(name, *spec) for name, spec in nodes.items())
    done = decide_round(runs, parse_sinfo(lines), ledger, now, guard)
    for decision in done.decisions:
        if decision.action == "drain":
            nodes[decision.node] = (
                "idle+drain",
                decision.reason,
                now.isoformat(timespec="seconds"),
            )
        elif decision.action == "resume":
            nodes[decision.node] = ("idle", "none", "Unknown")
    return done


def _failing(name: str, checks: tuple[str, ...] = ("compute",), stack: str = "aaaaaaaa") -> NodeRun:
    return NodeRun(name, "fail", "quick", checks, stack, "drain")


def test_a_tripped_breaker_holds_over_hourly_rounds_until_a_person_resets_it() -> None:
    """40% of a 50-node pool failing every hourly round, each on its own stack (no regression):
    the breaker drained 1, 2, 3, 4 over four rounds when it re-armed after its window; now 1."""
    nodes = {f"n{i:02d}": ("idle", "none", "Unknown") for i in range(50)}
    ledger = Ledger()
    for hour in range(4):
        runs = [_failing(f"n{i:02d}", stack=f"{i:08x}") for i in range(20)]
        done = _fleet_round(nodes, runs, ledger, T0 + timedelta(hours=hour), Guard())
        ledger = done.ledger
    drained = [name for name, (state, _, _) in nodes.items() if "drain" in state]
    assert drained == ["n00"]
    assert ledger.tripped is not None
    assert "n01" in ledger.tripped.why
    # a person resets it: the next failing node is drained, and the breaker counts again
    ledger = ledger.reset(T0 + timedelta(hours=5), "alice", "PSU firmware rolled back")
    done = _fleet_round(
        nodes, [_failing("n30", stack="0000ffff")], ledger, T0 + timedelta(hours=5), Guard()
    )
    assert done.decisions[0].action == "drain"
    assert [(e.event, e.by, e.why) for e in done.ledger.events[-1:]] == [
        ("reset", "alice", "PSU firmware rolled back")
    ]


def test_a_tripped_breaker_never_holds_back_a_node_gpuaccept_drained_that_passes() -> None:
    nodes = {"n00": ("idle+drain", OURS, "2026-11-28T00:00:00"), "n01": ("idle", "none", "Unknown")}
    tripped = Ledger().trip(T0, "test")
    passing = NodeRun("n00", "pass", "standard", (), "aaaaaaaa", "none")
    done = _fleet_round(nodes, [passing, _failing("n01", stack="bbbbbbbb")], tripped, T0, Guard())
    assert [d.action for d in done.decisions] == ["resume", "refused"]
    assert "holds until a person resets it" in done.decisions[1].why
    assert done.ledger.tripped == tripped.tripped


def test_a_drain_an_administrator_lifted_still_counts_in_the_breakers_window() -> None:
    nodes = {f"n{i}": ("idle", "none", "Unknown") for i in range(10)}
    first = _fleet_round(nodes, [_failing("n0", stack="00000000")], Ledger(), T0, Guard())
    assert first.decisions[0].action == "drain"
    nodes["n0"] = ("idle", "none", "Unknown")  # scontrol RESUME by the administrator
    later = T0 + timedelta(minutes=10)
    second = _fleet_round(nodes, [_failing("n1", stack="11111111")], first.ledger, later, Guard())
    assert (second.decisions[0].action, second.decisions[0].guard) == ("refused", "breaker")


def test_a_stack_regression_is_remembered_past_its_window() -> None:
    """A library update fails compute on every node of one stack, round after round: drained
    2, 4, 6, 8 over four hourly rounds when the regression was forgotten after its window; now
    the two before the rule could tell, and the stack is held."""
    nodes = {f"n{i:02d}": ("idle", "none", "Unknown") for i in range(50)}
    ledger, wide = Ledger(), Guard(share=0.5)
    rounds = [["n00"], ["n01"], ["n02", "n03"], ["n04", "n05"], ["n06", "n07"], ["n08", "n09"]]
    for hour, names in enumerate(rounds):
        runs = [_failing(name) for name in names]
        ledger = _fleet_round(nodes, runs, ledger, T0 + timedelta(hours=hour), wide).ledger
    drained = [name for name, (state, _, _) in nodes.items() if "drain" in state]
    # n00 and n01 before the rule could tell (it needs two others alike); n02 on is held, also
    # hours after the last drain left the window
    assert drained == ["n00", "n01"]
    assert list(ledger.held_regressions()) == ["aaaaaaaa"]
    # another stack is not held; a person clearing it lets the next failure drain
    other = _fleet_round(
        nodes, [_failing("n40", stack="bbbbbbbb")], ledger, T0 + timedelta(hours=5), wide
    )
    assert other.decisions[0].action == "drain"
    cleared = ledger.clear_regression(
        T0 + timedelta(hours=6), "aaaaaaaa", "bob", "torch pinned back"
    )
    again = _fleet_round(nodes, [_failing("n41")], cleared, T0 + timedelta(hours=6), wide)
    assert again.decisions[0].action == "drain"


def test_nodes_failing_overlapping_but_unequal_checks_on_one_stack_count_together() -> None:
    """The issue's second regression finding: failures of {compute, memory}, {compute, events}
    and {compute} on one stack are one regression (they share compute); with equal sets only,
    each looked like its own node's fault."""
    nodes = {f"n{i}": ("idle", "none", "Unknown") for i in range(20)}
    runs = [
        _failing("n0", ("compute", "memory")),
        _failing("n1", ("compute", "events")),
        _failing("n2", ("compute",)),
    ]
    done = _fleet_round(nodes, runs, Ledger(), T0, Guard(share=0.5))
    assert [d.guard for d in done.decisions] == ["regression"] * 3
    # failures that share no check on one stack are not alike: each node's own
    apart = [_failing("n5", ("memory",)), _failing("n6", ("events",)), _failing("n7", ("p2p",))]
    done = _fleet_round(nodes, apart, Ledger(), T0, Guard(share=0.5))
    assert [d.action for d in done.decisions] == ["drain"] * 3


def test_act_breaker_reset_and_status_record_who_and_why(tmp_path: Path) -> None:
    state = tmp_path / "act-state.json"
    runner = CliRunner()
    nothing = runner.invoke(
        app, ["act", "breaker", "reset", "--by", "a", "--why", "b", "--state", str(state)]
    )
    assert nothing.exit_code == 2
    assert "the circuit breaker is not tripped: nothing to reset" in nothing.stderr
    state.write_text(Ledger().trip(T0, "a drain of n1 was refused").model_dump_json())
    status = runner.invoke(app, ["act", "breaker", "status", "--state", str(state)])
    assert status.exit_code == 0
    assert "breaker: TRIPPED at 2026-11-28T01:00:00" in status.stdout
    blank = runner.invoke(
        app, ["act", "breaker", "reset", "--by", " ", "--why", "x", "--state", str(state)]
    )
    assert blank.exit_code == 2
    done = runner.invoke(
        app,
        ["act", "breaker", "reset", "--by", "alice", "--why", "rolled back", "--state", str(state)],
    )
    assert done.exit_code == 0, done.output
    ledger = load_ledger(state)
    assert ledger.tripped is None
    assert (ledger.events[-1].event, ledger.events[-1].by, ledger.events[-1].why) == (
        "reset",
        "alice",
        "rolled back",
    )
    wrong = runner.invoke(
        app, ["act", "regression", "clear", "zz", "--by", "a", "--why", "b", "--state", str(state)]
    )
    assert wrong.exit_code == 2
    absent = runner.invoke(
        app,
        [
            "act",
            "regression",
            "clear",
            "0123abcd",
            "--by",
            "a",
            "--why",
            "b",
            "--state",
            str(state),
        ],
    )
    assert absent.exit_code == 2
    assert "not held as a regression" in absent.stderr


def test_act_slurm_leaves_a_down_node_and_an_admins_drain_as_they_are(
    fleet: Path, tmp_path: Path
) -> None:
    """NHC's node-mark-offline: "Not changing state of down node"; node-mark-online refuses
    down*/fail* nodes and notes not its own (mej/nhc scripts/). The DOWN node failing is not
    drained over (its reason would have become gpuaccept's, and the next pass resumed it)."""
    state = json.loads(fleet.read_text())
    state["nodes"]["gpu03"] = {
        "state": "down",
        "reason": "admin: bad PSU",
        "since": "2026-11-28T00:00:00",
    }
    state["nodes"]["gpu04"] = {"state": "idle+drain", "reason": "admin: DIMM swap", "since": ""}
    fleet.write_text(json.dumps(state))
    for node in ("gpu03", "gpu04"):
        record, metrics = tmp_path / f"{node}.json", tmp_path / f"{node}.prom"
        failed = _act(
            _report(tmp_path, node, passed=False),
            node,
            "--record",
            str(record),
            "--prometheus",
            str(metrics),
        )
        assert failed.exit_code == 1, failed.output  # the node failed; no guard held a drain back
        assert "not gpuaccept's to change, left as it is" in failed.stdout
        # reported like every other guard: the record and the metric
        (decided,) = json.loads(record.read_text())["decisions"]
        assert (decided["decision"], decided["guard"]) == ("refused", "not-ours")
        assert _samples(metrics, "gpuaccept_act_refused")[(node, "not-ours")] == 1.0
        passed = _act(_report(tmp_path, node, passed=True, level="full"), node)
        assert passed.exit_code == 0
        assert "not gpuaccept's to change" in passed.stdout
    nodes = json.loads(fleet.read_text())["nodes"]
    assert nodes["gpu03"] == {
        "state": "down",
        "reason": "admin: bad PSU",
        "since": "2026-11-28T00:00:00",
    }
    assert nodes["gpu04"]["reason"] == "admin: DIMM swap"
    assert "log" not in json.loads(fleet.read_text())  # scontrol was never called


def test_act_slurm_while_tripped_exits_4_and_says_how_to_reset(fleet: Path, tmp_path: Path) -> None:
    assert _act(_report(tmp_path, "gpu00", passed=False), "gpu00").exit_code == 1
    assert _act(_report(tmp_path, "gpu01", passed=False, torch="2.1"), "gpu01").exit_code == 4
    # an hour and more later the window is empty, yet the breaker holds
    refused = _act(
        _report(tmp_path, "gpu02", passed=False, torch="2.2"),
        "gpu02",
        "--breaker-minutes",
        "0.0001",
    )
    assert refused.exit_code == 4
    assert "gpuaccept act breaker reset --by NAME --why TEXT" in refused.stderr
    drained = [
        n for n, s in json.loads(fleet.read_text())["nodes"].items() if "drain" in s["state"]
    ]
    assert drained == ["gpu00"]
    # gpuaccept's drained node passing at standard returns, tripped breaker or not
    back = _act(_report(tmp_path, "gpu00", passed=True, level="standard"), "gpu00")
    assert back.exit_code == 0
    assert "resumed" in back.stdout


def test_a_node_flapping_below_its_floor_is_inspected_never_sent_to_rma() -> None:
    """The issue's finding: a node failing below-floor figures three incidents in a week was sent
    to RMA (`replace`). gpud escalates a reboot to a hardware inspection, and never a figure:
    here the third incident is an inspection (drain), and a hard fault is what replaces."""
    from gpuaccept.act.repeats import node_past
    from tests.run_reports import soft_failure

    runs = [
        soft_failure("gpu01", 0),
        soft_failure("gpu01", 1, passed=True),
        soft_failure("gpu01", 50),
        soft_failure("gpu01", 51, passed=True),
    ]
    now = soft_failure("gpu01", 100)
    assert now.action_plan.action.value == "rerun"
    past = node_past(now, runs, 24, 3, 7)
    assert [(o.what, o.count, o.escalation) for o in past.offences] == [
        ("node gpu01", 3, "inspect")
    ]
    assert past.action("rerun") == "drain"
    assert "drain it for a person to inspect the hardware" in past.offences[0].said


def test_a_pass_returns_a_node_only_when_it_ran_the_checks_it_was_drained_for() -> None:
    """Operator review: a node drained for compute came back on a `--only train` pass at
    standard (the level alone was looked at)."""
    drained = (
        "idle+drain",
        "gpuaccept standard: drain: compute, memory [stack aaaaaaaa]",
        "Unknown",
    )
    without = NodeRun("n0", "pass", "standard", (), "aaaaaaaa", "none", ran=("train",))
    nodes = {"n0": drained}
    done = _fleet_round(nodes, [without], Ledger(), T0, Guard())
    assert done.decisions[0].action == "none"
    assert "without compute, memory, which it was drained for" in done.decisions[0].why
    part = NodeRun("n0", "pass", "standard", (), "aaaaaaaa", "none", ran=("compute", "train"))
    assert _fleet_round(nodes, [part], Ledger(), T0, Guard()).decisions[0].action == "none"
    whole = NodeRun("n0", "pass", "standard", (), "aaaaaaaa", "none", ran=("compute", "memory"))
    assert _fleet_round(nodes, [whole], Ledger(), T0, Guard()).decisions[0].action == "resume"


@pytest.mark.parametrize(
    ("reason", "ours"),
    [
        ("gpuaccept standard: drain: compute [stack aaaaaaaa]", True),
        ("gpuaccept quick: health", True),  # before actions existed
        ("gpuaccept quick: reboot-node: events, fabric-errors, health, inventory, sta", True),
        ("gpuaccept standard: HOLD for NVIDIA RMA case 4411, do not resume (alice)", False),
        ("gpuaccept standard: do not touch", False),
        ("gpuaccept: old style", False),
    ],
)
def test_a_drain_is_gpuaccepts_only_when_its_whole_reason_is_in_gpuaccepts_form(
    reason: str, ours: bool
) -> None:
    """Operator review: a person's note that starts like gpuaccept's ("gpuaccept standard: HOLD
    ... do not resume") was read as gpuaccept's drain and lifted by a pass."""
    (node,) = parse_sinfo(_line("n1", "idle+drain", reason))
    assert node.drained_by_gpuaccept is ours
    done = _one("pass", "full", [node])
    assert done.action == ("resume" if ours else "none")


def test_a_person_resetting_the_breaker_starts_its_count_afresh() -> None:
    """Operator review: after `act breaker reset`, the drains already in the window re-tripped it
    at the next failure; the person who reset it vouched for them."""
    nodes = {f"n{i}": ("idle", "none", "Unknown") for i in range(10)}
    first = _fleet_round(nodes, [_failing("n0", stack="00000000")], Ledger(), T0, Guard())
    refused = _fleet_round(nodes, [_failing("n1", stack="11111111")], first.ledger, T0, Guard())
    assert refused.ledger.tripped is not None
    later = T0 + timedelta(minutes=5)
    reset = refused.ledger.reset(later, "alice", "n0's PSU was the fault")
    after = _fleet_round(nodes, [_failing("n2", stack="22222222")], reset, later, Guard())
    assert after.decisions[0].action == "drain"
    # and the count holds again from there
    again = _fleet_round(nodes, [_failing("n3", stack="33333333")], after.ledger, later, Guard())
    assert (again.decisions[0].action, again.decisions[0].guard) == ("refused", "breaker")
