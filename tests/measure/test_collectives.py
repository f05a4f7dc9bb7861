from __future__ import annotations

import signal
from typing import Any

import pytest
import torch

from gpuaccept.distributed.local_ranks import RanksFailed, RanksTimedOut, run_ranks
from gpuaccept.measure.collectives import (
    BUS_FACTORS,
    AllReduceFigure,
    AllReduceSpec,
    CollectiveFigure,
    all_reduce_rank,
    collective_figure_rank,
    expected_all_reduce_sum,
)
from tests import faults


@pytest.mark.parametrize(("world", "factor"), [(1, 0.0), (2, 1.0), (4, 1.5), (8, 1.75)])
def test_all_reduce_bus_factor_is_nccl_tests(world: int, factor: float) -> None:
    assert BUS_FACTORS["all_reduce"](world) == pytest.approx(factor)
    figure = AllReduceFigure(world, 10**9, 0, 0.5)
    assert figure.algbw_gbps == pytest.approx(2.0)
    assert figure.busbw_gbps == pytest.approx(2.0 * factor)


def test_expected_sum_is_exact_in_float32() -> None:
    world = 8
    expected = expected_all_reduce_sum(1000, world, torch.device("cpu"))
    by_hand = sum((torch.arange(1000) % 61 + rank + 1).double() for rank in range(world))
    assert torch.equal(expected.double(), by_hand)


def test_all_reduce_on_two_gloo_ranks_is_exact() -> None:
    figures = run_ranks(all_reduce_rank, 2, AllReduceSpec(64 * 1024, 3, 1, 3), 60, "gloo")
    assert [f.wrong_elements for f in figures] == [0, 0]
    assert figures[0].seconds == figures[1].seconds  # slowest rank's time, agreed by all
    assert figures[0].busbw_gbps == pytest.approx(figures[0].algbw_gbps)


def test_hung_rank_times_out_and_is_killed() -> None:
    with pytest.raises(RanksTimedOut, match=r"rank\(s\) 0, 1 of 2 did not finish within 5 s"):
        run_ranks(faults.hang_on_rank1, 2, None, 5, "gloo")


def test_raising_rank_is_reported_with_its_message() -> None:
    with pytest.raises(
        RanksFailed, match="rank 1 of 2 failed: RuntimeError: injected rank failure"
    ):
        run_ranks(faults.raise_on_rank1, 2, None, 60, "gloo")


def test_the_rank_that_failed_on_its_own_is_named_before_one_that_lost_its_peer() -> None:
    """A rank's own error is the cause to chase; a peer's "connection closed" that arrived
    first is its echo (CI's flake: rank 0's closed connection was named, not rank 1's raise)."""
    with pytest.raises(RanksFailed) as raised:
        run_ranks(faults.peer_loss_before_the_cause, 2, None, 60, "gloo")
    assert str(raised.value).startswith(
        "rank 1 of 2 failed: RuntimeError: injected rank failure"
    ), raised.value
    assert str(raised.value).endswith("(then rank(s) 0 too)")


def test_dying_rank_is_reported() -> None:
    with pytest.raises(RanksFailed, match="rank 1 exit 7"):
        run_ranks(faults.die_on_rank1, 2, None, 60, "gloo")


@pytest.mark.parametrize("collective", ["all_gather", "all_to_all"])
@pytest.mark.parametrize(("world", "factor"), [(2, 0.5), (8, 0.875)])
def test_all_gather_and_all_to_all_bus_factor_is_nccl_tests(
    collective: str, world: int, factor: float
) -> None:
    """busbw = algbw x (n-1)/n, the size the whole buffer (nccl-tests doc/PERFORMANCE.md:140-143,
    src/alltoall.cu:48-54 at a0b82b2)."""
    figure = CollectiveFigure(collective, world, 10**9, 0, 0.5)
    assert figure.algbw_gbps == pytest.approx(2.0)
    assert figure.busbw_gbps == pytest.approx(2.0 * factor)


def _other_rank(rank: int, world: int, collective: str) -> CollectiveFigure:
    return collective_figure_rank(collective, rank, world, 3 * 4096, AllReduceSpec(0, 2, 1, 2))


@pytest.mark.parametrize("collective", ["all_gather", "all_to_all"])
def test_all_gather_and_all_to_all_on_three_gloo_ranks_are_exact(collective: str) -> None:
    """Three ranks (an odd world catches a chunk placed at the wrong index)."""
    figures = run_ranks(_other_rank, 3, collective, 120, "gloo")
    assert [f.wrong_elements for f in figures] == [0, 0, 0]
    assert figures[0].nbytes == 3 * 4096
    assert len({f.seconds for f in figures}) == 1  # the slowest rank's, agreed by all


def _in_subgroup(rank: int, world: int, corrupt_all_to_all_on: int) -> Any:
    """Ranks 1 and 3 of 4 form a group (as an isolation round's group of nodes): every
    collective of accept's runs inside it, the others idle; rank `corrupt_all_to_all_on` (of
    the whole job) gets one wrong element out of every all-to-all it takes part in."""
    import torch.distributed as dist

    from gpuaccept.measure.collectives import accept_collectives_rank

    members = [1, 3]
    group = dist.new_group(members)
    if rank not in members:
        return None
    real = dist.all_to_all_single

    def corrupting(output: Any, source: Any, *args: Any, **kwargs: Any) -> Any:
        work = real(output, source, *args, **kwargs)
        if rank == corrupt_all_to_all_on and output.numel() >= 2:
            output.view(-1)[0] += 1.0
        return work

    dist.all_to_all_single = corrupting
    try:
        return accept_collectives_rank(
            members.index(rank), len(members), AllReduceSpec(4 * 4096, 2, 1, 2), group=group
        )
    finally:
        dist.all_to_all_single = real


def test_accepts_collectives_run_inside_a_group_of_the_job_and_count_its_own_errors() -> None:
    clean = run_ranks(_in_subgroup, 4, -1, 120, "gloo")
    assert (clean[0], clean[2]) == (None, None)
    for figure in (clean[1], clean[3]):
        assert figure.world_size == 2  # the group's, not the job's 4
        assert figure.wrong_elements == 0
        assert [(o.collective, o.world_size, o.wrong_elements) for o in figure.others] == [
            ("all_gather", 2, 0),
            ("all_to_all", 2, 0),
        ]
    corrupt = run_ranks(_in_subgroup, 4, 3, 120, "gloo")
    for figure in (corrupt[1], corrupt[3]):  # the group's total, known to both its ranks
        assert figure.wrong_elements == 0
        assert {o.collective: o.wrong_elements for o in figure.others} == {
            "all_gather": 0,
            "all_to_all": 2,  # two checked iterations, one element each
        }


def test_a_rank_killed_by_a_signal_is_named_with_it_and_sigkill_points_at_the_kernel_log() -> None:
    """`train llm` on a model too big for the host said "rank 1 exit -9": the kernel's
    out-of-memory killer, unnamed."""
    with pytest.raises(RanksFailed) as raised:
        run_ranks(faults.killed_on_rank1, 2, signal.SIGKILL, 60, "gloo")
    assert "rank 1 killed by SIGKILL: the out-of-memory killer's signal" in str(raised.value)
    assert "dmesg" in str(raised.value)
    with pytest.raises(RanksFailed) as raised:
        run_ranks(faults.killed_on_rank1, 2, signal.SIGSEGV, 60, "gloo")
    # the death is the cause, named first; rank 0 may have failed on the lost peer by then, and
    # is said after it (local_ranks._collect): which of the two arrives first is the OS's choice
    assert str(raised.value).startswith(
        "rank process died without a result (rank 1 killed by SIGSEGV)"
    )
