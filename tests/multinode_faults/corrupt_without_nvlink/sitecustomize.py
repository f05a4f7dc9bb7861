"""Put on PYTHONPATH of one stand-in node: its all-reduces of data are off by one only in a
process whose environment turns NVLink off for NCCL (NCCL_P2P_DISABLE=1), as on a node whose
GPUs meet correctly over NVLink and corrupt data over PCIe or host memory. (Imported at start-up
in every rank the launcher starts, and in the forkserver the ranks start their own ranks from.)"""

import os

import torch
import torch.distributed as dist

_all_reduce = dist.all_reduce


def _corrupt_without_nvlink(tensor, *args, **kwargs):  # type: ignore[no-untyped-def]
    work = _all_reduce(tensor, *args, **kwargs)
    nvlink_off = os.environ.get("NCCL_P2P_DISABLE") == "1"
    if nvlink_off and tensor.numel() >= 1024 and tensor.dtype == torch.float32:
        tensor.view(-1)[0] += 1.0
    return work


dist.all_reduce = _corrupt_without_nvlink
