"""What the samples taken under load say: slowdowns, clock sag, power reached, the PCIe link.

Rules (the issue's, with their sources):
- hardware slowdown, hardware thermal slowdown or power brake while loaded: FAIL;
- software thermal slowdown while loaded: WARN; a software power cap is how the power limit is
  enforced, never a finding;
- median SM clock under load below the model's clock_load_fraction of its maximum: WARN (FAIL at
  level full);
- at full, the power phase reaching less than the model's power_load_fraction of the enforced
  limit (90th percentile of the samples): FAIL;
- the PCIe link under transfer load (the best reading while the copies ran) below the model's
  generation or width: FAIL;
- PCIe replays per minute above DCGM's health-watch rate (a 1e-12 bit error rate at the link's
  speed, times its lanes, rounded up): WARN, as DCGM does.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import asdict, dataclass, field
from typing import Any

from gpuaccept.actions import ActionRules, Cause, builtin_rules, dcgm_error_verdict
from gpuaccept.checks.context import CheckContext
from gpuaccept.checks.judging import Findings, Target, target_references
from gpuaccept.probe.load_sampler import LoadSample, LoadTrace
from gpuaccept.references import (
    DEFAULT_CLOCK_LOAD_FRACTION,
    DEFAULT_POWER_LOAD_FRACTION,
    ModelReferences,
)

RAMP_SECONDS = 0.5  # samples before this are the GPU waking up, not the GPU under load
FAILING_REASONS = ("hardware slowdown", "hardware thermal slowdown", "power brake (external)")
WARNING_REASONS = ("software thermal slowdown",)
# Gbit/s per lane for PCIe Gen1..Gen6; at a 1e-12 bit error rate a lane may replay
# speed x 1e9 x 1e-12 x 60 times a minute (DCGM's table: Gen5 1.92/min per lane).
_LANE_GBPS = (2.5, 5.0, 8.0, 16.0, 32.0, 64.0)


def replay_rate_limit(gen: int, lanes: int) -> int:
    """DCGM's expected PCIe replays per minute for a link (DcgmHealthWatch.cpp)."""
    per_lane = _LANE_GBPS[min(max(gen, 1), len(_LANE_GBPS)) - 1] / 1000 * 60
    return math.ceil(per_lane * lanes)


def slot_share(
    model: ModelReferences | None, slot_gen: int | None, slot_width: int | None
) -> tuple[float, str] | None:
    """The share of the model's host link that its slot can carry, and why, where the slot
    cannot carry all of it (None where it can, or nothing says): a transfer floor written for
    the model's link is held at this share of itself. Per-lane rates from _LANE_GBPS, all of them
    128b/130b from Gen3 to Gen5, so the share is the ratio of the raw rates."""
    if model is None or model.pcie_gen is None or model.pcie_width is None:
        return None
    gen = min(model.pcie_gen, slot_gen or model.pcie_gen)
    width = min(model.pcie_width, slot_width or model.pcie_width)
    if (gen, width) == (model.pcie_gen, model.pcie_width):
        return None

    def rate(g: int, w: int) -> float:
        return _LANE_GBPS[min(max(g, 1), len(_LANE_GBPS)) - 1] * w

    share = rate(gen, width) / rate(model.pcie_gen, model.pcie_width)
    return share, (
        f"the slot allows PCIe Gen{gen} x{width}, a {model.display} links at "
        f"Gen{model.pcie_gen} x{model.pcie_width}"
    )


@dataclass
class LoadVerdict:
    failures: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    summary: dict[str, Any] = field(default_factory=dict)


def _loaded(samples: list[LoadSample]) -> list[LoadSample]:
    return [s for s in samples if s.seconds >= RAMP_SECONDS] or samples[-1:]


def _values(samples: list[LoadSample], name: str) -> list[float]:
    return [float(v) for s in samples if (v := getattr(s, name)) is not None]


def _percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


def judge_load(
    trace: LoadTrace,
    model: ModelReferences | None,
    label: str,
    *,
    full: bool = False,
    clocks: bool = True,
    power_phase: bool = False,
    pcie_loaded: bool = False,
    rules: ActionRules | None = None,
) -> LoadVerdict:
    """Judge one GPU's samples taken while a check loaded it: `clocks` for compute load (a copy
    engine at work leaves the SMs idle), `power_phase` for the phase that aims at the power
    limit, `pcie_loaded` for host transfers; `rules`, the site's action tables (built-in: None)."""
    return judge_load_summary(
        summarise_trace(trace, pcie_loaded=pcie_loaded),
        model,
        label,
        full=full,
        clocks=clocks,
        power_phase=power_phase,
        pcie_loaded=pcie_loaded,
        rules=rules,
    )


def summarise_trace(trace: LoadTrace, *, pcie_loaded: bool = False) -> dict[str, Any]:
    """Everything `judge_load_summary` reads of a trace, in a few numbers: what a burn-in keeps
    of each window so that a resumed run judges the window again instead of trusting a verdict
    (the samples themselves are too many to keep for days of windows)."""
    if not trace.samples:
        return {"samples": 0, "why": trace.problem or "no sample taken"}
    loaded = _loaded(trace.samples)
    summary: dict[str, Any] = {
        "samples": len(trace.samples),
        "seconds": trace.samples[-1].seconds,
        "sm_clock_max_mhz": trace.sm_clock_max_mhz,
        "loaded_samples": len(loaded),
    }
    hits = {r: sum(1 for s in loaded if r in s.reasons) for r in FAILING_REASONS + WARNING_REASONS}
    if any(hits.values()):
        summary["reason_hits"] = {reason: n for reason, n in hits.items() if n}
    sm_clocks = _values(loaded, "sm_clock_mhz")
    if sm_clocks and trace.sm_clock_max_mhz:
        summary["sm_clock_median_mhz"] = statistics.median(sm_clocks)
    powers, limits = _values(loaded, "power_w"), _values(loaded, "power_limit_w")
    if powers:
        summary["power_max_w"] = max(powers)
        summary["power_p90_w"] = _percentile(powers, 0.9)
    if limits:
        summary["power_limit_w"] = statistics.median(limits)
    temperatures = _values(loaded, "temperature_c")
    if temperatures:
        summary["temperature_max_c"] = max(temperatures)
        if trace.temperature_limit_c is not None:
            summary["temperature_limit_c"] = trace.temperature_limit_c
            summary["temperature_limit_kind"] = trace.temperature_limit_kind
    if pcie_loaded:
        # the best link seen while the copies ran: a healthy link trains up as soon as data
        # moves (and may drop again between copies), a downtrained one never reaches the model's
        gens, widths = _values(trace.samples, "pcie_gen"), _values(trace.samples, "pcie_width")
        summary["pcie_gen_loaded"] = int(max(gens)) if gens else None
        summary["pcie_width_loaded"] = int(max(widths)) if widths else None
        # what the slot allows, believed only where the link under load stayed within it: a
        # link that went past it shows the answer wrong (a virtual root port claiming less), and
        # a wrong answer would lower the floors below what the node must reach
        summary["pcie_gen_slot"] = _within(trace.pcie_gen_slot, gens)
        summary["pcie_width_slot"] = _within(trace.pcie_width_slot, widths)
    readings = [s for s in trace.samples if s.pcie_replays is not None]
    if len(readings) >= 2:
        summary["pcie_replays_grown"] = int(readings[-1].pcie_replays or 0) - int(
            readings[0].pcie_replays or 0
        )
        # DCGM counts replays over a minute: a shorter phase is judged as if it lasted one
        summary["pcie_replay_minutes"] = max(readings[-1].seconds - readings[0].seconds, 60.0) / 60
        summary["pcie_replay_gen"] = next(
            (s.pcie_gen for s in reversed(readings) if s.pcie_gen), None
        )
        summary["pcie_replay_width"] = next(
            (s.pcie_width for s in reversed(readings) if s.pcie_width), None
        )
    return summary


def _within(slot: int | None, seen: list[float]) -> int | None:
    return None if slot is None or (seen and max(seen) > slot) else slot


def judge_load_summary(
    summary: dict[str, Any],
    model: ModelReferences | None,
    label: str,
    *,
    full: bool = False,
    clocks: bool = True,
    power_phase: bool = False,
    pcie_loaded: bool = False,
    rules: ActionRules | None = None,
) -> LoadVerdict:
    """The verdict on a `summarise_trace` summary (the summary returned with it, and the power
    phase's reached fraction added)."""
    verdict = LoadVerdict(summary=dict(summary))
    summary = verdict.summary
    if not summary.get("samples"):
        return verdict
    loaded = summary.get("loaded_samples", 0)
    for reason, hits in (summary.get("reason_hits") or {}).items():
        text = f"{label}: {reason} under load in {hits} of {loaded} samples"
        if reason in FAILING_REASONS:
            verdict.failures.append(text)
        elif reason in WARNING_REASONS:
            verdict.warnings.append(text)
    clock_fraction = model.clock_load_fraction if model else DEFAULT_CLOCK_LOAD_FRACTION
    median_clock, top = summary.get("sm_clock_median_mhz"), summary.get("sm_clock_max_mhz")
    if not clocks:
        summary.pop("sm_clock_median_mhz", None)
    elif median_clock is not None and top and median_clock < clock_fraction * top:
        text = (
            f"{label}: SM clock under load {median_clock:.0f} MHz (median), below "
            f"{clock_fraction:g} x its {top:.0f} MHz maximum"
        )
        (verdict.failures if full else verdict.warnings).append(text)
    reached, limit = summary.get("power_p90_w"), summary.get("power_limit_w")
    if power_phase and reached is not None and limit:
        power_fraction = model.power_load_fraction if model else DEFAULT_POWER_LOAD_FRACTION
        summary["power_reached_fraction"] = reached / limit
        if reached < power_fraction * limit:
            verdict.failures.append(
                f"{label}: power phase reached {reached:.0f} W (90th percentile), below "
                f"{power_fraction:g} x the {limit:.0f} W limit"
            )
    _judge_temperature(summary, label, verdict, rules)
    if pcie_loaded:
        gen, width = summary.get("pcie_gen_loaded"), summary.get("pcie_width_loaded")
        slot = (summary.get("pcie_gen_slot"), summary.get("pcie_width_slot"))
        _judge_pcie(gen, width, model, label, verdict, slot)
    _judge_replays(summary, label, verdict)
    return verdict


def _judge_pcie(
    gen: int | None,
    width: int | None,
    model: ModelReferences | None,
    label: str,
    verdict: LoadVerdict,
    slot: tuple[int | None, int | None] = (None, None),
) -> None:
    """The link under load against the model's, or against the slot's where the slot cannot carry
    the model's (a Gen5 card in a Gen4 server: NVIDIA's own MLPerf system of 8 H100 PCIe on an
    EPYC 7742 says "PCIe Gen4 x16": mlcommons/inference_results_v3.1 eaf622a2, closed/NVIDIA/
    systems/H100-PCIe-80GBx8_TRT.json line 3). That node is built so, not broken: said, and
    judged at the slot."""
    if model is None:
        return
    for what, seen, expected, allowed, prefix in (
        ("generation", gen, model.pcie_gen, slot[0], "Gen"),
        ("width", width, model.pcie_width, slot[1], "x"),
    ):
        if seen is None or expected is None:
            continue
        standard = f"a {model.display} links at {prefix}{expected}"
        if allowed is not None and allowed < expected:
            verdict.warnings.append(
                f"{label}: the slot allows PCIe {prefix}{allowed}, {standard}: its link "
                f"{what} is held to the slot's"
            )
            expected, standard = allowed, f"its slot allows {prefix}{allowed}"
        if seen < expected:
            verdict.failures.append(f"{label}: PCIe {prefix}{seen} under load, {standard}")


# DCGM_FR_TEMP_VIOLATION (dcgmlib/dcgm_errors.h:78 at NVIDIA/DCGM 72fa3fe): its row in the action
# tables judges it, here as in the dcgm check
TEMP_VIOLATION = 42


def temperature_violation(
    label: str,
    hottest: float | None,
    limit: float | None,
    kind: str | None,
    rules: ActionRules | None,
    when: str = "under load",
) -> tuple[str, Cause] | None:
    """A GPU hotter than its maximum operating temperature is what DCGM's diagnostic reports as
    DCGM_FR_TEMP_VIOLATION ("Temperature %lld of %s %u exceeded user-specified maximum allowed
    temperature %lld": `DcgmRecorder::CheckGpuTemperature`, nvvs/src/DcgmRecorder.cpp:930-937 at
    NVIDIA/DCGM 72fa3fe), and what gpud calls degraded at any time, at rest too
    (components/accelerator/nvidia/temperature/component.go:228-236 and 279-281 at leptonai/gpud
    4a8de33). Judged by that code's row of the action tables, as the dcgm check judges it: DCGM
    classes it MONITOR (dcgmlib/src/dcgm_errors.c:66), so it warns, and a site's `--rules` row
    can make it fail ("fail" where a row judges nothing: DCGM's diagnostic counts it among a
    test's fatal errors). Equal to the limit is no violation, as in both. (verdict, finding), or
    None."""
    if hottest is None or not limit or hottest <= limit:
        return None
    judged = dcgm_error_verdict(rules or builtin_rules(), TEMP_VIOLATION) or "fail"
    text = Cause(
        f"{label}: {hottest:.0f} °C {when}, above its {limit:.0f} °C "
        f"{kind or 'maximum operating'} temperature "
        "(DCGM_FR_TEMP_VIOLATION: check this GPU's cooling and the node's airflow)",
        "dcgm-error",
        TEMP_VIOLATION,
    )
    return judged, text


def _judge_temperature(
    summary: dict[str, Any], label: str, verdict: LoadVerdict, rules: ActionRules | None
) -> None:
    found = temperature_violation(
        label,
        summary.get("temperature_max_c"),
        summary.get("temperature_limit_c"),
        summary.get("temperature_limit_kind"),
        rules,
    )
    if found is None:
        return
    judged, text = found
    if judged == "fail":
        verdict.failures.append(text)
    elif judged == "warn":
        verdict.warnings.append(text)


def _judge_replays(summary: dict[str, Any], label: str, verdict: LoadVerdict) -> None:
    grown = summary.get("pcie_replays_grown")
    minutes = summary.get("pcie_replay_minutes")
    gen, width = summary.get("pcie_replay_gen"), summary.get("pcie_replay_width")
    if not grown or grown <= 0 or not minutes or gen is None or width is None:
        return
    limit = replay_rate_limit(gen, width)
    rate = grown / minutes
    if rate > limit:
        verdict.warnings.append(
            f"{label}: {grown} PCIe replays in {minutes * 60:.0f} s ({rate:.0f}/min) above "
            f"DCGM's {limit}/min for Gen{gen} x{width}"
        )


def trace_details(trace: LoadTrace, verdict: LoadVerdict) -> dict[str, Any]:
    """The samples and their summary as report details (drawn by the HTML report)."""
    return {
        "summary": verdict.summary,
        "sm_clock_max_mhz": trace.sm_clock_max_mhz,
        "samples": [asdict(sample) for sample in trace.samples],
    }


def judge_trace(
    context: CheckContext, findings: Findings, target: Target, trace: LoadTrace, **kinds: bool
) -> dict[str, Any]:
    """Judge a target's load samples into the findings; the samples and summary for details."""
    model = target_references(context, target)
    verdict = judge_load(
        trace,
        model,
        target.label,
        full=context.level == "full",
        rules=context.action_rules,
        **kinds,
    )
    findings.failures += verdict.failures
    findings.warnings += verdict.warnings
    return trace_details(trace, verdict)
