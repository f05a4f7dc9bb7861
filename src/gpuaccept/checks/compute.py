"""compute: matmul TFLOPS per GPU and dtype against references, bit-exact GEMM repeats, and
(at level full) throughput sustained over time."""

from __future__ import annotations

from gpuaccept.checks.context import CheckContext
from gpuaccept.checks.judging import Findings, measurement_targets, torch_device
from gpuaccept.measure.matmul import (
    gemm_consistency,
    measure_matmul_tflops,
    sustained_matmul_tflops,
    unsupported_reason,
)
from gpuaccept.results import CheckResult

# Throughput in the last window of a sustained run must keep this share of the first window.
SUSTAINED_MIN_RATIO = 0.9


def run(context: CheckContext) -> CheckResult:
    settings = context.settings
    findings = Findings("compute", "COMPUTE")
    skipped: dict[str, str] = {}
    for target in measurement_targets(context):
        device = torch_device(target)
        for dtype in settings.matmul_dtypes:
            reason = unsupported_reason(device, dtype)
            if reason:
                skipped[f"{target.label} {dtype}"] = reason
                continue
            size = settings.matmul_size
            figure = measure_matmul_tflops(
                device, dtype, size, size, size, settings.matmul_warmup, settings.matmul_repeats
            )
            findings.judge(
                context, target, f"matmul_{dtype}_tflops", figure.median_tflops, "TFLOPS"
            )
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
        if settings.sustained_seconds > 0:
            dtype = settings.matmul_dtypes[0]
            windows = sustained_matmul_tflops(
                device, dtype, settings.matmul_size, settings.sustained_seconds, windows=6
            )
            ratio = windows[-1] / windows[0]
            findings.record(target, f"sustained_{dtype}_last_over_first", ratio, "ratio")
            if ratio < SUSTAINED_MIN_RATIO:
                findings.failures.append(
                    f"{target.label} {dtype} throughput fell to {ratio:.0%} of its start over "
                    f"{settings.sustained_seconds:g} s (clock throttling?)"
                )
    findings.details = {"skipped_dtypes": skipped}
    count = sum(1 for m in findings.measurements if m.name.startswith("matmul_"))
    return findings.conclude(
        f"{count} matmul figure(s) within reference, GEMM repeats bit-identical"
    )
