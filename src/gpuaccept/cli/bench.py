"""`gpuaccept bench`: full benchmark sweeps (matmul, membw, transfer, collectives, nbody).

Every argument is checked before the first benchmark starts, so a bad flag never costs a run.
"""

from __future__ import annotations

import contextlib
import sys
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from gpuaccept.cli.recording import HISTORY, NO_HISTORY, history_target
from gpuaccept.errors import InputError

if TYPE_CHECKING:
    import torch

    from gpuaccept.results import CheckResult

app = typer.Typer(
    help="Benchmarks that read like nccl-tests, mamf-finder, STREAM and cuda-samples nbody.",
    invoke_without_command=True,
)

DEVICE = typer.Option("auto", "--device", help="auto (GPU when usable), cuda or cpu.")
JSON_OUT = typer.Option(None, "--json", help="Write the report (results model) to this file.")
CSV_OUT = typer.Option(None, "--csv", help="Write every table row to this CSV file.")
WARMUP = typer.Option(None, "--warmup", "-w", min=0, help="Warm-up iterations (default by device).")
ITERATIONS = typer.Option(
    None, "--iterations", "-n", min=1, help="Timed iterations (default by device)."
)

MATMUL_SHAPES = {  # (preset, device type) -> m, n, k values whose every combination is timed
    ("quick", "cuda"): [4096, 8192],
    ("full", "cuda"): [2048, 4096, 6144, 8192, 12288, 16384],
    ("quick", "cpu"): [256, 512],
    ("full", "cpu"): [256, 512, 768, 1024],
}
DEFAULT_SIZES = {  # benchmark -> device type -> (begin, end, factor) in bytes
    "membw": {"cuda": ("256M", "2G", 2), "cpu": ("16M", "64M", 2)},
    "transfer": {"cuda": ("1M", "1G", 4), "cpu": ("1M", "64M", 8)},
    "collectives": {"cuda": ("8", "128M", 2), "cpu": ("8", "1M", 4)},
}
DEFAULT_ITERATIONS = {"cuda": (50, 100), "cpu": (2, 5)}  # (warm-up, timed): mamf-finder's on GPU
NBODY_BODIES = {"cuda": "65536,262144", "cpu": "1024,2048"}
NBODY_TILE_ELEMENTS = 2**24  # tile x bodies pairs held at once: bounded memory for any N


def _device(requested: str) -> torch.device:
    import torch

    from gpuaccept.probe.hardware import resolve_device_mode

    return torch.device(resolve_device_mode(requested))


def _iterations(device: torch.device, warmup: int | None, repeats: int | None) -> tuple[int, int]:
    default_warmup, default_repeats = DEFAULT_ITERATIONS[device.type]
    return (
        default_warmup if warmup is None else warmup,
        default_repeats if repeats is None else repeats,
    )


def _sweep(
    benchmark: str, device: torch.device, begin: str | None, end: str | None, factor: int | None
) -> list[int]:
    from gpuaccept.sweeps.sizes import parse_size, size_sweep

    default_begin, default_end, default_factor = DEFAULT_SIZES[benchmark][device.type]
    return size_sweep(
        parse_size(begin or default_begin, "-b/--begin"),
        parse_size(end or default_end, "-e/--end"),
        default_factor if factor is None else factor,
    )


@contextlib.contextmanager
def _progress(total: int, label: str) -> Iterator[Callable[[], None]]:
    """An advance() for a progress bar on a terminal; a no-op when output is a file or a pipe."""
    if not sys.stdout.isatty():
        yield lambda: None
        return
    from rich.progress import Progress

    with Progress(transient=True) as bar:
        task = bar.add_task(label, total=total)
        yield lambda: bar.advance(task)


def _refuse_torchrun(benchmark: str) -> None:
    from gpuaccept.distributed.local_ranks import refuse_external_launch

    try:
        refuse_external_launch()
    except InputError:
        raise InputError(
            f"`gpuaccept bench {benchmark}` measures one process's devices; only "
            f"`gpuaccept bench collectives` runs under torchrun"
        ) from None


def _finish(
    results: list[CheckResult],
    benchmark: str,
    device: torch.device,
    started: datetime,
    clock: float,
    json_path: Path | None,
    csv_path: Path | None,
    history: Path | None,
) -> None:
    from gpuaccept.cli.recording import record_run
    from gpuaccept.record.environment import capture_environment
    from gpuaccept.report.console import result_line
    from gpuaccept.report.tables import write_csv
    from gpuaccept.results import RunReport

    report = RunReport.completed(
        command="bench",
        level=benchmark,
        device_mode=device.type,
        started=started,
        monotonic_start=clock,
        checks=results,
        environment=capture_environment(),
    )
    if json_path is not None:
        from gpuaccept.atomic_write import write_text_atomically

        write_text_atomically(json_path, report.model_dump_json(indent=2) + "\n")
        typer.echo(f"[REPORT] {json_path}")
    if csv_path is not None:
        write_csv(report, csv_path)
        typer.echo(f"[REPORT] {csv_path}")
    record_run(report, history)
    typer.echo(result_line(report))
    if not report.passed:
        raise typer.Exit(1)


def _show(result: CheckResult) -> None:
    from gpuaccept.report.console import check_line
    from gpuaccept.report.tables import render_table

    table = render_table(result)
    if table:
        typer.echo(table)
    typer.echo(check_line(result))


def _check_outputs(*paths: Path | None) -> None:
    for path in paths:
        if path is not None and path.is_dir():
            raise InputError(f"{path}: is a directory, expected a file path")


class _Runs:
    """The benchmarks of one invocation, set up (and so validated) before any of them runs."""

    def __init__(self, device: torch.device) -> None:
        self.device = device
        self.planned: list[tuple[int, str, Callable[[Callable[[], None]], CheckResult]]] = []

    def add(self, steps: int, label: str, run: Callable[[Callable[[], None]], CheckResult]) -> None:
        self.planned.append((steps, label, run))

    def run(self) -> list[CheckResult]:
        results = []
        for steps, label, run in self.planned:
            typer.echo(f"[BENCH] {label}")
            with _progress(steps, label) as advance:
                results.append(run(advance))
            _show(results[-1])
        return results


def _plan_matmul(
    runs: _Runs,
    dtypes: list[str],
    m: str | None,
    n: str | None,
    k: str | None,
    preset: str,
    warmup: int | None,
    repeats: int | None,
) -> None:
    from gpuaccept.measure.matmul import unsupported_reason
    from gpuaccept.sweeps.common import run_matmul
    from gpuaccept.sweeps.sizes import int_range

    device = runs.device
    if (preset, device.type) not in MATMUL_SHAPES:
        raise InputError(f"--preset must be quick or full (got {preset!r})")
    for dtype in dtypes:
        reason = unsupported_reason(device, dtype)
        if reason is not None:
            raise InputError(f"--dtype {dtype} cannot run on {device}: {reason}")
    default = ",".join(map(str, MATMUL_SHAPES[(preset, device.type)]))
    ms, ns, ks = (int_range(v or default, f) for v, f in ((m, "--m"), (n, "--n"), (k, "--k")))
    shapes = [(a, b, c) for a in ms for b in ns for c in ks]
    w, r = _iterations(device, warmup, repeats)
    runs.add(
        len(shapes) * len(dtypes),
        f"matmul {','.join(dtypes)}: {len(shapes)} shape(s), {w} warm-up + {r} timed each, "
        f"L2 flushed between iterations on GPU",
        lambda advance: run_matmul(device, dtypes, shapes, w, r, advance),
    )


def _plan_membw(
    runs: _Runs,
    begin: str | None,
    end: str | None,
    factor: int | None,
    w: int | None,
    r: int | None,
) -> None:
    from gpuaccept.sweeps.common import run_membw

    sizes = _sweep("membw", runs.device, begin, end, factor)
    warmup, repeats = _iterations(runs.device, w, r)
    runs.add(
        len(sizes) * 4,
        f"membw: STREAM copy/scale/add/triad, arrays of {sizes[0]}..{sizes[-1]} bytes",
        lambda advance: run_membw(runs.device, sizes, warmup, repeats, advance),
    )


def _plan_transfer(
    runs: _Runs,
    begin: str | None,
    end: str | None,
    factor: int | None,
    w: int | None,
    r: int | None,
) -> None:
    from gpuaccept.sweeps.common import run_transfer

    sizes = _sweep("transfer", runs.device, begin, end, factor)
    warmup, repeats = _iterations(runs.device, w, r)
    runs.add(
        len(sizes) * (4 if runs.device.type == "cuda" else 2),
        f"transfer: h2d/d2h, pinned and pageable, {sizes[0]}..{sizes[-1]} bytes",
        lambda advance: run_transfer(runs.device, sizes, warmup, repeats, advance),
    )


def _plan_nbody(
    runs: _Runs,
    dtypes: list[str],
    bodies: str | None,
    tile: int | None,
    w: int | None,
    r: int | None,
) -> None:
    from gpuaccept.measure.nbody import NBODY_DTYPES
    from gpuaccept.sweeps.common import run_nbody
    from gpuaccept.sweeps.sizes import int_range

    for dtype in dtypes:
        if dtype not in NBODY_DTYPES:
            raise InputError(f"--dtype must be fp32 or fp64 for nbody (got {dtype!r})")
    counts = int_range(bodies or NBODY_BODIES[runs.device.type], "--bodies")
    if min(counts) < 2:
        raise InputError("--bodies: n-body needs at least 2 bodies")
    if tile is not None and tile < 1:
        raise InputError(f"--tile must be positive (got {tile})")
    chosen_tile = tile or max(1, NBODY_TILE_ELEMENTS // max(counts))
    warmup, repeats = _iterations(runs.device, w, r)
    warmup, repeats = min(warmup, 2), min(repeats, 10)  # one step is already N^2 work
    runs.add(
        len(counts) * len(dtypes),
        f"nbody {','.join(dtypes)}: {counts} bodies, tile {chosen_tile}",
        lambda advance: run_nbody(
            runs.device, dtypes, counts, chosen_tile, warmup, repeats, progress=advance
        ),
    )


def _run_planned(
    benchmark: str,
    device: str,
    json_path: Path | None,
    csv_path: Path | None,
    history: Path | None,
    no_history: bool,
    plan: Callable[[_Runs], None],
) -> None:
    """One benchmark command: refuse bad input up front, run, write the outputs, set the exit."""
    _refuse_torchrun(benchmark)
    _check_outputs(json_path, csv_path)
    target = history_target(history, no_history)
    started, clock = datetime.now(UTC), time.monotonic()
    runs = _Runs(_device(device))
    plan(runs)
    _finish(runs.run(), benchmark, runs.device, started, clock, json_path, csv_path, target)


def _default_matmul_dtype(device: torch.device) -> str:
    return "bf16" if device.type == "cuda" else "fp32"


@app.callback()
def bench(
    ctx: typer.Context,
    device: str = DEVICE,
    json_path: Path | None = JSON_OUT,
    csv_path: Path | None = CSV_OUT,
    history: Path | None = HISTORY,
    no_history: bool = NO_HISTORY,
) -> None:
    """Run every benchmark with its default sweep (or name one: see the commands below)."""
    if ctx.invoked_subcommand is not None:
        return
    _refuse_torchrun("")
    _check_outputs(json_path, csv_path)
    target = history_target(history, no_history)
    started, clock = datetime.now(UTC), time.monotonic()
    runs = _Runs(_device(device))
    _plan_matmul(runs, [_default_matmul_dtype(runs.device)], None, None, None, "quick", None, None)
    _plan_membw(runs, None, None, None, None, None)
    _plan_transfer(runs, None, None, None, None, None)
    results = runs.run()
    results.append(
        _run_collectives(
            runs.device, list(_collective_names()), None, None, None, None, None, True, None, None
        )
    )
    _show(results[-1])
    nbody_runs = _Runs(runs.device)
    _plan_nbody(nbody_runs, ["fp32"], None, None, None, None)
    results += nbody_runs.run()
    _finish(results, "all", runs.device, started, clock, json_path, csv_path, target)


@app.command("matmul")
def matmul(
    dtype: list[str] = typer.Option(
        [],
        "--dtype",
        help="fp64, fp32, tf32, bf16, fp16 or fp8 (repeatable; default bf16 on GPU, fp32 on CPU).",
    ),
    m: str | None = typer.Option(None, "--m", help="M values: N, N,M,... or START:STOP:STEP."),
    n: str | None = typer.Option(None, "--n", help="N values (same forms)."),
    k: str | None = typer.Option(None, "--k", help="K values (same forms)."),
    preset: str = typer.Option("quick", "--preset", help="quick or full shape sweep."),
    warmup: int | None = WARMUP,
    iterations: int | None = ITERATIONS,
    device: str = DEVICE,
    json_path: Path | None = JSON_OUT,
    csv_path: Path | None = CSV_OUT,
    history: Path | None = HISTORY,
    no_history: bool = NO_HISTORY,
) -> None:
    """Maximum achievable matmul TFLOPS over a sweep of shapes (mamf-finder style)."""
    _run_planned(
        "matmul",
        device,
        json_path,
        csv_path,
        history,
        no_history,
        lambda runs: _plan_matmul(
            runs,
            dtype or [_default_matmul_dtype(runs.device)],
            m,
            n,
            k,
            preset,
            warmup,
            iterations,
        ),
    )


BEGIN = typer.Option(None, "-b", "--begin", help="Smallest size: 8, 64K, 256M, 1G.")
END = typer.Option(None, "-e", "--end", help="Largest size.")
FACTOR = typer.Option(None, "-f", "--factor", help="Multiply the size by this each step.")


@app.command("membw")
def membw(
    begin: str | None = BEGIN,
    end: str | None = END,
    factor: int | None = FACTOR,
    warmup: int | None = WARMUP,
    iterations: int | None = ITERATIONS,
    device: str = DEVICE,
    json_path: Path | None = JSON_OUT,
    csv_path: Path | None = CSV_OUT,
    history: Path | None = HISTORY,
    no_history: bool = NO_HISTORY,
) -> None:
    """STREAM copy, scale, add and triad on device memory (GB/s = 10^9 B/s)."""
    _run_planned(
        "membw",
        device,
        json_path,
        csv_path,
        history,
        no_history,
        lambda runs: _plan_membw(runs, begin, end, factor, warmup, iterations),
    )


@app.command("transfer")
def transfer(
    begin: str | None = BEGIN,
    end: str | None = END,
    factor: int | None = FACTOR,
    warmup: int | None = WARMUP,
    iterations: int | None = ITERATIONS,
    device: str = DEVICE,
    json_path: Path | None = JSON_OUT,
    csv_path: Path | None = CSV_OUT,
    history: Path | None = HISTORY,
    no_history: bool = NO_HISTORY,
) -> None:
    """Host<->device copies (pinned and pageable) and a GPU-to-GPU matrix when there are several."""
    _run_planned(
        "transfer",
        device,
        json_path,
        csv_path,
        history,
        no_history,
        lambda runs: _plan_transfer(runs, begin, end, factor, warmup, iterations),
    )


@app.command("nbody")
def nbody(
    dtype: list[str] = typer.Option([], "--dtype", help="fp32 or fp64 (repeatable; default fp32)."),
    bodies: str | None = typer.Option(None, "--bodies", help="Body counts: N, N,M,... or a range."),
    tile: int | None = typer.Option(
        None, "--tile", help="Bodies per tile (default: bounded memory)."
    ),
    warmup: int | None = WARMUP,
    iterations: int | None = ITERATIONS,
    device: str = DEVICE,
    json_path: Path | None = JSON_OUT,
    csv_path: Path | None = CSV_OUT,
    history: Path | None = HISTORY,
    no_history: bool = NO_HISTORY,
) -> None:
    """All-pairs n-body: interactions/s and GFLOP/s (20 flops fp32, 30 fp64 per interaction)."""
    _run_planned(
        "nbody",
        device,
        json_path,
        csv_path,
        history,
        no_history,
        lambda runs: _plan_nbody(runs, dtype or ["fp32"], bodies, tile, warmup, iterations),
    )


def _collective_names() -> tuple[str, ...]:
    from gpuaccept.measure.collectives import COLLECTIVES

    return COLLECTIVES


def _run_collectives(
    device: torch.device,
    ops: list[str],
    begin: str | None,
    end: str | None,
    factor: int | None,
    warmup: int | None,
    iterations: int | None,
    check: bool,
    ranks: int | None,
    min_busbw: float | None,
) -> CheckResult:
    import os

    from gpuaccept.measure.collectives import SweepSpec, collective_sweep_rank
    from gpuaccept.sweeps.common import CollectiveRun, collectives_result

    unknown = sorted(set(ops) - set(_collective_names()))
    if unknown:
        raise InputError(f"--op {unknown[0]!r}: choose from {', '.join(_collective_names())}")
    sizes = _sweep("collectives", device, begin, end, factor)
    w = 5 if warmup is None else warmup
    n = 20 if iterations is None else iterations
    if ranks is not None and ranks < 1:
        raise InputError(f"--ranks must be at least 1 (got {ranks})")
    started = time.monotonic()
    specs = {op: SweepSpec(op, tuple(sizes), w, n, check) for op in ops}
    if int(os.environ.get("WORLD_SIZE", "1") or "1") > 1:
        from gpuaccept.distributed.torchrun import torchrun_process_group

        with torchrun_process_group(device.type) as (_, rank, world):
            import torch.distributed as dist

            rows = {op: collective_sweep_rank(rank, world, spec) for op, spec in specs.items()}
            backend = str(dist.get_backend())
        if rank != 0:
            raise typer.Exit(0)
    else:
        import torch

        from gpuaccept.distributed.local_ranks import run_ranks

        world = ranks or (torch.cuda.device_count() if device.type == "cuda" else 2)
        backend = "nccl" if device.type == "cuda" else "gloo"
        typer.echo(
            f"[BENCH] collectives {','.join(ops)}: {world} {backend} rank(s), "
            f"{sizes[0]}..{sizes[-1]} bytes, -w {w} -n {n}"
        )
        rows = {
            op: run_ranks(collective_sweep_rank, world, spec, 600.0, backend)[0]
            for op, spec in specs.items()
        }
    return collectives_result(CollectiveRun(rows, world, backend), min_busbw, started)


@app.command("collectives")
def collectives(
    op: list[str] = typer.Option(
        [],
        "--op",
        help="all_reduce, all_gather, reduce_scatter, broadcast (repeatable; default all).",
    ),
    begin: str | None = BEGIN,
    end: str | None = END,
    factor: int | None = FACTOR,
    warmup: int | None = typer.Option(None, "-w", "--warmup", min=0, help="Warm-up iterations."),
    iterations: int | None = typer.Option(
        None, "-n", "--iterations", min=1, help="Timed iterations per size."
    ),
    check: int = typer.Option(
        1, "-c", "--check", min=0, max=1, help="1: check results exactly (#wrong); 0: skip."
    ),
    ranks: int | None = typer.Option(
        None,
        "--ranks",
        help="Local ranks to start (default: every GPU; 2 on CPU). Under "
        "torchrun the launcher's ranks are used.",
    ),
    min_busbw: float | None = typer.Option(
        None,
        "--min-busbw",
        min=0,
        help="Fail when the average busbw (GB/s) is below this, like NCCL_TESTS_MIN_BW.",
    ),
    device: str = DEVICE,
    json_path: Path | None = JSON_OUT,
    csv_path: Path | None = CSV_OUT,
    history: Path | None = HISTORY,
    no_history: bool = NO_HISTORY,
) -> None:
    """nccl-tests style sweeps: time, algbw, busbw and #wrong, out-of-place and in-place."""
    _check_outputs(json_path, csv_path)
    target = history_target(history, no_history)
    started, clock = datetime.now(UTC), time.monotonic()
    run_device = _device(device)
    result = _run_collectives(
        run_device,
        op or list(_collective_names()),
        begin,
        end,
        factor,
        warmup,
        iterations,
        bool(check),
        ranks,
        min_busbw,
    )
    _show(result)
    _finish([result], "collectives", run_device, started, clock, json_path, csv_path, target)
