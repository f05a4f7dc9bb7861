"""What every `gpuaccept bench` command shares, as library calls: defaults, the device, the size
sweeps, the refusals made before the first benchmark starts, the session an interruption leaves
behind, and the run's end (history, JSON, CSV, verdict).

Every argument is checked before the first benchmark starts, so a bad flag never costs a run.
Lines go through `out`; a sweep's progress through `progress` (the CLI draws its bar, a caller
without a screen passes nothing).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

from gpuaccept.commands.options import HISTORY, NO_HISTORY, Opt, check_bounds, device_opt, opt
from gpuaccept.commands.recording import history_path, history_target
from gpuaccept.errors import InputError, Interrupted

if TYPE_CHECKING:
    import torch

    from gpuaccept.commands.output import Output
    from gpuaccept.results import CheckResult, RunReport
    from gpuaccept.store.history import HistoryLocation

DEFAULT_SIZES = {  # benchmark -> device type -> (begin, end, factor) in bytes
    "membw": {"cuda": ("256M", "2G", 2), "cpu": ("16M", "64M", 2)},
    # 256 MiB is past where a PCIe link reaches its plateau; 1 GiB pageable copies (about 0.15 s
    # each at 150 timed repeats) took the default sweep over a minute on an H100
    "transfer": {"cuda": ("1M", "256M", 4), "cpu": ("1M", "64M", 8)},
    "collectives": {"cuda": ("8", "128M", 2), "cpu": ("8", "1M", 4)},
}
DEFAULT_ITERATIONS = {"cuda": (50, 100), "cpu": (2, 5)}  # (warm-up, timed): mamf-finder's on GPU

Advance = Callable[[], None]
ProgressBar = Callable[[int, str], AbstractContextManager[Advance]]
"""`progress(steps, label)`: a context whose value is called once per finished step. How it
looks (a bar on a terminal, a line now and then in a job log) is the caller's business."""


@contextlib.contextmanager
def no_progress(total: int, label: str) -> Iterator[Advance]:
    """Progress nobody watches: a library caller's default."""
    yield lambda: None


def _defaults(benchmark: str, part: int) -> str:
    gpu, cpu = (DEFAULT_SIZES[benchmark][kind][part] for kind in ("cuda", "cpu"))
    return f"default {gpu} on a GPU, {cpu} on the CPU"


def sweep_opts(benchmark: str) -> tuple[Opt, Opt, Opt]:
    """-b/-e/-f for one benchmark's sweep, as nccl-tests takes them, with its defaults shown."""
    return (
        opt(
            ("-b", "--begin"),
            "SIZE",
            f"Smallest size: 8, 64K, 256M, 1G ({_defaults(benchmark, 0)}).",
        ),
        opt(("-e", "--end"), "SIZE", f"Largest size ({_defaults(benchmark, 1)})."),
        opt(
            ("-f", "--factor"),
            "N",
            f"Multiply the size by this each step ({_defaults(benchmark, 2)}).",
        ),
    )


WARMUP = opt(("--warmup", "-w"), text="Warm-up iterations (default by device).", least=0)
ITERATIONS = opt(("--iterations", "-n"), text="Timed iterations (default by device).", least=1)


@dataclass(frozen=True, kw_only=True)
class BenchRequest:
    """What every benchmark command takes: where it runs and where its run goes. Alone, it is
    the request of `gpuaccept bench` without a benchmark named (every one, default sweeps)."""

    device: Annotated[str, device_opt("auto (GPU when usable), cuda or cpu.")] = "auto"
    json_path: Annotated[
        Path | None, opt("--json", text="Write the report (results model) to this file.")
    ] = None
    csv_path: Annotated[
        Path | None, opt("--csv", text="Write every table row to this CSV file.")
    ] = None
    # an SQLite file or a PostgreSQL URI; None: the default history
    history: Annotated[str | None, HISTORY] = None
    no_history: Annotated[bool, NO_HISTORY] = False

    def __post_init__(self) -> None:
        check_bounds(self)


@dataclass(frozen=True, kw_only=True)
class SizeSweepRequest(BenchRequest):
    """A sweep of sizes as nccl-tests takes it: -b, -e as 8, 64K, 256M, 1G and -f (None: the
    benchmark's default on this device), iterations (None: the device's defaults). Each
    benchmark declares their options, whose help says its own defaults."""

    begin: str | None = None
    end: str | None = None
    factor: int | None = None
    warmup: int | None = None
    iterations: int | None = None


@dataclass(frozen=True)
class BenchResult:
    """A benchmark command's outcome: its exit code and the report it wrote."""

    exit_code: int
    # None where nothing was measured: nbody --explain, a torchrun rank other than 0 (rank 0
    # alone reports)
    report: RunReport | None


def resolve_device(requested: str) -> torch.device:
    import torch

    from gpuaccept.probe.hardware import resolve_device_mode

    return torch.device(resolve_device_mode(requested))


def iterations_for(
    device: torch.device, warmup: int | None, repeats: int | None
) -> tuple[int, int]:
    default_warmup, default_repeats = DEFAULT_ITERATIONS[device.type]
    return (
        default_warmup if warmup is None else warmup,
        default_repeats if repeats is None else repeats,
    )


def sweep_sizes(
    benchmark: str, device: torch.device, begin: str | None, end: str | None, factor: int | None
) -> list[int]:
    from gpuaccept.sweeps.sizes import parse_size, size_sweep

    default_begin, default_end, default_factor = DEFAULT_SIZES[benchmark][device.type]
    return size_sweep(
        parse_size(begin or default_begin, "-b/--begin"),
        parse_size(end or default_end, "-e/--end"),
        default_factor if factor is None else factor,
    )


def refuse_torchrun(benchmark: str) -> None:
    from gpuaccept.distributed.local_ranks import refuse_external_launch

    try:
        refuse_external_launch()
    except InputError:
        raise InputError(
            f"`gpuaccept bench {benchmark}` measures one process's devices; only "
            f"`gpuaccept bench collectives` runs under torchrun"
        ) from None


def check_outputs(
    json_path: Path | None, csv_path: Path | None, history: Path | None = None
) -> None:
    """Refuse, before any benchmark runs, an output that could not be written afterwards, or
    that is another output (the history included)."""
    from gpuaccept.output_files import check_output_file, refuse_collisions

    for path, flag in ((json_path, "--json"), (csv_path, "--csv")):
        if path is not None:
            check_output_file(path, flag)
    refuse_collisions({"--history": history, "--json": json_path, "--csv": csv_path})


@dataclass(frozen=True)
class Prepared:
    """A benchmark command past its refusals: the device it runs on and the history it goes to."""

    benchmark: str  # the report's level: matmul, membw, ..., "all" for every one
    device: torch.device
    history: HistoryLocation | None
    started: datetime
    clock: float  # time.monotonic() at the start


def prepare(
    benchmark: str, request: BenchRequest, out: Output, *, one_process: str | None
) -> Prepared:
    """The refusals every benchmark makes before it measures anything, in this order: a
    launcher it cannot run under (`one_process`: the name the refusal gives; None for
    collectives, which runs under torchrun), outputs that could not be written, a history that
    cannot be; then the device."""
    if one_process is not None:
        refuse_torchrun(one_process)
    check_outputs(
        request.json_path, request.csv_path, history_path(request.history, request.no_history)
    )
    target = history_target(request.history, request.no_history, out)
    started, clock = datetime.now(UTC), time.monotonic()
    return Prepared(benchmark, resolve_device(request.device), target, started, clock)


def show(result: CheckResult, out: Output) -> None:
    """A finished benchmark's table and its one line."""
    from gpuaccept.report.console import check_line
    from gpuaccept.report.tables import render_table

    table = render_table(result)
    if table:
        out.line(table)
    out.line(check_line(result))


@dataclass
class BenchSession:
    """What one `bench` invocation has measured so far, and the benchmark under way: what a
    SIGINT/SIGTERM leaves behind is still reported (the one under way as interrupted)."""

    results: list[CheckResult] = field(default_factory=list)
    current: str | None = None
    interrupted: Interrupted | None = None

    def measure(self, name: str, work: Callable[[], CheckResult | None]) -> CheckResult | None:
        """`work`'s result, kept (None: a torchrun rank that measured for rank 0 to report)."""
        self.current = name
        result = work()
        if result is not None:
            self.results.append(result)
        self.current = None
        return result


@contextlib.contextmanager
def interruptible(out: Output) -> Iterator[BenchSession]:
    """A session whose interruption ends the measuring, not the command: the caller still
    writes the report and its verdict's code (130/143) is the command's. The signal arrives as
    `Interrupted` where the caller turns signals into exceptions (the CLI does), else as
    Ctrl-C's KeyboardInterrupt."""
    session = BenchSession()
    try:
        yield session
    except (Interrupted, KeyboardInterrupt) as error:
        from gpuaccept import interrupts
        from gpuaccept.results import CheckResult, Status

        interrupts.clear()  # handled here: the report says it, and a later run starts afresh
        session.interrupted = error if isinstance(error, Interrupted) else Interrupted(2)
        out.line(f"[BENCH] {session.interrupted}: stopped, writing what finished")
        if session.current is not None:
            session.results.append(
                CheckResult(
                    name=session.current,
                    area="BENCH",
                    status=Status.ERROR,
                    message=str(session.interrupted),
                )
            )


Run = Callable[[Advance], "CheckResult"]


class PlannedRuns:
    """The benchmarks of one invocation, set up (and so validated) before any of them runs."""

    def __init__(self, device: torch.device) -> None:
        self.device = device
        self.planned: list[tuple[int, str, Run]] = []

    def add(self, steps: int, label: str, run: Run) -> None:
        self.planned.append((steps, label, run))

    def run(self, session: BenchSession, out: Output, progress: ProgressBar) -> None:
        """Run every planned benchmark into `session` (its name: the label's first word)."""
        for steps, label, run in self.planned:
            out.line(f"[BENCH] {label}")

            def work(steps: int = steps, label: str = label, run: Run = run) -> CheckResult:
                with progress(steps, label) as advance, _allocation_failures(label):
                    return run(advance)

            result = session.measure(label.split()[0].rstrip(":"), work)
            if result is not None:
                show(result, out)


@contextlib.contextmanager
def _allocation_failures(label: str) -> Iterator[None]:
    """A size the device (or host) cannot hold is the user's input, not a crash: one line."""
    try:
        yield
    except (MemoryError, RuntimeError) as error:
        text = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        lowered = text.lower()
        if not isinstance(error, MemoryError) and not any(
            word in lowered for word in ("out of memory", "alloc", "cannot allocate")
        ):
            raise
        raise InputError(f"{label}: the sizes asked for do not fit in memory ({text})") from None


def finish(
    session: BenchSession, prepared: Prepared, request: BenchRequest, out: Output
) -> BenchResult:
    """The run's report: held against the node's past, written (--json, --csv), recorded, its
    verdict said; an interrupted run's too (its code 128 + the signal)."""
    from gpuaccept.commands.recording import DropPolicy, compared_with_history, record_run
    from gpuaccept.record.environment import capture_environment
    from gpuaccept.report.console import result_line
    from gpuaccept.report.tables import write_csv
    from gpuaccept.results import RunReport

    interrupted = session.interrupted
    report = RunReport.completed(
        command="bench",
        level=prepared.benchmark,
        device_mode=prepared.device.type,
        started=prepared.started,
        monotonic_start=prepared.clock,
        checks=session.results,
        environment=capture_environment(),
        interrupted_by=None if interrupted is None else interrupted.signum,
        interrupted_check=None if interrupted is None else session.current,
    )
    # a benchmark warns on a drop (the default tolerance); accept and train can also fail on one
    report = compared_with_history(report, prepared.history, DropPolicy(None, fail=False), out)
    if request.json_path is not None:
        from gpuaccept.output_files import write_text_atomically

        write_text_atomically(request.json_path, report.model_dump_json(indent=2) + "\n")
        out.line(f"[REPORT] {request.json_path}")
    if request.csv_path is not None:
        write_csv(report, request.csv_path)
        out.line(f"[REPORT] {request.csv_path}")
    record_run(report, prepared.history, out)
    out.line(result_line(report))
    return BenchResult(report.verdict.exit_code, report)


def run_planned(
    benchmark: str,
    request: BenchRequest,
    out: Output,
    progress: ProgressBar,
    plan: Callable[[PlannedRuns], None],
) -> BenchResult:
    """One single-process benchmark: refuse bad input up front, plan (validating every
    argument), run, write the outputs; its exit code."""
    prepared = prepare(benchmark, request, out, one_process=benchmark)
    runs = PlannedRuns(prepared.device)
    plan(runs)
    with interruptible(out) as session:
        runs.run(session, out, progress)
    return finish(session, prepared, request, out)
