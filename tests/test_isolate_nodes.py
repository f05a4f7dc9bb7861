"""`accept --isolate` (issue #33 §1) on torchrun stand-in nodes on this machine (gloo, one rank
each): a node made slow on purpose (its all-reduces of data sleep, tests/multinode_faults/slow)
is found in the rounds the planner promises, every node's report says the same, and with a
topology the halves split along switches. The floor: gloo on two shared cores gives about
0.06 GB/s busbw over 8 healthy ranks; a node sleeping 0.25 s per all-reduce pulls any group it
is in below 0.005 GB/s; --min-busbw 0.02 sits between with margins of 3 and 4."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuaccept.results import CheckResult, Status
from gpuaccept.suite.isolation import round_ceiling
from tests.test_multinode import check_of_every_node, run_nodes

# a long end-to-end run (processes across stand-in nodes, real services): CI runs it in a step
# of its own (pytest -m service); the everyday command leaves it out
pytestmark = pytest.mark.service

NAMES = [f"node-{c}" for c in "abcdefgh"]
SLOW = {"SLOW_ALL_REDUCE_SECONDS": "0.25"}


def _isolation(
    tmp_path: Path, slow: list[str], extra: list[str] | None = None
) -> list[CheckResult]:
    results = run_nodes(
        tmp_path,
        NAMES,
        1,
        ["--only", "collectives", "--isolate", "--min-busbw", "0.02", *(extra or [])],
        faults=dict.fromkeys(slow, "slow"),
        extra_env=dict.fromkeys(slow, SLOW),
    )
    return check_of_every_node(results, "isolation")


@pytest.mark.slow
def test_one_slow_node_of_eight_is_found_in_six_rounds(tmp_path: Path) -> None:
    checks = _isolation(tmp_path, ["node-c"])
    first = checks[0]
    assert all(c.details == first.details for c in checks)  # every node says the same
    assert first.status is Status.FAIL
    assert first.details["suspects"] == ["node-c"]
    # screen, whole, bisect 4|4, bisect 2|2, confirm, the seven others as one job: within
    # 2 k log2 N + k = 7, against pairwise's 7 rounds of every pair
    assert first.details["rounds"] == 6 <= round_ceiling(8, 1)
    evidence = first.details["evidence"]
    stages = [e["stage"] for e in evidence]
    assert stages.count("screen") == 8  # every node alone, in one round
    confirm = [e for e in evidence if e["stage"] == "confirm"]
    # node-c and node-d (the failing pair) each beside a node that passed: only node-c fails
    assert {e["nodes"][0]: e["passed"] for e in confirm} == {"node-c": False, "node-d": True}
    passed_before = {
        n for e in evidence[: stages.index("confirm")] if e["passed"] for n in e["nodes"]
    }
    assert all(e["nodes"][1] in passed_before - {"node-c", "node-d"} for e in confirm)
    last = evidence[-1]  # the rest, without the suspect, passes as one job
    assert (last["stage"], last["passed"]) == ("whole", True)
    assert sorted(last["nodes"]) == sorted(set(NAMES) - {"node-c"})
    assert "suspect node(s): node-c (6 rounds)" in first.message


@pytest.mark.slow
def test_two_slow_nodes_on_different_switches_are_both_found(tmp_path: Path) -> None:
    topology = tmp_path / "topology.conf"
    topology.write_text(
        "".join(f"{name} {'leaf1' if name < 'node-e' else 'leaf2'}\n" for name in NAMES)
    )
    checks = _isolation(tmp_path, ["node-b", "node-g"], ["--topology", str(topology)])
    first = checks[0]
    assert sorted(first.details["suspects"]) == ["node-b", "node-g"]
    assert first.details["rounds"] <= round_ceiling(8, 2)
    bisect = [e for e in first.details["evidence"] if e["stage"] == "bisect"]
    # the first split is along the switches: leaf1's four and leaf2's four
    assert sorted(e["nodes"] for e in bisect[:2]) == [NAMES[:4], NAMES[4:]]
    assert first.details["racks"] == []  # two of four under each switch: nodes, not a switch


@pytest.mark.slow
def test_a_healthy_job_passes_in_two_rounds(tmp_path: Path) -> None:
    checks = _isolation(tmp_path, [])
    assert all(c.status is Status.PASS for c in checks)
    assert checks[0].details["rounds"] == 2
    assert checks[0].details["suspects"] == []


@pytest.mark.slow
def test_a_node_whose_gpus_fail_only_without_nvlink_is_found_by_the_second_screen(
    tmp_path: Path,
) -> None:
    """Four stand-in nodes of two ranks each: node-c's all-reduces are wrong only in a process
    whose environment turns NVLink off (tests/multinode_faults/corrupt_without_nvlink). Every
    round this job's own ranks run passes; the screen's own ranks, started with NCCL's NVLink
    settings off, name node-c."""
    names = NAMES[:4]
    results = run_nodes(
        tmp_path,
        names,
        2,
        ["--only", "collectives", "--isolate", "--min-busbw", "0.005"],
        faults={"node-c": "corrupt_without_nvlink"},
    )
    checks = check_of_every_node(results, "isolation")
    first = checks[0]
    assert all(c.details == first.details for c in checks)
    assert first.status is Status.FAIL
    assert first.details["suspects"] == ["node-c"]
    assert first.details["without_nvlink"] == ["node-c"]
    evidence = first.details["evidence"]
    assert [e["stage"] for e in evidence] == ["screen"] * 4 + ["screen-nvlink-off"] * 4 + ["whole"]
    off = {e["nodes"][0]: e for e in evidence if e["stage"] == "screen-nvlink-off"}
    assert off["node-c"]["passed"] is False
    assert off["node-c"]["said"].endswith("wrong element(s)")
    assert off["node-c"]["nccl_env"] == {"NCCL_P2P_DISABLE": "1", "NCCL_NVLS_ENABLE": "0"}
    assert all(off[n]["passed"] for n in ("node-a", "node-b", "node-d"))
    # with NVLink on (this job's ranks) node-c passed alone and the whole job without it passes
    assert all(e["passed"] for e in evidence if e["stage"] != "screen-nvlink-off")
    assert first.message.startswith("suspect node(s): node-c (node-c alone only with NVLink off")


@pytest.mark.slow
def test_a_node_that_hangs_its_collectives_is_named_and_the_job_finishes(tmp_path: Path) -> None:
    """node-c's all-reduces of data never return once another node is in the group
    (tests/multinode_faults/hang): each round's group runs in children of the job's ranks, so
    the rounds node-c is in after its screen (the whole job, its half, its confirmation) fail at
    their deadline instead of holding the job until NCCL's watchdog (or gloo's timeout) ends
    it; the other groups go on, and node-c is named."""
    names = NAMES[:4]
    results = run_nodes(
        tmp_path,
        names,
        1,
        ["--only", "stack", "--isolate", "--min-busbw", "0.02"],
        faults={"node-c": "hang"},
        extra_env={"node-c": {"HANG_MIN_WORLD": "2"}},
    )
    checks = check_of_every_node(results, "isolation")
    first = checks[0]
    assert all(c.details == first.details for c in checks)
    assert first.status is Status.FAIL
    assert first.details["suspects"] == ["node-c"]
    assert first.details["rounds_in"] == "children"
    work = first.details["round_deadlines_seconds"]["work"]
    evidence = first.details["evidence"]
    assert all(e["passed"] for e in evidence if e["stage"] == "screen")  # fine alone
    failed = [e for e in evidence if not e["passed"]]
    assert [e["stage"] for e in failed][:2] == ["whole", "bisect"]
    assert all("node-c" in e["nodes"] for e in failed)
    assert any(f"did not finish its collectives within {work:g} s" in e["said"] for e in failed)
    # the healthy nodes passed every round without node-c
    assert all(e["passed"] for e in first.details["evidence"] if "node-c" not in e["nodes"])
    # every group met at its first node's store, not at the job's (torchrun's) own
    assert all(e["met_at"] == min(e["nodes"], key=names.index) for e in evidence)


@pytest.mark.slow
def test_a_node_whose_store_cannot_listen_fails_the_groups_it_leads_and_is_named(
    tmp_path: Path,
) -> None:
    """node-b's store for the rounds cannot open (tests/multinode_faults/no_round_store): the
    groups node-b leads fail with the reason (a node its peers cannot meet at is unfit for a
    collective's rendezvous, as NCCL's own bootstrap listens on every rank), node-b is named,
    and the rest meet at node-a's store."""
    names = NAMES[:4]
    results = run_nodes(
        tmp_path,
        names,
        1,
        ["--only", "stack", "--isolate", "--min-busbw", "0.02"],
        faults={"node-b": "no_round_store"},
    )
    checks = check_of_every_node(results, "isolation")
    first = checks[0]
    assert all(c.details == first.details for c in checks)
    assert first.status is Status.FAIL
    assert first.details["suspects"] == ["node-b"]
    assert first.details["rounds_in"] == "children"
    evidence = first.details["evidence"]
    led = [e for e in evidence if e["met_at"] == "node-b"]
    assert [e["stage"] for e in led] == ["screen"]
    assert not led[0]["passed"]
    assert all(
        "node-b's store for the rounds did not open: OSError: [Errno 98] stand-in" in e["said"]
        for e in led
    )
    # every group node-b does not lead passed: the rest met at node-a's store as one job
    assert all(e["passed"] for e in evidence if e["met_at"] != "node-b")
    whole = [e for e in evidence if e["stage"] == "whole"]
    assert [(e["nodes"], e["met_at"], e["passed"]) for e in whole] == [
        (["node-a", "node-c", "node-d"], "node-a", True)
    ]


@pytest.mark.slow
def test_where_a_node_cannot_start_the_children_every_rank_runs_the_rounds_itself(
    tmp_path: Path,
) -> None:
    """node-b cannot start the rounds' children (tests/multinode_faults/rounds_in_ranks stands
    in for a compute mode that refuses a second process): every rank agrees to run the rounds
    in the job's own process groups, says why, and the slow node-c is still found."""
    results = run_nodes(
        tmp_path,
        NAMES[:4],
        1,
        ["--only", "collectives", "--isolate", "--min-busbw", "0.02"],
        faults={"node-b": "rounds_in_ranks", "node-c": "slow"},
        extra_env={"node-c": SLOW},
    )
    checks = check_of_every_node(results, "isolation")
    first = checks[0]
    assert all(c.details == first.details for c in checks)
    assert first.details["rounds_in"] == "the job's ranks: this node's stand-in refusal"
    assert first.details["suspects"] == ["node-c"]


@pytest.mark.slow
def test_a_node_without_room_for_the_rounds_store_sends_the_rounds_to_the_jobs_ranks(
    tmp_path: Path,
) -> None:
    """node-b cannot raise its open-files limit far enough for a store every rank of the job
    may connect to (tests/multinode_faults/few_open_files): every rank agrees to run the rounds
    in the job's own process groups and says why, before any round, rather than failing the
    rounds node-b would lead for a limit of the host's."""
    results = run_nodes(
        tmp_path,
        NAMES[:3],
        1,
        ["--only", "stack", "--isolate", "--min-busbw", "0.02"],
        faults={"node-b": "few_open_files"},
    )
    checks = check_of_every_node(results, "isolation")
    first = checks[0]
    assert all(c.details == first.details for c in checks)
    assert first.status is Status.PASS, first.message
    assert first.details["rounds_in"] == (
        "the job's ranks: node-b's open-files limit (64) is below the 303 a store for 3 "
        "children needs"
    )
    assert all("met_at" not in e for e in first.details["evidence"])


def _an_address_beside_loopback() -> str:
    """This host's source address on a route off it (nothing is sent), or skip: the test needs
    one address that is not loopback."""
    import socket

    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
            probe.connect(("192.0.2.1", 9))  # TEST-NET-1: only the route is looked up
            address = str(probe.getsockname()[0])
    except OSError as error:
        pytest.skip(f"this host has no route off itself: {error}")
    if address.startswith("127."):
        pytest.skip("this host has no address but loopback")
    return address


@pytest.mark.slow
def test_a_node_whose_route_to_the_jobs_store_is_loopback_announces_what_its_peers_reach(
    tmp_path: Path,
) -> None:
    """The head node's own name often resolves to 127.0.1.1 there (Debian's /etc/hosts), so its
    route to the job's store stays on loopback and its store would be announced where no peer
    can reach it. node-a (the job's store on 127.0.0.1) announces instead the address it routes
    to its peers from, which node-b and node-c announce (GPUACCEPT_LOCAL_ADDR)."""
    address = _an_address_beside_loopback()
    results = run_nodes(
        tmp_path,
        NAMES[:3],
        1,
        ["--only", "stack", "--isolate", "--min-busbw", "0.02"],
        extra_env={name: {"GPUACCEPT_LOCAL_ADDR": address} for name in NAMES[1:3]},
    )
    checks = check_of_every_node(results, "isolation")
    first = checks[0]
    assert all(c.details == first.details for c in checks)
    assert first.status is Status.PASS, first.message
    stores = first.details["round_stores"]
    assert sorted(stores) == NAMES[:3]
    assert all(where.rsplit(":", 1)[0] == address for where in stores.values()), stores
    assert any(e["met_at"] == "node-a" and e["passed"] for e in first.details["evidence"])
