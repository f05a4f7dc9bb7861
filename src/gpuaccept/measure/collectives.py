"""All-reduce with an exact correctness check and nccl-tests bus bandwidth.

Runs inside an initialised process group (see gpuaccept.distributed). Inputs are small integers,
so any summation order gives the same exact float32 sum; each checked iteration starts from
fresh inputs, so an error cannot be hidden or compounded by the previous result.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist

from gpuaccept.measure.timing import time_repeats

# nccl-tests bus-bandwidth factors: busbw = algbw x factor(n) (doc/PERFORMANCE.md:136-143 at
# NVIDIA/nccl-tests a0b82b2; all-to-all: src/alltoall.cu:48-54, its size the whole buffer of n
# chunks, as all-gather's).
BUS_FACTORS: dict[str, Callable[[int], float]] = {
    "all_reduce": lambda n: 2.0 * (n - 1) / n,
    "all_gather": lambda n: (n - 1) / n,
    "reduce_scatter": lambda n: (n - 1) / n,
    "broadcast": lambda n: 1.0,
    "all_to_all": lambda n: (n - 1) / n,
}
_PATTERN_PERIOD = 61


@dataclass(frozen=True)
class AllReduceSpec:
    nbytes: int
    check_iterations: int
    warmup: int
    repeats: int


@dataclass(frozen=True)
class AllReduceFigure:
    world_size: int
    nbytes: int
    wrong_elements: int
    seconds: float  # slowest rank's median time per all-reduce
    own_wrong: int = 0  # the wrong elements this rank saw (names the node that sees them)
    # all-gather and all-to-all on the same ranks after it (accept's collectives check)
    others: tuple[CollectiveFigure, ...] = ()

    @property
    def algbw_gbps(self) -> float:
        return self.nbytes / self.seconds / 1e9

    @property
    def busbw_gbps(self) -> float:
        return self.algbw_gbps * BUS_FACTORS["all_reduce"](self.world_size)


@dataclass(frozen=True)
class CollectiveFigure:
    """One collective beside the all-reduce: exactness and the slowest rank's median time."""

    collective: str  # all_gather, all_to_all
    world_size: int
    nbytes: int  # the whole buffer (world chunks), as nccl-tests' size column
    wrong_elements: int
    seconds: float

    @property
    def algbw_gbps(self) -> float:
        return self.nbytes / self.seconds / 1e9

    @property
    def busbw_gbps(self) -> float:
        return self.algbw_gbps * BUS_FACTORS[self.collective](self.world_size)


def rank_device(rank: int) -> torch.device:
    """The device a rank works on: the GPU its launcher set (LOCAL_RANK) under NCCL, else CPU."""
    if dist.get_backend() == "nccl":
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device("cpu")


def _pattern(numel: int, rank: int, device: torch.device) -> torch.Tensor:
    return (torch.arange(numel, device=device) % _PATTERN_PERIOD + rank + 1).to(torch.float32)


def expected_all_reduce_sum(numel: int, world_size: int, device: torch.device) -> torch.Tensor:
    base = (torch.arange(numel, device=device) % _PATTERN_PERIOD).to(torch.float32)
    return base * world_size + world_size * (world_size + 1) / 2


# The timed buffer may take this share of a GPU's free memory (NCCL needs room of its own); the
# exactness check runs on at most CHECK_MAX_BYTES, since it holds three buffers at once.
_FREE_MEMORY_SHARE = 0.4
CHECK_MAX_BYTES = 1024**3


def fitting_bytes(wanted: int, device: torch.device) -> int:
    """`wanted`, or less where the GPU's free memory would not hold it (whole MiB)."""
    if device.type != "cuda":
        return wanted
    free, _ = torch.cuda.mem_get_info(device)
    room = int(free * _FREE_MEMORY_SHARE) // 2**20 * 2**20
    return max(4, min(wanted, room))


def agreed_bytes(wanted: int, device: torch.device, group: Any = None) -> int:
    """The size every rank can hold: the smallest rank's fit."""
    size = torch.tensor([fitting_bytes(wanted, device)], dtype=torch.int64, device=device)
    dist.all_reduce(size, op=dist.ReduceOp.MIN, group=group)
    return int(size.item())


def all_reduce_rank(
    rank: int, world_size: int, spec: AllReduceSpec, group: Any = None
) -> AllReduceFigure:
    """Rank body: check exactness, then time all-reduce on a zero buffer (nothing to overflow).

    `rank` and `world_size` are within `group` (None: the whole process group)."""
    device = rank_device(rank)
    numel = max(1, agreed_bytes(spec.nbytes, device, group) // 4)
    check_numel = min(numel, CHECK_MAX_BYTES // 4)
    expected = expected_all_reduce_sum(check_numel, world_size, device)
    wrong = 0
    for _ in range(spec.check_iterations):
        data = _pattern(check_numel, rank, device)
        dist.all_reduce(data, group=group)
        wrong += int((data != expected).sum())
        del data
    del expected  # room for the timed buffer
    buffer = torch.zeros(numel, device=device)
    timing = time_repeats(
        lambda: dist.all_reduce(buffer, group=group), device, spec.warmup, spec.repeats
    )
    slowest = torch.tensor([timing.median_seconds], dtype=torch.float64, device=device)
    dist.all_reduce(slowest, op=dist.ReduceOp.MAX, group=group)
    wrong_total = torch.tensor([wrong], dtype=torch.int64, device=device)
    dist.all_reduce(wrong_total, group=group)
    return AllReduceFigure(
        world_size, numel * 4, int(wrong_total.item()), float(slowest.item()), own_wrong=wrong
    )


# --- nccl-tests style sweeps over all_reduce, all_gather, reduce_scatter and broadcast ---------
#
# torch.distributed's all_reduce and broadcast work in place only, so their out-of-place columns
# are absent (None); all_gather and reduce_scatter have both, in-place meaning the input is the
# rank's own chunk of the output (or the output its chunk of the input), as in nccl-tests.
COLLECTIVES = ("all_reduce", "all_gather", "reduce_scatter", "broadcast", "all_to_all")
_ELEMENT_BYTES = 4  # float32
# the size is the whole buffer: world chunks of it
_SPLIT = {"all_gather", "reduce_scatter", "all_to_all"}
# nccl-tests has no in-place all-to-all (src/alltoall.cu:43-44), nor does torch.distributed
_OUT_OF_PLACE_ONLY = {"all_to_all"}
# torch 2.13 renamed the tensor variants (*_into_tensor / *_tensor now warn); older ones lack the
# new names, and conda-forge's pytorch may be either.
_all_gather = getattr(dist, "all_gather_single", dist.all_gather_into_tensor)
_reduce_scatter = getattr(dist, "reduce_scatter_single", dist.reduce_scatter_tensor)


@dataclass(frozen=True)
class SweepSpec:
    collective: str
    sizes: tuple[int, ...]  # bytes, as the nccl-tests size column
    warmup: int
    iterations: int
    check: bool = True


@dataclass(frozen=True)
class CollectiveRow:
    collective: str
    world_size: int
    nbytes: int
    count: int  # elements, as the nccl-tests count column
    out_of_place_seconds: float | None  # mean per operation over ranks; None: no such variant
    out_of_place_wrong: int | None
    in_place_seconds: float | None
    in_place_wrong: int | None

    def algbw_gbps(self, seconds: float | None) -> float | None:
        return None if seconds is None else self.nbytes / seconds / 1e9

    def busbw_gbps(self, seconds: float | None) -> float | None:
        algbw = self.algbw_gbps(seconds)
        return None if algbw is None else algbw * BUS_FACTORS[self.collective](self.world_size)


def _chunk_elements(collective: str, nbytes: int, world: int) -> int:
    elements = max(1, nbytes // _ELEMENT_BYTES)
    return max(1, elements // world) if collective in _SPLIT else elements


def _operation(
    collective: str,
    chunk: int,
    world: int,
    rank: int,
    device: torch.device,
    in_place: bool,
    fill: Callable[[int, int], torch.Tensor],
    group: Any = None,
) -> tuple[Callable[[], object], torch.Tensor, torch.Tensor]:
    """(run once, result buffer, expected result) with inputs filled by `fill(numel, rank)`;
    `rank` and `world` within `group` (None: the whole process group)."""
    if collective == "all_reduce":
        data = fill(chunk, rank)
        expected = sum((fill(chunk, r) for r in range(world)), torch.zeros_like(data))
        return (lambda: dist.all_reduce(data, group=group)), data, expected
    if collective == "broadcast":
        if group is not None:
            raise ValueError("broadcast runs on the whole process group only")
        data = fill(chunk, rank)
        return (lambda: dist.broadcast(data, src=0)), data, fill(chunk, 0)
    if collective == "all_gather":
        output = torch.full((chunk * world,), -1.0, device=device)
        source = (
            output[rank * chunk : (rank + 1) * chunk]
            if in_place
            else torch.empty(chunk, device=device)
        )
        source.copy_(fill(chunk, rank))
        expected = torch.cat([fill(chunk, r) for r in range(world)])
        return (lambda: _all_gather(output, source, group=group)), output, expected
    if collective == "reduce_scatter":
        source = fill(chunk * world, rank)
        output = (
            source[rank * chunk : (rank + 1) * chunk]
            if in_place
            else torch.empty(chunk, device=device)
        )
        total = sum((fill(chunk * world, r) for r in range(world)), torch.zeros_like(source))
        expected = total[rank * chunk : (rank + 1) * chunk].clone()
        return (lambda: _reduce_scatter(output, source, group=group)), output, expected
    if collective == "all_to_all":
        # rank r's chunk j goes to rank j: this rank receives chunk `rank` of every rank's input
        source = fill(chunk * world, rank)
        output = torch.full((chunk * world,), -1.0, device=device)
        expected = torch.cat(
            [fill(chunk * world, r)[rank * chunk : (rank + 1) * chunk] for r in range(world)]
        )
        return (lambda: dist.all_to_all_single(output, source, group=group)), output, expected
    raise ValueError(f"unknown collective {collective!r}")


def _variant(
    collective: str,
    chunk: int,
    world: int,
    rank: int,
    device: torch.device,
    in_place: bool,
    spec: SweepSpec,
) -> tuple[float, int]:
    """(mean seconds per operation over ranks, wrong elements over ranks) for one variant."""
    wrong = 0
    if spec.check:

        def pattern(numel: int, owner: int) -> torch.Tensor:
            return _pattern(numel, owner, device)

        run, result, expected = _operation(
            collective, chunk, world, rank, device, in_place, pattern
        )
        run()
        wrong = int((result != expected).sum())

    def zeros(numel: int, owner: int) -> torch.Tensor:
        return torch.zeros(numel, device=device)

    run, _, _ = _operation(collective, chunk, world, rank, device, in_place, zeros)
    for _ in range(spec.warmup):
        run()

    def block() -> None:
        for _ in range(spec.iterations):
            run()

    seconds = time_repeats(block, device, warmup=0, repeats=1).median_seconds / spec.iterations
    totals = torch.tensor([seconds, float(wrong)], dtype=torch.float64, device=device)
    dist.all_reduce(totals)
    return float(totals[0]) / world, int(totals[1])


def collective_sweep_rank(rank: int, world_size: int, spec: SweepSpec) -> list[CollectiveRow]:
    """Rank body (inside an initialised process group): one row per size, every rank agrees."""
    if spec.collective not in COLLECTIVES:
        raise ValueError(f"unknown collective {spec.collective!r}")
    device = rank_device(rank)
    rows = []
    for nbytes in spec.sizes:
        chunk = _chunk_elements(spec.collective, nbytes, world_size)
        count = chunk * world_size if spec.collective in _SPLIT else chunk
        out_of_place: tuple[float, int] | None = None
        in_place: tuple[float, int] | None = None
        if spec.collective in _SPLIT:
            out_of_place = _variant(spec.collective, chunk, world_size, rank, device, False, spec)
        if spec.collective not in _OUT_OF_PLACE_ONLY:
            in_place = _variant(spec.collective, chunk, world_size, rank, device, True, spec)
        rows.append(
            CollectiveRow(
                collective=spec.collective,
                world_size=world_size,
                nbytes=count * _ELEMENT_BYTES,
                count=count,
                out_of_place_seconds=out_of_place[0] if out_of_place else None,
                out_of_place_wrong=out_of_place[1] if out_of_place else None,
                in_place_seconds=in_place[0] if in_place else None,
                in_place_wrong=in_place[1] if in_place else None,
            )
        )
    return rows


# The exactness check of all-gather and all-to-all builds every rank's input to know what must
# arrive; it runs on at most this many bytes (the timing on the all-reduce's whole size).
OTHERS_CHECK_MAX_BYTES = 64 * 2**20
OTHER_COLLECTIVES = ("all_gather", "all_to_all")


def collective_figure_rank(
    collective: str,
    rank: int,
    world_size: int,
    nbytes: int,
    spec: AllReduceSpec,
    group: Any = None,
) -> CollectiveFigure:
    """Rank body for all-gather or all-to-all over `group` (None: the whole process group; rank
    and world within it): checked exactly (`spec.check_iterations` times, fresh inputs each
    time), then timed on zeros."""
    device = rank_device(rank)
    check_chunk = max(1, min(nbytes, OTHERS_CHECK_MAX_BYTES) // _ELEMENT_BYTES // world_size)

    def pattern(numel: int, owner: int) -> torch.Tensor:
        return _pattern(numel, owner, device)

    wrong = 0
    for _ in range(spec.check_iterations):
        run, result, expected = _operation(
            collective, check_chunk, world_size, rank, device, False, pattern, group
        )
        run()
        wrong += int((result != expected).sum())
        del run, result, expected
    chunk = max(1, nbytes // _ELEMENT_BYTES // world_size)
    whole = torch.zeros(chunk * world_size, device=device)
    if collective == "all_gather":
        part = torch.zeros(chunk, device=device)
        timing = time_repeats(
            lambda: _all_gather(whole, part, group=group), device, spec.warmup, spec.repeats
        )
    else:
        out = torch.empty_like(whole)
        timing = time_repeats(
            lambda: dist.all_to_all_single(out, whole, group=group),
            device,
            spec.warmup,
            spec.repeats,
        )
    totals = torch.tensor([timing.median_seconds, float(wrong)], dtype=torch.float64, device=device)
    slowest = totals[:1].clone()
    dist.all_reduce(slowest, op=dist.ReduceOp.MAX, group=group)
    dist.all_reduce(totals, group=group)
    return CollectiveFigure(
        collective, world_size, chunk * world_size * _ELEMENT_BYTES, int(totals[1]), float(slowest)
    )


def accept_collectives_rank(
    rank: int, world_size: int, spec: AllReduceSpec, group: Any = None
) -> AllReduceFigure:
    """accept's collectives: the all-reduce, then (on two ranks or more) all-gather and
    all-to-all on the size it settled on; within `group` as all_reduce_rank."""
    from dataclasses import replace

    figure = all_reduce_rank(rank, world_size, spec, group=group)
    if world_size < 2:  # one rank's all-gather and all-to-all are copies
        return figure
    others = tuple(
        collective_figure_rank(name, rank, world_size, figure.nbytes, spec, group)
        for name in OTHER_COLLECTIVES
    )
    return replace(figure, others=others)


def average_busbw_gbps(rows: list[CollectiveRow]) -> float:
    """nccl-tests' footer: the mean bus bandwidth over every size and variant reported."""
    figures = [
        bw
        for row in rows
        for bw in (row.busbw_gbps(row.out_of_place_seconds), row.busbw_gbps(row.in_place_seconds))
        if bw is not None
    ]
    return sum(figures) / len(figures) if figures else 0.0
