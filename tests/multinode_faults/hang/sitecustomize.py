"""Put on PYTHONPATH of one stand-in node: its all-reduces of data never return (sleep an hour),
as on a node whose link hangs a collective rather than slowing it; with $HANG_MIN_WORLD, only
in groups of that many ranks or more (a node fine alone whose network hangs). (Python imports
sitecustomize at start-up, in every process of the node: its ranks and their children.)"""

import os
import time

import torch.distributed as dist

_all_reduce = dist.all_reduce


def _hung_all_reduce(tensor, *args, **kwargs):  # type: ignore[no-untyped-def]
    group = kwargs.get("group")
    world = dist.get_world_size(group) if group is not None else dist.get_world_size()
    if tensor.numel() >= 1024 and world >= int(os.environ.get("HANG_MIN_WORLD", "1")):
        time.sleep(3600)
    return _all_reduce(tensor, *args, **kwargs)


dist.all_reduce = _hung_all_reduce
