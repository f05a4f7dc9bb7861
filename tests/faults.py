"""Injected faults, in an importable module so spawned rank and check processes can load them."""

from __future__ import annotations

import os
import time
from typing import Any

import torch
import torch.distributed as dist

from gpuaccept.checks.context import CheckContext
from gpuaccept.measure.collectives import AllReduceFigure, AllReduceSpec, expected_all_reduce_sum
from gpuaccept.measure.training_smoke import SmokeSpec, build_model, train_smoke
from gpuaccept.results import CheckResult, Status


def hang_on_rank1(rank: int, world_size: int, spec: Any) -> Any:
    """Rank 1 never joins the collective, so rank 0 waits forever in it: a hung all-reduce."""
    if rank == 1:
        time.sleep(3600)
    data = torch.ones(4)
    dist.all_reduce(data)
    return data


def raise_on_rank1(rank: int, world_size: int, spec: Any) -> int:
    if rank == 1:
        raise RuntimeError("injected rank failure")
    return rank


# what torch raised on an H200 where two ranks of one group sat on one GPU (NCCL 2.28.9;
# docs/results/2026-11-27-nvidia-h200-isolation-children.md): the cause on its last line
NCCL_DUPLICATE_GPU = (
    "NCCL error in: /pytorch/torch/csrc/distributed/c10d/NCCLUtils.cpp:93, invalid usage (run "
    "with NCCL_DEBUG=WARN for details), NCCL version 2.28.9\nncclInvalidUsage: This usually "
    "reflects invalid usage of NCCL library.\nLast error:\nDuplicate GPU detected : rank 0 and "
    "rank 1 both on CUDA device 60"
)


def raise_nccl_error_on_rank1(rank: int, world_size: int, spec: Any) -> int:
    if rank == 1:
        raise RuntimeError(NCCL_DUPLICATE_GPU)
    return rank


def peer_loss_before_the_cause(rank: int, world_size: int, spec: Any) -> int:
    """Rank 0 reports a lost peer first (what gloo said here when rank 1 raised while rank 0 was
    still joining); rank 1's own error, the cause, arrives after it. Both have joined first: a
    rank 0 that raised while rank 1 was still joining made rank 1's own error a real "closed by
    peer" (CI, on a loaded 2-core machine), and then no rank had a cause to name."""
    dist.barrier()
    if rank == 0:
        raise RuntimeError(
            "Gloo connectFullMesh failed with [pair.cc:553] Connection closed by peer "
            "[127.0.0.1]:1671"
        )
    time.sleep(0.3)
    raise RuntimeError("injected rank failure")


def killed_on_rank1(rank: int, world_size: int, signum: int) -> int:
    if rank == 1:
        os.kill(os.getpid(), signum)
    time.sleep(3600)
    return rank


def die_on_rank1(rank: int, world_size: int, spec: Any) -> int:
    if rank == 1:
        os._exit(7)
    time.sleep(3600)
    return rank


def max_instead_of_sum_rank(rank: int, world_size: int, spec: AllReduceSpec) -> AllReduceFigure:
    """A broken all-reduce: reduces with MAX, so the exact-sum check must count wrong elements."""
    numel = spec.nbytes // 4
    data = (torch.arange(numel) % 61 + rank + 1).to(torch.float32)
    dist.all_reduce(data, op=dist.ReduceOp.MAX)
    wrong = int((data != expected_all_reduce_sum(numel, world_size, data.device)).sum())
    return AllReduceFigure(world_size, numel * 4, wrong, 1e-3)


def misrouted_all_to_all_rank(rank: int, world_size: int, spec: AllReduceSpec) -> AllReduceFigure:
    """accept's collectives with an all-to-all whose output chunks arrive reversed on rank 1."""
    from gpuaccept.measure.collectives import accept_collectives_rank

    real = dist.all_to_all_single

    def misrouted(output: torch.Tensor, source: torch.Tensor, *args: Any, **kw: Any) -> Any:
        done = real(output, source, *args, **kw)
        if rank == 1:
            chunks = output.view(world_size, -1)
            output.copy_(torch.flip(chunks, dims=[0]).reshape(-1))
        return done

    dist.all_to_all_single = misrouted  # type: ignore[assignment]
    return accept_collectives_rank(rank, world_size, spec)


def diverging_ddp_rank(rank: int, world_size: int, spec: SmokeSpec) -> Any:
    """Each rank trains its own copy without gradient averaging: parameters end different."""
    device = torch.device("cpu")
    return train_smoke(build_model(spec, device), spec, device, shard=rank)


def check_raises(context: CheckContext) -> CheckResult:
    raise RuntimeError("injected check failure")


def check_hangs(context: CheckContext) -> CheckResult:
    _mark_started()
    time.sleep(3600)
    raise AssertionError("unreachable")


def check_dies(context: CheckContext) -> CheckResult:
    os._exit(9)


def check_passes(context: CheckContext) -> CheckResult:
    return CheckResult(name="fake", area="FAKE", status=Status.PASS, message="ok")


# --- for the suite's warm workers ---------------------------------------------------------------
def check_lists_other_workers(context: CheckContext) -> CheckResult:
    """Passes and lists the suite's other live workers while it runs (besides this one)."""
    import multiprocessing

    from tests.processes import workers_of

    parent = multiprocessing.parent_process()
    assert parent is not None
    assert parent.pid is not None
    others = [pid for pid in workers_of(parent.pid) if pid != os.getpid()]
    return CheckResult(
        name="others",
        area="FAKE",
        status=Status.PASS,
        message="ok",
        details={"pid": os.getpid(), "others": others, "device_index": context.device_index},
    )


def check_reports_pid(context: CheckContext) -> CheckResult:
    """Passes and says which worker process ran it (to see workers reused or replaced)."""
    return CheckResult(
        name="pid",
        area="FAKE",
        status=Status.PASS,
        message="ok",
        details={"pid": os.getpid(), "device_index": context.device_index},
    )


def check_hangs_with_child(context: CheckContext) -> CheckResult:
    """Starts a grandchild (as a rank launcher would), records its pid, then hangs."""
    import subprocess

    child = subprocess.Popen(["sleep", "3600"])
    with open(os.environ["FAULT_PID_FILE"], "w", encoding="utf-8") as stream:
        stream.write(str(child.pid))
    time.sleep(3600)
    raise AssertionError("unreachable")


def _mark_started() -> None:
    """Say "this check is running" to a test that waits on FAULT_STARTED_FILE: a load-dependent
    worker start must not decide when a test's event or signal lands."""
    mark = os.environ.get("FAULT_STARTED_FILE")
    if mark:
        with open(mark, "w", encoding="utf-8") as stream:
            stream.write(str(os.getpid()))


def check_sleeps(context: CheckContext) -> CheckResult:
    _mark_started()
    time.sleep(2.0)
    return CheckResult(name="sleeps", area="FAKE", status=Status.PASS, message="slept")


def rank_returns_rank(rank: int, world_size: int, context: CheckContext) -> int:
    data = torch.tensor([float(rank + 1)])
    dist.all_reduce(data)
    return int(data.item()) * 100 + rank


def rank_raises_on_rank1(rank: int, world_size: int, context: CheckContext) -> int:
    if rank == 1:
        raise RuntimeError("injected rank failure")
    dist.barrier()
    return rank


def rank_hangs_on_rank1(rank: int, world_size: int, context: CheckContext) -> int:
    if rank == 1:
        time.sleep(3600)
    dist.barrier()
    return rank


def conclude_values(context: CheckContext, outcome: Any) -> CheckResult:
    if outcome.values is None:
        return CheckResult(name="ranks", area="FAKE", status=Status.FAIL, message=outcome.error)
    return CheckResult(
        name="ranks",
        area="FAKE",
        status=Status.PASS,
        message=f"{outcome.world_size} {outcome.backend} ranks",
        details={"values": outcome.values},
    )
