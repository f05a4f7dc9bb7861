"""Put on PYTHONPATH of one stand-in node: its all-reduces of data take 50 ms longer (or
$SLOW_ALL_REDUCE_SECONDS), as over a slow link; with $SLOW_LOCAL_RANK, only that local rank's
(one GPU's NIC, one rail). (Python imports sitecustomize at start-up, in every rank the launcher
starts.)"""

import os
import time

import torch.distributed as dist

_all_reduce = dist.all_reduce


def _slow_all_reduce(tensor, *args, **kwargs):  # type: ignore[no-untyped-def]
    only = os.environ.get("SLOW_LOCAL_RANK")
    if tensor.numel() >= 1024 and only in (None, os.environ.get("LOCAL_RANK")):
        time.sleep(float(os.environ.get("SLOW_ALL_REDUCE_SECONDS", "0.05")))
    return _all_reduce(tensor, *args, **kwargs)


dist.all_reduce = _slow_all_reduce
