"""Put on PYTHONPATH of one stand-in node: what its all-reduces of data receive is off by one,
as on a node whose GPU or NIC corrupts data. (Imported at start-up in every rank.)"""

import torch
import torch.distributed as dist

_all_reduce = dist.all_reduce


def _corrupt_all_reduce(tensor, *args, **kwargs):  # type: ignore[no-untyped-def]
    work = _all_reduce(tensor, *args, **kwargs)
    if tensor.numel() >= 1024 and tensor.dtype == torch.float32:
        tensor.view(-1)[0] += 1.0
    return work


dist.all_reduce = _corrupt_all_reduce
