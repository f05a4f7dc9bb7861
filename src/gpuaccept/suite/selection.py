"""Which checks a level runs, how each runs (once, per device, across ranks), --only/--skip."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from gpuaccept.errors import InputError

LEVELS = ("quick", "standard", "full")
# Seconds a check may take at each level (accept --check-timeout overrides)
DEFAULT_TIMEOUT_SECONDS = {"quick": 180.0, "standard": 900.0, "full": 3600.0}

# node: once per run, in the first worker. device: in every device's worker at once (or one
# device after another when `serial`). ranks: every worker is one rank of a process group.
Scope = Literal["node", "device", "ranks"]


@dataclass(frozen=True)
class CheckSpec:
    name: str
    area: str
    target: str  # "module:function": run(context) for node/device, rank_body(rank, world, ...)
    levels: frozenset[str]
    scope: Scope = "device"
    needs_device: bool = True  # measures a device: pointless when expected GPUs are missing
    # device checks that share a host resource (PCIe uplinks, host memory) run one GPU at a time,
    # so a shared switch cannot make a healthy GPU read slow
    serial: bool = False
    conclude: str | None = None  # ranks: "module:function" turning the rank values into a result
    # runs after every other check, with every worker's events and the counters read when the
    # run started
    final: bool = False
    # a node check that needs the GPUs to itself: the suite stops its GPU workers first (their
    # CUDA contexts hold memory, count as running processes and, in exclusive-process compute
    # mode, lock the GPU) and runs it in a worker that makes no CUDA context
    gpus_idle: bool = False


_ALL = frozenset(LEVELS)
_STANDARD_UP = frozenset({"standard", "full"})

CHECKS: tuple[CheckSpec, ...] = (
    CheckSpec("inventory", "INVENTORY", "gpuaccept.checks.inventory:run", _ALL, "node", False),
    CheckSpec("stack", "STACK", "gpuaccept.checks.stack:run", _ALL, "node", False),
    CheckSpec("fabric", "FABRIC", "gpuaccept.checks.fabric:run", _ALL, "node", False),
    CheckSpec("health", "HEALTH", "gpuaccept.checks.health:run", _ALL, "device", False),
    CheckSpec("compute", "COMPUTE", "gpuaccept.checks.compute:run", _ALL),
    CheckSpec("memory", "MEMORY", "gpuaccept.checks.memory:run", _STANDARD_UP),
    CheckSpec("transfer", "TRANSFER", "gpuaccept.checks.transfer:run", _STANDARD_UP, serial=True),
    CheckSpec("train", "TRAIN", "gpuaccept.checks.train:run", _ALL),
    CheckSpec(
        "collectives",
        "COLLECTIVES",
        "gpuaccept.checks.collectives:rank_body",
        _ALL,
        "ranks",
        conclude="gpuaccept.checks.collectives:conclude",
    ),
    CheckSpec(
        "ddp",
        "DDP",
        "gpuaccept.checks.ddp:rank_body",
        _STANDARD_UP,
        "ranks",
        conclude="gpuaccept.checks.ddp:conclude",
    ),
    # the work a cluster is bought for: a Llama-3-style model trained with FSDP2 over every GPU
    CheckSpec(
        "workload",
        "TRAIN",
        "gpuaccept.checks.workload:rank_body",
        _STANDARD_UP,
        "ranks",
        conclude="gpuaccept.checks.workload:conclude",
    ),
    CheckSpec("network", "FABRIC", "gpuaccept.checks.network:run", _STANDARD_UP, "node", False),
    CheckSpec("host", "HOST", "gpuaccept.checks.host:run", _STANDARD_UP, "node", False),
    # every pair from one process, which makes a context on every GPU: it runs with the GPU
    # workers stopped (in exclusive-process compute mode a GPU takes one context at a time, so
    # it failed "busy or unavailable" beside them), after every check that needs them
    CheckSpec("p2p", "TRANSFER", "gpuaccept.checks.p2p:run", _STANDARD_UP, "node", gpus_idle=True),
    # DCGM's diagnostic takes minutes: at full by default, at any level with accept --dcgm N.
    # Its memory test allocates most of each GPU and it reports other processes on them: it
    # runs with the GPUs free of our workers.
    CheckSpec(
        "dcgm",
        "HEALTH",
        "gpuaccept.checks.dcgm:run",
        frozenset({"full"}),
        "node",
        False,
        gpus_idle=True,
    ),
    CheckSpec(
        "fabric-errors",
        "FABRIC",
        "gpuaccept.checks.fabric:run_errors",
        _ALL,
        "node",
        False,
        final=True,
    ),
    # last: it hears every worker's NVML events of the whole run
    CheckSpec("events", "HEALTH", "gpuaccept.checks.events:run", _ALL, "node", False, final=True),
)


def check_names() -> list[str]:
    return [spec.name for spec in CHECKS]


def levels_text() -> str:
    """Each level's checks and per-check time limit, one line each, for `accept --help`."""
    lines = []
    for level in LEVELS:
        names = [spec.name for spec in CHECKS if level in spec.levels]
        limit = DEFAULT_TIMEOUT_SECONDS[level]
        lines.append(f"{level:<9} {', '.join(names)} (each up to {limit:g} s)")
    return "\n".join(lines)


def select_checks(
    level: str, only: list[str], skip: list[str], also: tuple[str, ...] = ()
) -> list[CheckSpec]:
    """The checks of a level (plus `also`, which options such as --dcgm ask for), narrowed by
    --only and --skip; unknown names and an empty selection are input errors (nothing judged is
    not a pass)."""
    if level not in LEVELS:
        raise InputError(f"--level must be one of {', '.join(LEVELS)} (got {level!r})")
    known = set(check_names())
    for flag, names in (("--only", only), ("--skip", skip)):
        unknown = sorted(set(names) - known)
        if unknown:
            raise InputError(
                f"{flag}: unknown check {', '.join(unknown)} (known: {', '.join(check_names())})"
            )
    if only:
        chosen = [spec for spec in CHECKS if spec.name in only and spec.name not in skip]
    else:
        chosen = [
            spec
            for spec in CHECKS
            if (level in spec.levels or spec.name in also) and spec.name not in skip
        ]
    if not chosen:
        what = f"--only {','.join(only)}" if only else f"--level {level}"
        raise InputError(f"no check left to run: {what} with --skip {','.join(skip)}")
    return chosen
