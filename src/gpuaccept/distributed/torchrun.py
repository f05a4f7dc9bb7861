"""The process group a torchrun launch asks for (NCCL on GPUs, gloo on CPU), torn down on exit."""

from __future__ import annotations

import datetime
import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager

import torch
import torch.distributed as dist

from gpuaccept.distributed.launch_env import check_rendezvous, rank_env
from gpuaccept.errors import EnvironmentProblem
from gpuaccept.probe.hardware import resolve_device_mode

_INIT_TIMEOUT = datetime.timedelta(minutes=10)


@contextmanager
def torchrun_process_group(
    requested_device: str, environ: Mapping[str, str] | None = None
) -> Iterator[tuple[torch.device, int, int]]:
    """(device, rank, world size) for this process; a process group is set up under torchrun."""
    env = os.environ if environ is None else environ
    ranks = rank_env(env)  # refused before the device is touched: one line, exit 2
    if ranks is not None:
        check_rendezvous(env)
    mode = resolve_device_mode(requested_device)
    if ranks is None:
        yield torch.device("cuda" if mode == "cuda" else "cpu"), 0, 1
        return
    world, rank, local_rank = ranks.world, ranks.rank, ranks.local_rank
    if mode == "cuda":
        if local_rank >= torch.cuda.device_count():
            raise EnvironmentProblem(
                f"LOCAL_RANK {local_rank} but only {torch.cuda.device_count()} GPU(s) visible: "
                f"start torchrun with --nproc-per-node at most the GPUs assigned"
            )
        torch.cuda.set_device(local_rank)
        device = torch.device("cuda", local_rank)
    else:
        device = torch.device("cpu")
    dist.init_process_group(
        "nccl" if mode == "cuda" else "gloo", init_method="env://", timeout=_INIT_TIMEOUT
    )
    try:
        yield device, rank, world
        dist.barrier()  # rank 0 still writes reports: no peer tears the group down before it
    finally:
        dist.destroy_process_group()
