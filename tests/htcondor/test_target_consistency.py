"""Consistency by construction: submit files follow pixi.toml, and weakening one is caught."""

from __future__ import annotations

from typing import Any

import pytest

from tests.htcondor.submit_files import ALL_JOBS, SUBMIT_DIR, machine_ad, matches
from tests.htcondor.target_rules import check_job_requirements, check_target_facts

ACCEPT = (SUBMIT_DIR / "accept.sub").read_text()


@pytest.mark.parametrize("job", ALL_JOBS)
def test_submit_file_follows_pixi_targets(job: str, pixi_manifest: dict[str, Any]) -> None:
    text = (SUBMIT_DIR / job).read_text()
    assert check_target_facts(text, pixi_manifest) == []
    assert check_job_requirements(text, pixi_manifest) == []


@pytest.mark.parametrize(
    ("weakened", "problem"),
    [
        (
            ACCEPT.replace("(GPUs_DriverVersion >= $($(job_target)_MIN_DRIVER_CUDA))", "true"),
            "GPUs_DriverVersion floor",
        ),
        (
            ACCEPT.replace(
                "(GPUs_DriverVersion >= $($(job_target)_MIN_DRIVER_CUDA))",
                "(GPUs_DriverVersion >= 12.0)",
            ),
            "GPUs_DriverVersion floor",
        ),
        (ACCEPT.replace('(Arch == "$($(job_target)_ARCH)") && ', ""), "do not pin Arch"),
        (ACCEPT + "\nrequirements = true\n", "exactly one requirements line"),
        (
            ACCEPT.replace("gpus_minimum_capability = $($(job_target)_MIN_CAPABILITY)", ""),
            "gpus_minimum_capability",
        ),
        (ACCEPT.replace("$(GPU_MEMORY_MIB:8000)", "$(GPU_MEMORY_MIB:40GB)"), "A100-40GB"),
    ],
)
def test_a_weakened_requirement_is_caught(
    weakened: str, problem: str, pixi_manifest: dict[str, Any]
) -> None:
    assert weakened != ACCEPT
    problems = check_job_requirements(weakened, pixi_manifest)
    assert any(problem in p for p in problems), problems


@pytest.mark.parametrize(
    ("old", "new", "problem"),
    [
        ("cuda12_MIN_DRIVER_CUDA = 12.9", "cuda12_MIN_DRIVER_CUDA = 12.4", "driver floor"),
        ("gb10_MIN_DRIVER_CUDA = 13.0", "gb10_MIN_DRIVER_CUDA = 12.9", "driver floor"),
        ("gb10_ARCH = aarch64", "gb10_ARCH = X86_64", "Arch must be aarch64"),
        ("cuda12_MIN_CAPABILITY = 5.0", "cuda12_MIN_CAPABILITY = 3.5", "capability floor"),
        ("gb10_PLATFORM = linux-aarch64-cuda13", "gb10_PLATFORM = linux-aarch64-cpu", "platform"),
    ],
)
def test_target_facts_that_drift_from_pixi_are_caught(
    old: str, new: str, problem: str, pixi_manifest: dict[str, Any]
) -> None:
    assert old in ACCEPT
    problems = check_target_facts(ACCEPT.replace(old, new), pixi_manifest)
    assert any(problem in p for p in problems), problems


def test_a_pixi_change_without_a_submit_change_is_caught(pixi_manifest: dict[str, Any]) -> None:
    manifest = {**pixi_manifest, "workspace": dict(pixi_manifest["workspace"])}
    manifest["workspace"]["platforms"] = [
        {**p, "cuda": "13.0"} if isinstance(p, dict) and p.get("name") == "linux-64-cuda12" else p
        for p in pixi_manifest["workspace"]["platforms"]
    ]
    assert any("driver floor" in p for p in check_target_facts(ACCEPT, manifest))


def test_weakened_driver_floor_would_really_admit_an_old_driver() -> None:
    """Why the rule matters: HTCondor itself would then place the job on a 12.4 driver."""
    from tests.htcondor.submit_files import IMAGE, expand_text

    weak = ACCEPT.replace("$($(job_target)_MIN_DRIVER_CUDA))", "12.0)")
    old_driver = machine_ad(driver=12.4)
    [strict] = expand_text(ACCEPT, IMAGE=IMAGE)
    [loose] = expand_text(weak, IMAGE=IMAGE)
    assert (matches(strict, old_driver), matches(loose, old_driver)) == (False, True)
