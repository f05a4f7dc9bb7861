"""memory: device memory bandwidth against the reference; at level full, a write/verify
pattern test over most of the free memory."""

from __future__ import annotations

from gpuaccept.checks.context import CheckContext
from gpuaccept.checks.judging import Findings, measurement_targets, torch_device
from gpuaccept.measure.membw import measure_stream_gbps, memory_pattern_test
from gpuaccept.results import CheckResult

PATTERN_CHUNK_BYTES = 1024**3


def run(context: CheckContext) -> CheckResult:
    import torch

    settings = context.settings
    findings = Findings("memory", "MEMORY")
    for target in measurement_targets(context):
        device = torch_device(target)
        figure = measure_stream_gbps(
            device, "copy", settings.membw_bytes, warmup=2, repeats=settings.membw_repeats
        )
        findings.judge(context, target, "membw_copy_gbps", figure.median_gbps, "GB/s")
        if settings.pattern_fraction <= 0:
            continue
        if device.type == "cuda":
            free, _ = torch.cuda.mem_get_info(device)
            budget = int(free * settings.pattern_fraction)
        else:
            budget = settings.pattern_max_bytes
        budget = min(budget, settings.pattern_max_bytes)
        pattern = memory_pattern_test(device, budget, PATTERN_CHUNK_BYTES)
        findings.record(target, "pattern_bytes_tested", pattern.bytes_tested, "bytes")
        if pattern.mismatched_bytes:
            findings.failures.append(
                f"{target.label}: {pattern.mismatched_bytes} byte(s) read back wrong in "
                f"{pattern.bytes_tested / 1e9:.2f} GB of pattern tests"
            )
        if device.type == "cuda":
            torch.cuda.empty_cache()
    return findings.conclude("bandwidth within reference")
