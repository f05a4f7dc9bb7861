"""compute: matmul TFLOPS per GPU and dtype against references, bit-exact GEMM repeats, and
(at level full) throughput sustained over time, which is also the power phase. A side thread
samples power, clocks and clock-event reasons throughout (checks.load_judging judges them)."""

from __future__ import annotations

from typing import Any

from gpuaccept.checks.context import CheckContext
from gpuaccept.checks.judging import Findings, Target, measurement_targets, torch_device
from gpuaccept.checks.load_judging import judge_trace
from gpuaccept.measure.matmul import (
    gemm_consistency,
    measure_matmul_tflops,
    sustained_matmul_tflops,
    unsupported_reason,
)
from gpuaccept.probe.load_sampler import sampler_for
from gpuaccept.results import CheckResult

# Throughput in the last window of a sustained run must keep this share of the first window.
SUSTAINED_MIN_RATIO = 0.9
# The power phase: DCGM's targeted_power runs 120 s by default; a minute is about the
# shortest time in which a GPU settles at its power limit and thermal steady state.
POWER_PHASE_MIN_SECONDS = 60.0


def run(context: CheckContext) -> CheckResult:
    settings = context.settings
    findings = Findings("compute", "COMPUTE")
    skipped: dict[str, str] = {}
    load: dict[str, Any] = {}
    for target in measurement_targets(context):
        device = torch_device(target)
        with sampler_for(target.index, target.uuid) as sampler:
            _measure(context, findings, target, device, skipped)
        load[target.label] = judge_trace(context, findings, target, sampler.trace)
        if settings.sustained_seconds > 0:
            # at full on a GPU this is the power phase too: one dtype, as hot as it runs
            power_phase = context.level == "full" and not context.cpu_mode
            with sampler_for(target.index, target.uuid) as sampler:
                _sustain(context, findings, target, device, power_phase)
            load[f"{target.label} sustained"] = judge_trace(
                context, findings, target, sampler.trace, power_phase=power_phase
            )
    findings.details = {"skipped_dtypes": skipped, "load": load}
    count = sum(1 for m in findings.measurements if m.name.startswith("matmul_"))
    return findings.conclude(
        f"{count} matmul figure(s) within reference, GEMM repeats bit-identical"
    )


def _measure(
    context: CheckContext,
    findings: Findings,
    target: Target,
    device: Any,
    skipped: dict[str, str],
) -> None:
    settings = context.settings
    for dtype in settings.matmul_dtypes:
        reason = unsupported_reason(device, dtype)
        if reason:
            skipped[f"{target.label} {dtype}"] = reason
            continue
        size = settings.matmul_size
        figure = measure_matmul_tflops(
            device, dtype, size, size, size, settings.matmul_warmup, settings.matmul_repeats
        )
        findings.judge(context, target, f"matmul_{dtype}_tflops", figure.median_tflops, "TFLOPS")
    for dtype in settings.consistency_dtypes:
        if unsupported_reason(device, dtype):
            continue
        repeat = gemm_consistency(
            device, dtype, settings.consistency_size, settings.consistency_iterations
        )
        findings.record(
            target, f"gemm_{dtype}_mismatched_elements", repeat.mismatched_elements, "elements"
        )
        if repeat.mismatched_elements:
            findings.failures.append(
                f"{target.label} {dtype} GEMM not reproducible: "
                f"{repeat.mismatched_results} of {repeat.iterations} repeats differ from the "
                f"first ({repeat.mismatched_elements} elements, max |diff| "
                f"{repeat.max_abs_diff:.3g}, first at repeat {repeat.first_bad_iteration})"
            )


def _sustain(
    context: CheckContext, findings: Findings, target: Target, device: Any, power_phase: bool
) -> None:
    settings = context.settings
    dtype = settings.matmul_dtypes[0]
    seconds = settings.sustained_seconds
    if power_phase:
        seconds = max(seconds, POWER_PHASE_MIN_SECONDS)
    windows = sustained_matmul_tflops(device, dtype, settings.matmul_size, seconds, windows=6)
    ratio = windows[-1] / windows[0]
    findings.record(target, f"sustained_{dtype}_last_over_first", ratio, "ratio")
    if ratio < SUSTAINED_MIN_RATIO:
        findings.failures.append(
            f"{target.label} {dtype} throughput fell to {ratio:.0%} of its start over "
            f"{seconds:g} s (clock throttling?)"
        )
