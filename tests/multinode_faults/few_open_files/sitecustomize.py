"""Put on PYTHONPATH of one stand-in node: its hard open-files limit is below what a store for
the whole job's children needs (as a node whose daemon starts jobs with a low LimitNOFILE).
(Python imports sitecustomize at start-up, in every process of the node.)"""

from gpuaccept.distributed import group_children


def _no_room(clients: int) -> str:
    needed = clients + 300
    return f"open-files limit (64) is below the {needed} a store for {clients} children needs"


group_children.open_files_room = _no_room
