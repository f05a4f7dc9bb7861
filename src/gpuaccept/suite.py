"""Chooses the checks for a level, runs each in its own process with a timeout, gathers results.

A check that raises, crashes its process or outlives its timeout becomes that check's ERROR;
the suite goes on, so a report is always written. Each check process leads its own process
group, so a timeout also kills the rank processes a collective check started.
"""

from __future__ import annotations

import contextlib
import importlib
import multiprocessing
import os
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

from gpuaccept.checks.context import CheckContext, Settings
from gpuaccept.errors import InputError
from gpuaccept.results import CheckResult, RunReport, Status

LEVELS = ("quick", "standard", "full")
MiB = 1024**2
GiB = 1024**3


@dataclass(frozen=True)
class CheckSpec:
    name: str
    area: str
    target: str  # "module:function" taking a CheckContext, returning a CheckResult
    levels: frozenset[str]
    needs_device: bool = True  # measures a device: pointless when expected GPUs are missing


_ALL = frozenset(LEVELS)
_STANDARD_UP = frozenset({"standard", "full"})

CHECKS: tuple[CheckSpec, ...] = (
    CheckSpec("inventory", "INVENTORY", "gpuaccept.checks.inventory:run", _ALL, False),
    CheckSpec("stack", "STACK", "gpuaccept.checks.stack:run", _ALL, False),
    CheckSpec("health", "HEALTH", "gpuaccept.checks.health:run", _ALL, False),
    CheckSpec("compute", "COMPUTE", "gpuaccept.checks.compute:run", _ALL),
    CheckSpec("memory", "MEMORY", "gpuaccept.checks.memory:run", _STANDARD_UP),
    CheckSpec("transfer", "TRANSFER", "gpuaccept.checks.transfer:run", _STANDARD_UP),
    CheckSpec("train", "TRAIN", "gpuaccept.checks.train:run", _ALL),
    CheckSpec("collectives", "COLLECTIVES", "gpuaccept.checks.collectives:run", _ALL),
    CheckSpec("ddp", "DDP", "gpuaccept.checks.ddp:run", _STANDARD_UP),
)

DEFAULT_TIMEOUT_SECONDS = {"quick": 180.0, "standard": 900.0, "full": 3600.0}

_GPU_QUICK = Settings(
    matmul_size=8192,
    matmul_warmup=10,
    matmul_repeats=30,
    matmul_dtypes=("bf16", "fp32"),
    consistency_dtypes=("fp32", "bf16"),
    consistency_size=4096,
    consistency_iterations=20,
    sustained_seconds=0.0,
    membw_bytes=1 * GiB,
    membw_repeats=20,
    pattern_fraction=0.0,
    pattern_max_bytes=0,
    transfer_bytes=256 * MiB,
    transfer_repeats=10,
    smoke_samples=65536,
    smoke_epochs=1,
    smoke_batch_size=256,
    smoke_max_loss_ratio=0.5,
    allreduce_bytes=256 * MiB,
    allreduce_check_iterations=2,
    allreduce_repeats=20,
    ddp_epochs=1,
    rank_timeout_seconds=120.0,
)
_CPU_QUICK = Settings(
    matmul_size=512,
    matmul_warmup=2,
    matmul_repeats=5,
    matmul_dtypes=("fp32", "fp64"),
    consistency_dtypes=("fp32",),
    consistency_size=256,
    consistency_iterations=10,
    sustained_seconds=0.0,
    membw_bytes=32 * MiB,
    membw_repeats=5,
    pattern_fraction=0.0,
    pattern_max_bytes=0,
    transfer_bytes=32 * MiB,
    transfer_repeats=5,
    smoke_samples=4096,
    smoke_epochs=1,
    smoke_batch_size=64,
    smoke_max_loss_ratio=0.5,
    allreduce_bytes=1 * MiB,
    allreduce_check_iterations=2,
    allreduce_repeats=10,
    ddp_epochs=1,
    rank_timeout_seconds=60.0,
)


def level_settings(level: str, device_mode: str) -> Settings:
    """The sizes and durations of a level; the CPU twin runs the same logic on smaller work."""
    if level not in LEVELS:
        raise InputError(f"--level must be one of {', '.join(LEVELS)} (got {level!r})")
    base = _CPU_QUICK if device_mode == "cpu" else _GPU_QUICK
    if level == "quick":
        return base
    gpu = device_mode != "cpu"
    standard = replace(
        base,
        matmul_repeats=base.matmul_repeats * 2,
        matmul_dtypes=("bf16", "fp16", "tf32", "fp32", "fp64") if gpu else ("fp32", "fp64", "bf16"),
        consistency_iterations=base.consistency_iterations * 5,
        smoke_epochs=2,
        ddp_epochs=2,
    )
    if level == "standard":
        return standard
    return replace(
        standard,
        consistency_size=base.matmul_size,
        consistency_iterations=2000 if gpu else 50,
        sustained_seconds=60.0 if gpu else 6.0,
        pattern_fraction=0.9 if gpu else 1.0,
        pattern_max_bytes=(1024 * GiB) if gpu else 256 * MiB,
        smoke_epochs=5,
        ddp_epochs=5,
        allreduce_check_iterations=20,
        allreduce_repeats=base.allreduce_repeats * 5,
    )


def select_checks(level: str, only: list[str], skip: list[str]) -> list[CheckSpec]:
    """The checks of a level, narrowed by --only and --skip (unknown names are input errors)."""
    if level not in LEVELS:
        raise InputError(f"--level must be one of {', '.join(LEVELS)} (got {level!r})")
    known = {spec.name for spec in CHECKS}
    for flag, names in (("--only", only), ("--skip", skip)):
        unknown = sorted(set(names) - known)
        if unknown:
            raise InputError(
                f"{flag}: unknown check {', '.join(unknown)} (known: {', '.join(sorted(known))})"
            )
    if only:
        return [spec for spec in CHECKS if spec.name in only and spec.name not in skip]
    return [spec for spec in CHECKS if level in spec.levels and spec.name not in skip]


def _check_process(target: str, context: CheckContext, connection: Any) -> None:
    os.setsid()  # lead a process group, so a timeout can kill the ranks this check starts
    try:
        module, function = target.split(":")
        check: Callable[[CheckContext], CheckResult] = getattr(
            importlib.import_module(module), function
        )
        connection.send(("result", check(context)))
    except BaseException as error:
        connection.send(("error", f"{type(error).__name__}: {error}"))
    finally:
        connection.close()


def run_check_isolated(
    spec: CheckSpec, context: CheckContext, timeout_seconds: float
) -> CheckResult:
    """Run one check in a fresh process; any way it can go wrong becomes an ERROR result."""
    started = time.monotonic()
    spawn = multiprocessing.get_context("spawn")
    receiver, sender = spawn.Pipe(duplex=False)
    process = spawn.Process(target=_check_process, args=(spec.target, context, sender))
    process.start()
    sender.close()
    outcome: tuple[str, Any] | None = None
    # poll() also returns early when the process dies (the pipe reaches EOF), so the timeout is
    # told from poll() itself, not from an exit code that may not have been reaped yet.
    timed_out = not receiver.poll(timeout_seconds)
    try:
        if not timed_out:
            outcome = receiver.recv()
    except EOFError:
        outcome = None  # the process died before sending anything
    finally:
        _kill_group(process)
        receiver.close()
    duration = time.monotonic() - started

    def error(message: str) -> CheckResult:
        return CheckResult(
            name=spec.name,
            area=spec.area,
            status=Status.ERROR,
            message=message,
            duration_seconds=duration,
        )

    if outcome is None:
        if timed_out:
            return error(f"timed out after {timeout_seconds:g} s")
        code = process.exitcode
        how = f"signal {-code}" if code is not None and code < 0 else f"exit code {code}"
        return error(f"check process died ({how}) before reporting a result")
    kind, value = outcome
    if kind == "error":
        return error(f"the check raised {value}")
    result: CheckResult = value
    return result.model_copy(update={"duration_seconds": duration})


def _kill_group(process: Any) -> None:
    process.join(timeout=2)
    if process.pid is not None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, signal.SIGKILL)
    process.join(timeout=10)


def skipped(spec: CheckSpec, reason: str) -> CheckResult:
    return CheckResult(name=spec.name, area=spec.area, status=Status.SKIP, message=reason)


def run_suite(
    specs: list[CheckSpec],
    context: CheckContext,
    timeout_seconds: float,
    on_result: Callable[[CheckResult], None] | None = None,
) -> list[CheckResult]:
    """Run `specs` in order; when expected GPUs are missing, device checks are skipped."""
    missing_gpus = context.cpu_mode and context.expected is not None and context.expected.count > 0
    results = []
    for spec in specs:
        if missing_gpus and spec.needs_device:
            result = skipped(spec, "GPUs were expected but none is usable: nothing to measure")
        else:
            result = run_check_isolated(spec, context, timeout_seconds)
        results.append(result)
        if on_result is not None:
            on_result(result)
    return results


def run_acceptance(
    specs: list[CheckSpec],
    context: CheckContext,
    timeout_seconds: float,
    environment: dict[str, Any],
    on_result: Callable[[CheckResult], None] | None = None,
) -> RunReport:
    """Run the checks and gather them, with the environment capture, into one RunReport."""
    started = datetime.now(UTC)
    clock = time.monotonic()
    results = run_suite(specs, context, timeout_seconds, on_result)
    return RunReport.completed(
        command="accept",
        level=context.level,
        device_mode=context.device_mode,
        started=started,
        monotonic_start=clock,
        checks=results,
        environment=environment,
    )
