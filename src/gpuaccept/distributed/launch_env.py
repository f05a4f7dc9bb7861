"""What a launcher (torchrun, or srun with MASTER_ADDR/MASTER_PORT) tells a rank, checked before a
process group is set up: a bad value is one line and exit 2, never a traceback or a 10-minute wait
at init for peers that cannot exist (RANK=5 of WORLD_SIZE=2)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from gpuaccept.errors import InputError

MAX_WORLD = 1 << 20  # more ranks than any cluster has: a typo, not a job


@dataclass(frozen=True)
class RankEnv:
    world: int
    rank: int
    local_rank: int
    local_world: int
    group_rank: int | None  # torchrun's node index, when given


def _number(env: Mapping[str, str], name: str, *, low: int, high: int) -> int:
    raw = env.get(name)
    # ASCII digits only ('²'.isdigit() is true), and a bounded length before int()
    if raw is None or not re.fullmatch(r"\s*[0-9]{1,9}\s*", raw):
        raise InputError(f"{name}={raw!r}: a multi-rank launch needs it as a number")
    value = int(raw)
    if not low <= value <= high:
        raise InputError(f"{name}={value}: must be from {low} to {high}")
    return value


def rank_env(env: Mapping[str, str]) -> RankEnv | None:
    """The validated torchrun variables, or None when WORLD_SIZE says this is one process."""
    world_text = env.get("WORLD_SIZE", "").strip()
    if world_text in ("", "0", "1"):
        return None
    world = _number(env, "WORLD_SIZE", low=1, high=MAX_WORLD)
    rank = _number(env, "RANK", low=0, high=world - 1)
    local_world = (
        _number(env, "LOCAL_WORLD_SIZE", low=1, high=world) if "LOCAL_WORLD_SIZE" in env else world
    )
    if world % local_world:
        raise InputError(
            f"WORLD_SIZE={world} is not a whole number of nodes of LOCAL_WORLD_SIZE={local_world} "
            "ranks: give every node the same --nproc-per-node"
        )
    local_rank = _number(env, "LOCAL_RANK", low=0, high=local_world - 1)
    group_rank = (
        _number(env, "GROUP_RANK", low=0, high=world // local_world - 1)
        if env.get("GROUP_RANK", "").strip()
        else None
    )
    return RankEnv(world, rank, local_rank, local_world, group_rank)


def check_rendezvous(env: Mapping[str, str]) -> None:
    """env:// initialisation reads MASTER_ADDR and MASTER_PORT: refuse them missing or wrong."""
    if not env.get("MASTER_ADDR", "").strip():
        raise InputError(
            "MASTER_ADDR is not set: a multi-rank launch needs the first rank's address"
        )
    _number(env, "MASTER_PORT", low=1, high=65535)
