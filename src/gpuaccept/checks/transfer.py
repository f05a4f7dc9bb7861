"""transfer: pinned host-to-device and device-to-host bandwidth against the reference
(PCIe generation, or NVLink-C2C on Grace), with the PCIe link sampled while it carries the
copies: a link below the model's generation or width under load fails. CPU mode copies between
host buffers."""

from __future__ import annotations

from typing import Any

from gpuaccept.checks.context import CheckContext
from gpuaccept.checks.judging import Findings, measurement_targets, target_references, torch_device
from gpuaccept.checks.load_judging import judge_trace, slot_share
from gpuaccept.measure.transfer import DIRECTIONS, keep_copying, measure_transfer_gbps
from gpuaccept.probe.load_sampler import sampler_for
from gpuaccept.results import CheckResult

LINK_SAMPLE_SECONDS = 1.0  # ten samples at the sampler's 100 ms


def run(context: CheckContext) -> CheckResult:
    settings = context.settings
    findings = Findings("transfer", "TRANSFER")
    load: dict[str, Any] = {}
    for target in measurement_targets(context):
        device = torch_device(target)
        figures: dict[str, float] = {}
        with sampler_for(target.index, target.uuid) as sampler:
            for direction in DIRECTIONS:
                figures[f"{direction}_pinned_gbps"] = measure_transfer_gbps(
                    device, direction, settings.transfer_bytes, True, 2, settings.transfer_repeats
                ).median_gbps
            # a second of traffic: the link is sampled at least a few times while it is busy
            keep_copying(device, settings.transfer_bytes, LINK_SAMPLE_SECONDS)
        load[target.label] = judge_trace(
            context, findings, target, sampler.trace, clocks=False, pcie_loaded=True
        )
        # a Gen5 card in a Gen4 server is built so, not broken: its floors are the slot's (what
        # the slot allows, as the load summary believes it)
        summary = load[target.label]["summary"]
        share = slot_share(
            target_references(context, target),
            summary.get("pcie_gen_slot"),
            summary.get("pcie_width_slot"),
        )
        for metric, value in figures.items():
            findings.judge(context, target, metric, value, "GB/s", share=share)
    findings.details = {"load": load}
    if context.cpu_mode:
        return findings.conclude("host-to-host copies within the sanity floors (CPU twin)")
    return findings.conclude("host-device bandwidth within reference, PCIe link at full width")
