"""What every `gpuaccept bench` command shares: options, defaults, planning, output and exit.

Every argument is checked before the first benchmark starts, so a bad flag never costs a run.
"""

from __future__ import annotations

import contextlib
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from gpuaccept.cli.recording import history_path, history_target
from gpuaccept.cli.signals import interrupts_as_exceptions
from gpuaccept.errors import InputError, Interrupted

if TYPE_CHECKING:
    import torch

    from gpuaccept.results import CheckResult
    from gpuaccept.store.history import HistoryLocation

DEVICE = typer.Option(
    "auto", "--device", metavar="[auto|cuda|cpu]", help="auto (GPU when usable), cuda or cpu."
)
JSON_OUT = typer.Option(None, "--json", help="Write the report (results model) to this file.")
CSV_OUT = typer.Option(None, "--csv", help="Write every table row to this CSV file.")
WARMUP = typer.Option(None, "--warmup", "-w", min=0, help="Warm-up iterations (default by device).")
ITERATIONS = typer.Option(
    None, "--iterations", "-n", min=1, help="Timed iterations (default by device)."
)

DEFAULT_SIZES = {  # benchmark -> device type -> (begin, end, factor) in bytes
    "membw": {"cuda": ("256M", "2G", 2), "cpu": ("16M", "64M", 2)},
    # 256 MiB is past where a PCIe link reaches its plateau; 1 GiB pageable copies (about 0.15 s
    # each at 150 timed repeats) took the default sweep over a minute on an H100
    "transfer": {"cuda": ("1M", "256M", 4), "cpu": ("1M", "64M", 8)},
    "collectives": {"cuda": ("8", "128M", 2), "cpu": ("8", "1M", 4)},
}
DEFAULT_ITERATIONS = {"cuda": (50, 100), "cpu": (2, 5)}  # (warm-up, timed): mamf-finder's on GPU


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


LOG_PROGRESS_SECONDS = 10.0


@contextlib.contextmanager
def progress_bar(total: int, label: str) -> Iterator[Callable[[], None]]:
    """An advance() for each finished step: a Rich bar on a terminal; in a job log or a pipe, a
    short line at most every LOG_PROGRESS_SECONDS, so a long sweep is never silent and a short
    one adds nothing between its header and its table."""
    if not sys.stdout.isatty():
        done, started, said = [0], time.monotonic(), [time.monotonic()]
        name = label.split(":", 1)[0]

        def advance() -> None:
            done[0] += 1
            now = time.monotonic()
            if now - said[0] >= LOG_PROGRESS_SECONDS and done[0] < total:
                said[0] = now
                typer.echo(f"[BENCH] {name}: {done[0]} of {total} steps, {now - started:.0f} s")

        yield advance
        return
    from rich.progress import Progress

    with Progress(transient=True) as bar:
        task = bar.add_task(label, total=total)
        yield lambda: bar.advance(task)


def refuse_torchrun(benchmark: str) -> None:
    from gpuaccept.distributed.local_ranks import refuse_external_launch

    try:
        refuse_external_launch()
    except InputError:
        raise InputError(
            f"`gpuaccept bench {benchmark}` measures one process's devices; only "
            f"`gpuaccept bench collectives` runs under torchrun"
        ) from None


def finish(
    session: BenchSession,
    benchmark: str,
    device: torch.device,
    started: datetime,
    clock: float,
    json_path: Path | None,
    csv_path: Path | None,
    history: HistoryLocation | None,
) -> None:
    from gpuaccept.cli.recording import DropPolicy, compared_with_history, record_run
    from gpuaccept.record.environment import capture_environment
    from gpuaccept.report.console import result_line
    from gpuaccept.report.tables import write_csv
    from gpuaccept.results import RunReport

    interrupted = session.interrupted
    report = RunReport.completed(
        command="bench",
        level=benchmark,
        device_mode=device.type,
        started=started,
        monotonic_start=clock,
        checks=session.results,
        environment=capture_environment(),
        interrupted_by=None if interrupted is None else interrupted.signum,
        interrupted_check=None if interrupted is None else session.current,
    )
    # a benchmark warns on a drop (the default tolerance); accept and train can also fail on one
    report = compared_with_history(report, history, DropPolicy(None, fail=False))
    if json_path is not None:
        from gpuaccept.output_files import write_text_atomically

        write_text_atomically(json_path, report.model_dump_json(indent=2) + "\n")
        typer.echo(f"[REPORT] {json_path}")
    if csv_path is not None:
        write_csv(report, csv_path)
        typer.echo(f"[REPORT] {csv_path}")
    record_run(report, history)
    typer.echo(result_line(report))
    if report.verdict.exit_code:
        raise typer.Exit(report.verdict.exit_code)


def show(result: CheckResult) -> None:
    from gpuaccept.report.console import check_line
    from gpuaccept.report.tables import render_table

    table = render_table(result)
    if table:
        typer.echo(table)
    typer.echo(check_line(result))


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


@dataclass
class BenchSession:
    """What one `bench` invocation has measured so far, and the benchmark under way: what a
    SIGINT/SIGTERM leaves behind is still reported (the one under way as interrupted)."""

    results: list[CheckResult] = field(default_factory=list)
    current: str | None = None
    interrupted: Interrupted | None = None

    def measure(self, name: str, work: Callable[[], CheckResult]) -> CheckResult:
        self.current = name
        result = work()
        self.results.append(result)
        self.current = None
        return result


@contextlib.contextmanager
def interruptible() -> Iterator[BenchSession]:
    """A session whose interruption ends the measuring, not the command: the caller still
    writes the report and exits with the verdict's code (130/143)."""
    session = BenchSession()
    try:
        with interrupts_as_exceptions():
            yield session
    except (Interrupted, KeyboardInterrupt) as error:
        session.interrupted = error if isinstance(error, Interrupted) else Interrupted(2)
        typer.echo(f"[BENCH] {session.interrupted}: stopped, writing what finished")
        from gpuaccept.results import CheckResult, Status

        if session.current is not None:
            session.results.append(
                CheckResult(
                    name=session.current,
                    area="BENCH",
                    status=Status.ERROR,
                    message=str(session.interrupted),
                )
            )


class PlannedRuns:
    """The benchmarks of one invocation, set up (and so validated) before any of them runs."""

    def __init__(self, device: torch.device) -> None:
        self.device = device
        self.planned: list[tuple[int, str, Callable[[Callable[[], None]], CheckResult]]] = []

    def add(self, steps: int, label: str, run: Callable[[Callable[[], None]], CheckResult]) -> None:
        self.planned.append((steps, label, run))

    def run(self, session: BenchSession) -> list[CheckResult]:
        """Run every planned benchmark into `session` (its name: the label's first word)."""
        done = []
        for steps, label, run in self.planned:
            typer.echo(f"[BENCH] {label}")

            def work(
                steps: int = steps,
                label: str = label,
                run: Callable[[Callable[[], None]], CheckResult] = run,
            ) -> CheckResult:
                with progress_bar(steps, label) as advance, _allocation_failures(label):
                    return run(advance)

            done.append(session.measure(label.split()[0].rstrip(":"), work))
            show(done[-1])
        return done


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


def _defaults(benchmark: str, part: int) -> str:
    gpu, cpu = (DEFAULT_SIZES[benchmark][kind][part] for kind in ("cuda", "cpu"))
    return f"default {gpu} on a GPU, {cpu} on the CPU"


def sweep_options(benchmark: str) -> tuple[Any, Any, Any]:
    """-b/-e/-f for one benchmark's sweep, as nccl-tests takes them, with its defaults shown."""
    return (
        typer.Option(
            None,
            "-b",
            "--begin",
            metavar="SIZE",
            help=f"Smallest size: 8, 64K, 256M, 1G ({_defaults(benchmark, 0)}).",
        ),
        typer.Option(
            None, "-e", "--end", metavar="SIZE", help=f"Largest size ({_defaults(benchmark, 1)})."
        ),
        typer.Option(
            None,
            "-f",
            "--factor",
            metavar="N",
            help=f"Multiply the size by this each step ({_defaults(benchmark, 2)}).",
        ),
    )


def run_planned(
    benchmark: str,
    device: str,
    json_path: Path | None,
    csv_path: Path | None,
    history: str | None,
    no_history: bool,
    plan: Callable[[PlannedRuns], None],
) -> None:
    """One benchmark command: refuse bad input up front, run, write the outputs, set the exit."""
    refuse_torchrun(benchmark)
    check_outputs(json_path, csv_path, history_path(history, no_history))
    target = history_target(history, no_history)
    started, clock = datetime.now(UTC), time.monotonic()
    runs = PlannedRuns(resolve_device(device))
    plan(runs)
    with interruptible() as session:
        runs.run(session)
    finish(session, benchmark, runs.device, started, clock, json_path, csv_path, target)
