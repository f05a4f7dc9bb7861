"""collectives and ddp on 2 gloo ranks (the CPU twin of NCCL across GPUs), healthy and faulty."""

from __future__ import annotations

import pytest

from gpuaccept.checks import collectives, ddp
from gpuaccept.results import Status, Verdict
from tests import faults
from tests.checks.conftest import cpu_context


def test_collectives_exact_on_two_gloo_ranks() -> None:
    result = collectives.run(cpu_context())
    assert result.status is Status.PASS, result.message
    figures = {m.name: m for m in result.measurements}
    assert figures["allreduce_wrong_elements"].value == 0
    busbw, algbw = figures["allreduce_busbw_gbps"].value, figures["allreduce_algbw_gbps"].value
    assert busbw == pytest.approx(algbw * 2 * (2 - 1) / 2)
    assert figures["allreduce_busbw_gbps"].verdict is Verdict.UNCHECKED  # topology-specific
    assert result.details["backend"] == "gloo"
    # all-gather and all-to-all after it (issue #33 §1), busbw = algbw x (n-1)/n as nccl-tests
    for short in ("allgather", "alltoall"):
        assert figures[f"{short}_wrong_elements"].value == 0
        assert figures[f"{short}_busbw_gbps"].value == pytest.approx(
            figures[f"{short}_algbw_gbps"].value * (2 - 1) / 2
        )
        assert figures[f"{short}_busbw_gbps"].verdict is Verdict.UNCHECKED
    assert result.message.startswith("all_reduce, all_gather, all_to_all exact on 2 gloo rank(s)")


def test_min_busbw_fails_below_nine_tenths_of_the_floor() -> None:
    """The operator's floor is judged like NCCL_TESTS_MIN_BW: 10% below it still passes."""
    from dataclasses import replace

    from gpuaccept.checks.context import RanksOutcome
    from gpuaccept.measure.collectives import AllReduceFigure

    # 1 MiB in 1 ms on 2 ranks: algbw 1.048576 GB/s, busbw the same (factor 2(n-1)/n = 1)
    figure = AllReduceFigure(2, 2**20, 0, 1e-3)
    outcome = RanksOutcome(2, "gloo", [figure, figure])
    busbw = figure.busbw_gbps
    passed = collectives.conclude(replace(cpu_context(), min_busbw_gbps=busbw / 0.91), outcome)
    assert passed.status is Status.PASS, passed.message
    failed = collectives.conclude(replace(cpu_context(), min_busbw_gbps=busbw / 0.89), outcome)
    assert failed.status is Status.FAIL
    assert "below 0.9 x --min-busbw" in failed.message
    # the floor that decided is kept for the charts to draw
    floor = failed.details["floors"]["allreduce_busbw_gbps"]
    assert floor == pytest.approx(0.9 * busbw / 0.89)
    assert "floors" not in collectives.conclude(cpu_context(), outcome).details


def test_the_other_collectives_floors_fail_each_below_nine_tenths_of_it() -> None:
    """--min-allgather-busbw and --min-alltoall-busbw hold each collective as --min-busbw holds
    the all-reduce (issue #33 §1: floors beside all-reduce's; none is published, so they are
    the operator's), and only the one below its floor is named."""
    from dataclasses import replace

    from gpuaccept.checks.context import RanksOutcome
    from gpuaccept.measure.collectives import AllReduceFigure, CollectiveFigure

    # 2 ranks: busbw = algbw x (n-1)/n = 2 MiB / 1 ms / 2 for both
    gather = CollectiveFigure("all_gather", 2, 2**21, 0, 1e-3)
    to_all = CollectiveFigure("all_to_all", 2, 2**21, 0, 1e-3)
    figure = AllReduceFigure(2, 2**20, 0, 1e-3, others=(gather, to_all))
    outcome = RanksOutcome(2, "gloo", [figure, figure])
    busbw = gather.busbw_gbps
    assert busbw == pytest.approx(to_all.busbw_gbps)

    def judged(floors: dict[str, float]) -> object:
        return collectives.conclude(replace(cpu_context(), min_other_busbw_gbps=floors), outcome)

    passed = judged({"all_gather": busbw / 0.91, "all_to_all": busbw / 0.91})
    assert passed.status is Status.PASS, passed.message
    assert passed.details["floors"] == {
        "allgather_busbw_gbps": pytest.approx(0.9 * busbw / 0.91),
        "alltoall_busbw_gbps": pytest.approx(0.9 * busbw / 0.91),
    }
    failed = judged({"all_gather": busbw / 0.91, "all_to_all": busbw / 0.89})
    assert failed.status is Status.FAIL
    assert "all_to_all busbw" in failed.message
    assert "below 0.9 x --min-alltoall-busbw" in failed.message
    assert "all_gather busbw" not in failed.message
    failed = judged({"all_gather": busbw / 0.89})
    assert "below 0.9 x --min-allgather-busbw" in failed.message
    # one rank has no bus bandwidth: said, not judged
    alone = RanksOutcome(1, "gloo", [AllReduceFigure(1, 2**20, 0, 1e-3, others=(gather,))])
    single = collectives.conclude(
        replace(cpu_context(), min_other_busbw_gbps={"all_gather": 1e9}), alone
    )
    assert single.status is Status.WARN
    assert "--min-allgather-busbw not judged: one rank has no bus bandwidth" in single.message


def test_collectives_wrong_sum_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(collectives, "accept_collectives_rank", faults.max_instead_of_sum_rank)
    result = collectives.run(cpu_context())
    assert result.status is Status.FAIL
    assert "wrong element(s)" in result.message


def test_a_misrouted_all_to_all_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    """All-to-all delivering rank 1's chunks in reverse order (a routing fault the all-reduce's
    sum cannot see: every element arrives, at the wrong place)."""
    monkeypatch.setattr(collectives, "accept_collectives_rank", faults.misrouted_all_to_all_rank)
    result = collectives.run(cpu_context())
    assert result.status is Status.FAIL
    assert "all_to_all returned" in result.message
    assert "all_gather returned" not in result.message
    figures = {m.name: m.value for m in result.measurements}
    assert figures["alltoall_wrong_elements"] > 0
    assert figures["allreduce_wrong_elements"] == 0


def test_hung_collective_times_out_and_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(collectives, "accept_collectives_rank", faults.hang_on_rank1)
    result = collectives.run(cpu_context(rank_timeout_seconds=8.0))
    assert result.status is Status.FAIL
    assert "did not finish within 8 s" in result.message


def test_ddp_loss_falls_and_parameters_match_on_two_ranks() -> None:
    result = ddp.run(cpu_context())
    assert result.status is Status.PASS, result.message
    assert len([m for m in result.measurements if m.name.endswith("loss_final_over_initial")]) == 2


def test_ddp_diverging_parameters_fail(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ddp, "ddp_smoke_rank", faults.diverging_ddp_rank)
    result = ddp.run(cpu_context())
    assert result.status is Status.FAIL
    assert "parameters differ across ranks" in result.message


def test_a_ranks_body_runs_the_checks_collectives_in_its_process_group() -> None:
    """What each torchrun rank runs for `collectives` (suite/multinode.py): the check's own
    spec, this rank's place and the world, in the group already made."""
    import torch.distributed as dist

    from gpuaccept.measure.collectives import AllReduceFigure

    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    try:
        figure = collectives.rank_body(0, 1, cpu_context())
    finally:
        dist.destroy_process_group()
    assert isinstance(figure, AllReduceFigure)
    assert (figure.world_size, figure.wrong_elements) == (1, 0)
    assert figure.nbytes == collectives.allreduce_spec(cpu_context()).nbytes
