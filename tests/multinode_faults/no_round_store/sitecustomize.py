"""Put on PYTHONPATH of one stand-in node: its store for the isolation rounds cannot listen (as
a node out of ports, or whose socket calls fail), so the groups it leads cannot meet. (Python
imports sitecustomize at start-up, in every process of the node.)"""

from typing import Any

from gpuaccept.distributed import group_children


def _cannot_listen(address: str, timeout_seconds: float) -> tuple[Any, int]:
    raise OSError(98, "stand-in: Address already in use")


group_children.open_node_store = _cannot_listen
