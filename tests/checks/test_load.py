"""Under load: the side-thread sampler reads the scripted fake NVML while work runs, and the
samples are judged (power brake, clock sag, the power phase, the PCIe link, replays)."""

from __future__ import annotations

import time
from typing import Any

import pytest

from gpuaccept.checks.load_judging import judge_load, replay_rate_limit
from gpuaccept.probe.load_sampler import LoadSample, LoadTrace, sampler_for
from gpuaccept.references import load_shipped_references
from tests.checks.conftest import h100_sxm

H100 = load_shipped_references().models["h100-sxm"]


def _sample_while_busy(fake_gpus: Any, seconds: float = 1.0, **facts: Any) -> LoadTrace:
    gpu = h100_sxm(**facts)
    fake_gpus({"gpus": [gpu]})
    with sampler_for(0, gpu["uuid"]) as sampler:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:  # the CPU twin of a burn: the sampler must keep up
            sum(i * i for i in range(10_000))
    return sampler.trace


def test_the_sampler_reads_at_least_five_times_a_second(fake_gpus: Any) -> None:
    trace = _sample_while_busy(fake_gpus, 1.0)
    assert len(trace.samples) >= 5
    first = trace.samples[0]
    assert (first.power_w, first.power_limit_w, first.sm_clock_mhz) == (650.0, 700.0, 1755.0)
    assert trace.sm_clock_max_mhz == 1980.0
    verdict = judge_load(trace, H100, "gpu0", full=True, power_phase=True, pcie_loaded=True)
    assert (verdict.failures, verdict.warnings) == ([], [])
    assert verdict.summary["power_reached_fraction"] == pytest.approx(650 / 700)


def test_power_brake_under_load_fails(fake_gpus: Any) -> None:
    # idle first, then the brake engages once the burn is under way
    trace = _sample_while_busy(fake_gpus, 1.2, throttle=[0] * 8 + [0x80])
    verdict = judge_load(trace, H100, "gpu0")
    assert any("power brake (external) under load" in f for f in verdict.failures)


def test_a_software_power_cap_under_load_is_how_the_limit_works(fake_gpus: Any) -> None:
    trace = _sample_while_busy(fake_gpus, 1.0, throttle=0x4)
    assert judge_load(trace, H100, "gpu0").failures == []


def test_a_pcie_x8_link_under_load_fails(fake_gpus: Any) -> None:
    pcie = {"gen": 5, "gen_max_gpu": 5, "gen_max_system": 5, "width": 8, "width_max": 16}
    trace = _sample_while_busy(fake_gpus, 1.0, pcie=pcie)
    verdict = judge_load(trace, H100, "gpu0", clocks=False, pcie_loaded=True)
    assert verdict.failures == ["gpu0: PCIe x8 under load, a H100 SXM links at x16"]


def test_a_gen4_link_under_load_fails_but_idle_downshift_is_not_judged(fake_gpus: Any) -> None:
    pcie = {"gen": 4, "gen_max_gpu": 5, "gen_max_system": 5, "width": 16, "width_max": 16}
    trace = _sample_while_busy(fake_gpus, 1.0, pcie=pcie)
    assert "Gen4 under load" in judge_load(trace, H100, "gpu0", pcie_loaded=True).failures[0]
    assert judge_load(trace, H100, "gpu0").failures == []  # compute load: the link is not judged


def test_clock_sag_warns_and_fails_at_full(fake_gpus: Any) -> None:
    trace = _sample_while_busy(fake_gpus, 1.0, sm_clock_mhz=900)
    assert "SM clock under load 900 MHz" in judge_load(trace, H100, "gpu0").warnings[0]
    assert "SM clock under load 900 MHz" in judge_load(trace, H100, "gpu0", full=True).failures[0]


def test_a_power_phase_far_from_the_limit_fails(fake_gpus: Any) -> None:
    trace = _sample_while_busy(fake_gpus, 1.0, power_mw=300_000)
    verdict = judge_load(trace, H100, "gpu0", full=True, power_phase=True)
    assert verdict.failures == [
        "gpu0: power phase reached 300 W (90th percentile), below 0.8 x the 700 W limit"
    ]
    assert judge_load(trace, H100, "gpu0").failures == []  # no power phase below full


def _trace(replays: list[int], seconds: float) -> LoadTrace:
    step = seconds / (len(replays) - 1)
    return LoadTrace(
        [
            LoadSample(seconds=i * step, pcie_gen=5, pcie_width=16, pcie_replays=count)
            for i, count in enumerate(replays)
        ]
    )


def test_pcie_replays_above_dcgms_rate_warn() -> None:
    assert replay_rate_limit(5, 16) == 31  # ceil(1.92 x 16), DCGM's Gen5 figure
    assert replay_rate_limit(4, 16) == 16
    assert judge_load(_trace([0, 10, 31], 60), H100, "gpu0").warnings == []
    warned = judge_load(_trace([0, 10, 32], 60), H100, "gpu0").warnings
    assert warned == ["gpu0: 32 PCIe replays in 60 s (32/min) above DCGM's 31/min for Gen5 x16"]


def test_no_nvml_means_no_samples_and_says_why() -> None:
    trace = LoadTrace(problem="CPU mode: no GPU to sample")
    verdict = judge_load(trace, H100, "cpu")
    assert verdict.failures == verdict.warnings == []
    assert verdict.summary == {"samples": 0, "why": "CPU mode: no GPU to sample"}


def test_a_sample_reads_the_temperature_through_the_versioned_call() -> None:
    """nvmlDeviceGetTemperature is deprecated (gone in CUDA 14); the fake refuses it."""
    from gpuaccept.probe.load_sampler import take_sample
    from tests import fake_nvml
    from tests.checks.conftest import h100_sxm

    fake_nvml.use({"gpus": [h100_sxm(temperature_c=71)]})
    try:
        fake_nvml.nvmlInit()
        sample = take_sample(fake_nvml, fake_nvml.nvmlDeviceGetHandleByIndex(0), 1.0)
    finally:
        fake_nvml.use(None)
    assert sample.temperature_c == 71.0
    assert sample.power_w == 650.0
