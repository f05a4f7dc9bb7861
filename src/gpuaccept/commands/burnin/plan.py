"""A burn-in's request read and checked before any work: every input that could be wrong is
refused here in one line (exit 2), then the workers' server is started and the job is planned.

Its refusals come in the order the command has always given them (the node's settings first,
then the values, then the files), so a request with two mistakes names the same one it did.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gpuaccept.commands.burnin.request import BurnInRequest
from gpuaccept.errors import InputError

if TYPE_CHECKING:
    from gpuaccept.actions import ActionRules
    from gpuaccept.burnin.checkpoint import CheckpointLock
    from gpuaccept.burnin.plan import BurnInProgress
    from gpuaccept.burnin.run import BurnInSettings
    from gpuaccept.commands.output import Output
    from gpuaccept.store.history import HistoryLocation

# The CPU twin's workers share the machine's cores and memory: equal workers measured ±15% apart
# in the memory windows on the 2-core development machine (GEMMs within 2%), and 26.8% apart in
# CI while the rest of the suite ran beside them, so its default tolerance is 50%, as the CPU
# twins' drop tolerance against the history is (compare/self_comparison.py).
CPU_STRAGGLER_TOLERANCE_PERCENT = 50.0


@dataclass(frozen=True)
class BurnInJob:
    """Everything a burn-in needs, checked before anything runs."""

    settings: BurnInSettings
    progress: BurnInProgress
    names: dict[str, str]
    report_dir: Path | None
    junit: Path | None
    history_path: HistoryLocation | None
    checkpoint_exit_code: int | None = None
    lock: CheckpointLock | None = None  # held until the process ends
    rules: ActionRules | None = None  # the site's action tables (--rules); None: built-in


def plan(request: BurnInRequest, out: Output) -> BurnInJob:
    """The job `request` asks for, or an InputError (EnvironmentProblem for a GPU asked for and
    not there) naming the first thing wrong, before any work."""
    from gpuaccept.actions import load_rules
    from gpuaccept.burnin.floors import reference_floors
    from gpuaccept.burnin.judging import DEFAULT_STRAGGLER_TOLERANCE_PERCENT
    from gpuaccept.burnin.plan import (
        DEFAULT_WINDOW_SECONDS,
        BurnInPlan,
        BurnInProgress,
        parse_duration,
    )
    from gpuaccept.burnin.run import BurnInSettings
    from gpuaccept.commands.recording import history_path, history_target
    from gpuaccept.output_files import check_output_directory, check_output_file, refuse_collisions
    from gpuaccept.probe.hardware import (
        check_nvml_init_timeout_setting,
        list_cuda_gpus,
        resolve_device_mode,
    )
    from gpuaccept.probe.sysfs import check_sysfs_root_setting
    from gpuaccept.references import load_shipped_references

    r = request
    check_sysfs_root_setting()  # the ports' counters are read around every window
    check_nvml_init_timeout_setting()  # the GPUs' health is read around every window
    duration_seconds = parse_duration(r.duration, "--duration")
    window_seconds = (
        min(DEFAULT_WINDOW_SECONDS, duration_seconds)
        if r.window is None
        else parse_duration(r.window, "--window")
    )
    rotation = None
    if r.schedule is not None:
        rotation = [name.strip() for name in r.schedule.split(",")]
        if not all(rotation):
            raise InputError(f"--schedule {r.schedule!r}: an empty stressor name")
    if r.straggler_tolerance is not None and not (
        math.isfinite(r.straggler_tolerance) and 0 < r.straggler_tolerance < 100
    ):
        raise InputError(
            f"--straggler-tolerance {r.straggler_tolerance:g}: give a percentage above 0 and "
            "below 100"
        )
    _check_ranges(r)
    if r.checkpoint_exit_code is not None and r.checkpoint is None:
        raise InputError("--checkpoint-exit-code needs --checkpoint")
    if (r.checkpoint_every is None) != (r.checkpoint_exit_code is None):
        raise InputError("--checkpoint-every and --checkpoint-exit-code go together")
    if r.report_dir is not None:
        check_output_directory(r.report_dir, "--report-dir")
    if r.junit is not None:
        check_output_file(r.junit, "--junit")
    if r.checkpoint is not None:
        check_output_file(r.checkpoint, "--checkpoint")
    action_rules = load_rules(r.rules) if r.rules is not None else None
    refuse_collisions(
        {
            "--history": history_path(r.history, r.no_history),
            "--junit": r.junit,
            "--checkpoint": r.checkpoint,
        },
        {"--rules": r.rules},
    )
    mode = resolve_device_mode(r.device)
    gpus = list_cuda_gpus() if mode == "cuda" else []
    burnin_plan = BurnInPlan.build(
        duration_seconds, window_seconds, len(gpus) if mode == "cuda" else r.cpu_devices, rotation
    )
    tolerance = r.straggler_tolerance or (
        CPU_STRAGGLER_TOLERANCE_PERCENT if mode == "cpu" else DEFAULT_STRAGGLER_TOLERANCE_PERCENT
    )
    settings = BurnInSettings(
        plan=burnin_plan,
        device_mode=mode,
        gpus=[(gpu.index, gpu.uuid) for gpu in gpus],
        cpu_devices=r.cpu_devices,
        seed=r.seed,
        straggler_tolerance_percent=tolerance,
        checkpoint=r.checkpoint,
        windows_per_run=r.checkpoint_every,
        floors=reference_floors(
            load_shipped_references(), [(f"gpu{gpu.index}", gpu.name, None) for gpu in gpus]
        ),
        rules=action_rules,
    )
    lock = None
    if r.checkpoint is not None:
        from gpuaccept.burnin.checkpoint import CheckpointLock, resume
        from gpuaccept.compare.reported_burnin import refuse_a_reported_burnin
        from gpuaccept.store.history import history_location

        lock = CheckpointLock(r.checkpoint).acquire()  # before reading: no one writes it meanwhile
        try:
            progress = resume(r.checkpoint, settings.binding)
            if progress.next_window >= burnin_plan.window_count and not r.no_history:
                refuse_a_reported_burnin(
                    r.checkpoint,
                    progress,
                    settings.binding.node.hostname,
                    history_location(r.history),
                )
        except InputError:
            lock.release()
            raise
    else:
        progress = BurnInProgress(plan=burnin_plan.fingerprint(), devices=settings.devices)
    from gpuaccept.distributed.children import start_server

    start_server()  # its torch import runs beside this process's own
    return BurnInJob(
        settings=settings,
        progress=progress,
        names={f"gpu{gpu.index}": gpu.name for gpu in gpus},
        report_dir=r.report_dir,
        junit=r.junit,
        history_path=history_target(r.history, r.no_history, out),
        checkpoint_exit_code=r.checkpoint_exit_code,
        lock=lock,
        rules=action_rules,
    )


def _check_ranges(r: BurnInRequest) -> None:
    """The ranges the CLI's options hold their values to (click refuses them there first): a
    library caller's request is held to the same."""
    if not 2 <= r.cpu_devices <= 64:
        raise InputError(f"--cpu-devices {r.cpu_devices}: give 2 to 64 workers")
    if not 0 <= r.seed <= 2**31 - 1:
        raise InputError(f"--seed {r.seed}: give 0 to {2**31 - 1}")
    if r.checkpoint_every is not None and r.checkpoint_every < 1:
        raise InputError(f"--checkpoint-every {r.checkpoint_every}: give 1 or more windows")
    if r.checkpoint_exit_code is not None and not 4 <= r.checkpoint_exit_code <= 255:
        raise InputError(f"--checkpoint-exit-code {r.checkpoint_exit_code}: give 4 to 255")


def plan_from(out: Output | None = None, **request: Any) -> BurnInJob:
    """`plan` for a request given by its fields' names (BurnInRequest's); its lines kept and
    dropped unless `out` is given."""
    from gpuaccept.commands.output import Collected

    return plan(BurnInRequest(**request), Collected() if out is None else out)
