"""`gpuaccept bench collectives` as a library call: nccl-tests style sweeps on local ranks, or
on torchrun's ranks when it runs under torchrun (the one benchmark that may)."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated

from gpuaccept.commands.bench.common import (
    BenchResult,
    ProgressBar,
    SizeSweepRequest,
    finish,
    interruptible,
    no_progress,
    prepare,
    show,
    sweep_opts,
    sweep_sizes,
)
from gpuaccept.commands.options import opt
from gpuaccept.errors import InputError

if TYPE_CHECKING:
    import torch

    from gpuaccept.commands.output import Output
    from gpuaccept.results import CheckResult


_BEGIN, _END, _FACTOR = sweep_opts("collectives")
_RANKS = (
    "Local ranks to start (default: every GPU; 2 on CPU). Under torchrun the launcher's ranks "
    "are used."
)
_MIN_BUSBW = (
    "Fail when the average busbw (GB/s) over the whole size sweep is below 0.9 x this, as "
    "NCCL_TESTS_MIN_BW does (accept --min-busbw judges its one size)."
)


@dataclass(frozen=True, kw_only=True)
class CollectivesRequest(SizeSweepRequest):
    """The collectives (none: all four), the size sweep, iterations (None: 5 warm-up and 20
    timed), whether results are checked exactly, the local ranks (None: every GPU, 2 on the
    CPU) and the average busbw floor in GB/s (None: none)."""

    ops: Annotated[
        tuple[str, ...],
        opt(
            "--op",
            "[all_reduce|all_gather|reduce_scatter|broadcast]",
            "The collective to run (repeatable; default all four).",
        ),
    ] = ()
    begin: Annotated[str | None, _BEGIN] = None
    end: Annotated[str | None, _END] = None
    factor: Annotated[int | None, _FACTOR] = None
    warmup: Annotated[int | None, opt(("-w", "--warmup"), text="Warm-up iterations.", least=0)] = (
        None
    )
    iterations: Annotated[
        int | None, opt(("-n", "--iterations"), text="Timed iterations per size.", least=1)
    ] = None
    # 1 (or True): results checked exactly (#wrong); 0: not
    check: Annotated[
        int,
        opt(("-c", "--check"), text="1: check results exactly (#wrong); 0: skip.", least=0, most=1),
    ] = 1
    ranks: Annotated[int | None, opt("--ranks", text=_RANKS)] = None
    min_busbw: Annotated[
        float | None, opt("--min-busbw", "GBPS", _MIN_BUSBW, least=0, finite="number")
    ] = None


def collective_names() -> tuple[str, ...]:
    from gpuaccept.measure.collectives import COLLECTIVES

    return COLLECTIVES


def run_collectives(
    device: torch.device,
    request: CollectivesRequest,
    out: Output,
    progress: ProgressBar = no_progress,
) -> CheckResult | None:
    """The sweep's result, checked first (ops, sizes, ranks); None on a torchrun rank other
    than 0, which measured for rank 0 to report."""
    import os

    from gpuaccept.measure.collectives import SweepSpec, collective_sweep_rank
    from gpuaccept.sweeps.collectives import CollectiveRun, collectives_result
    from gpuaccept.sweeps.sizes import sweep_text

    ops = list(request.ops) or list(collective_names())
    unknown = sorted(set(ops) - set(collective_names()))
    if unknown:
        raise InputError(f"--op {unknown[0]!r}: choose from {', '.join(collective_names())}")
    sizes = sweep_sizes("collectives", device, request.begin, request.end, request.factor)
    w = 5 if request.warmup is None else request.warmup
    n = 20 if request.iterations is None else request.iterations
    ranks = request.ranks
    if ranks is not None and ranks < 1:
        raise InputError(f"--ranks must be at least 1 (got {ranks})")
    started = time.monotonic()
    specs = {op: SweepSpec(op, tuple(sizes), w, n, bool(request.check)) for op in ops}
    from gpuaccept.distributed.launch_env import rank_env

    if rank_env(os.environ) is not None:  # torchrun's variables, checked: bad ones exit 2
        from gpuaccept.distributed.torchrun import torchrun_process_group

        with torchrun_process_group(device.type) as (_, rank, world):
            import torch.distributed as dist

            rows = {op: collective_sweep_rank(rank, world, spec) for op, spec in specs.items()}
            backend = str(dist.get_backend())
        if rank != 0:
            return None
    else:
        import torch

        from gpuaccept.distributed.local_ranks import run_ranks

        world = ranks or (torch.cuda.device_count() if device.type == "cuda" else 2)
        backend = "nccl" if device.type == "cuda" else "gloo"
        out.line(
            f"[BENCH] collectives {','.join(ops)}: {world} {backend} rank(s), "
            f"{sweep_text(sizes)}, -w {w} -n {n}; times in us, algbw and busbw in GB/s"
        )
        rows = {}
        with progress(len(specs), f"collectives on {world} {backend} rank(s)") as advance:
            for op, spec in specs.items():
                rows[op] = run_ranks(collective_sweep_rank, world, spec, 600.0, backend)[0]
                advance()
    return collectives_result(CollectiveRun(rows, world, backend), request.min_busbw, started)


def run(
    request: CollectivesRequest, out: Output, progress: ProgressBar = no_progress
) -> BenchResult:
    """time, algbw, busbw and #wrong, out-of-place and in-place, for each collective; under
    torchrun only rank 0 reports (the others' result: exit 0, no report)."""
    prepared = prepare("collectives", request, out, one_process=None)
    with interruptible(out) as session:
        result = session.measure(
            "collectives", lambda: run_collectives(prepared.device, request, out, progress)
        )
        if result is None:
            return BenchResult(0, None)
        show(result, out)
    return finish(session, prepared, request, out)
