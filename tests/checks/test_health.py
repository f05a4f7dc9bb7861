"""health: every verdict driven through the real NVML reading code by the scripted fake NVML."""

from __future__ import annotations

from typing import Any

import pytest

from gpuaccept.checks import health, inventory
from gpuaccept.results import Status
from tests.checks.conftest import cpu_context, gpu_context, h100_sxm


def _health(fake_gpus: Any, *gpus: dict[str, Any], **kwargs: Any) -> Any:
    """health of `gpus` on a node beside a healthy second H100 SXM (a GPU alone on its node
    has its NVLinks and fabric reported, not judged: see the one-GPU slice test)."""
    fake_gpus({"gpus": [*gpus, h100_sxm(len(gpus))] if len(gpus) == 1 else list(gpus)}, **kwargs)
    return health.run(gpu_context())


def test_a_one_gpu_slice_of_an_sxm_board_is_not_held_to_its_nvlinks(fake_gpus: Any) -> None:
    """Issue #30 §8: a cloud VM's one H100 SXM has no NVLink peer and no fabric registration;
    held to 18 active links, `health` failed and `accept` exited 1 on a healthy slice."""
    links = [{"active": False, "version": 4} for _ in range(18)]
    fake_gpus({"gpus": [h100_sxm(nvlink=links, fabric={"state": 1})]})
    result = health.run(gpu_context())
    assert result.status is Status.PASS, result.message
    assert "gpu0 is the node's only GPU: its NVLinks and NVSwitch fabric carry nothing here" in (
        result.message
    )
    (snapshot,) = result.details["gpus"]
    assert len(snapshot["nvlinks"]) == 18  # still reported
    fake_gpus({"gpus": [h100_sxm(0, nvlink=links), h100_sxm(1)]})
    assert health.run(gpu_context()).status is Status.FAIL  # beside a peer, held to 18


def test_a_healthy_h100_sxm_passes_with_every_link_reported(fake_gpus: Any) -> None:
    result = _health(fake_gpus, h100_sxm())
    assert result.status is Status.PASS, result.message
    snapshot = result.details["gpus"][0]
    assert len(snapshot["nvlinks"]) == 18
    assert snapshot["fabric"]["state"] == "completed"
    assert snapshot["pci_device_id"] == 0x233010DE


def test_a_link_down_fails_and_names_the_link(fake_gpus: Any) -> None:
    links = [{"active": True, "version": 4} for _ in range(18)]
    links[7] = {"active": False, "version": 4}
    result = _health(fake_gpus, h100_sxm(nvlink=links))
    assert result.status is Status.FAIL
    assert "17 of 18 NVLinks active (down: 7)" in result.message


def test_a_pcie_card_with_some_links_inactive_passes(fake_gpus: Any) -> None:
    # aznhc's false failure: a PCIe H100 reports 18 links, 12 of them inactive
    links = [{"active": i < 6} for i in range(18)]
    gpu = h100_sxm(name="NVIDIA H100 PCIe", pci_device_id=0x233110DE, nvlink=links)
    assert _health(fake_gpus, gpu).status is Status.PASS


@pytest.mark.parametrize(
    ("name", "device_id"),
    [
        ("NVIDIA L40S", 0x26B910DE),
        # references.toml's nvlink_links = 0 rows, each held (data-mutation survivors)
        ("NVIDIA L4", 0x27B810DE),
        ("NVIDIA A10", 0x223610DE),
        ("NVIDIA L40", 0x26B510DE),
        ("NVIDIA L20", 0x26BA10DE),
        ("NVIDIA RTX PRO 6000 Blackwell Server Edition", 0x2BB510DE),
        ("NVIDIA GB10", 0x2E1210DE),
    ],
)
def test_a_card_without_nvlink_passes(fake_gpus: Any, name: str, device_id: int) -> None:
    gpu = h100_sxm(name=name, pci_device_id=device_id, nvlink=None, fabric=None)
    result = _health(fake_gpus, gpu)
    assert result.status is Status.PASS, result.message
    assert result.details["gpus"][0]["nvlinks"] == []


@pytest.mark.parametrize(
    ("fabric", "text"),
    [
        ({"state": 2}, "fabric registration in progress"),
        ({"state": 1}, "fabric registration not started"),
        ({"state": 3, "status": 999}, "fabric registration failed (NVML status 999)"),
    ],
)
def test_fabric_not_registered_fails(fake_gpus: Any, fabric: dict[str, int], text: str) -> None:
    result = _health(fake_gpus, h100_sxm(fabric=fabric))
    assert result.status is Status.FAIL
    assert text in result.message


def _ecc(**counts: int) -> dict[str, Any]:
    ecc = h100_sxm()["ecc"]
    for key, value in counts.items():
        scope, kind, where = key.split("_")
        ecc[scope][kind][where] = value
    return ecc


@pytest.mark.parametrize(
    ("facts", "text"),
    [
        ({"ecc": _ecc(volatile_uncorrected_sram=1)}, "uncorrectable SRAM ECC"),
        ({"ecc": _ecc(aggregate_corrected_sram=10_001)}, "above aznhc check_gpu_ecc's 10000"),
        ({"ecc": _ecc(aggregate_corrected_dram=20_000_001)}, "corrected DRAM ECC errors"),
        # DCGM's limit is met at 512 (DcgmHealthWatch.cpp:1966 judges >=)
        ({"remapped_rows": [0, 512, 0, 0]}, "512 rows remapped for uncorrectable errors"),
        ({"remapped_rows": [0, 0, 0, 1]}, "row remapping failed"),
        ({"remapped_rows": [0, 0, 1, 0]}, "row remapping pending"),
        ({"retired_pages": {"sbe": 40, "dbe": 22, "pending": True}}, "retirement table full"),
    ],
)
def test_ras_thresholds_fail(fake_gpus: Any, facts: dict[str, Any], text: str) -> None:
    result = _health(fake_gpus, h100_sxm(**facts))
    assert result.status is Status.FAIL
    assert text in result.message


@pytest.mark.parametrize(
    "facts",
    [
        {"ecc": _ecc(aggregate_corrected_sram=10_000, volatile_corrected_dram=20_000_000)},
        {"remapped_rows": [12, 511, 0, 0]},
        {"retired_pages": {"sbe": 40, "dbe": 22, "pending": False}},
    ],
)
def test_counts_at_the_thresholds_pass(fake_gpus: Any, facts: dict[str, Any]) -> None:
    assert _health(fake_gpus, h100_sxm(**facts)).status is Status.PASS


def test_a_software_power_cap_at_rest_is_not_a_warning(fake_gpus: Any) -> None:
    assert _health(fake_gpus, h100_sxm(throttle=0x4)).status is Status.PASS


def test_a_hardware_slowdown_at_rest_warns(fake_gpus: Any) -> None:
    result = _health(fake_gpus, h100_sxm(throttle=0x8))
    assert result.status is Status.WARN
    assert "hardware slowdown" in result.message


def test_a_mig_instance_is_judged_as_a_slice_not_an_error(fake_gpus: Any) -> None:
    digits = "11111111-2222-3333-4444-555555555555"
    gpu = h100_sxm(mig={"current": 1, "pending": 1, "instances": [f"MIG-{digits}"]})
    # torch prints the instance's UUID with a GPU- prefix, which NVML does not know
    result = _health(fake_gpus, gpu, torch_uuids=[f"GPU-{digits}"])
    assert result.status is Status.PASS, result.message
    assert f"MIG instance MIG-{digits}" in result.message
    assert result.message == (
        f"1 GPU(s): no ECC, retirement, link or fabric faults; gpu0 is MIG instance MIG-{digits} "
        "(80.0 GiB, 132 SMs): health read from its parent GPU, performance judged on "
        "correctness only"
    )
    assert result.details["gpus"][0]["mig_enabled"] is True


def test_a_gpu_nvml_does_not_know_warns_instead_of_erroring(fake_gpus: Any) -> None:
    result = _health(fake_gpus, h100_sxm(), torch_uuids=["GPU-not-in-nvml"])
    assert result.status is Status.WARN
    assert "NVML cannot reach GPU-not-in-nvml" in result.message


def test_a_lost_gpu_fails_health_and_inventory(fake_gpus: Any) -> None:
    lost = h100_sxm(1, lost=True)
    result = _health(fake_gpus, h100_sxm(), lost)
    assert result.status is Status.FAIL
    assert "gpu1" in result.message
    assert "GPU is lost" in result.message
    listed = inventory.run(gpu_context())
    assert listed.status is Status.FAIL
    assert "NVML GPU 1: GPU is lost (listed but unreachable)" in listed.message


def test_cpu_mode_is_skip_not_pass() -> None:
    assert health.run(cpu_context()).status is Status.SKIP


@pytest.mark.usefixtures("no_gpu")
def test_missing_nvml_is_skip_with_a_reason() -> None:
    result = health.run(gpu_context())
    assert result.status is Status.SKIP
    assert "NVML unavailable" in result.message


def test_a_mig_instance_is_measured_on_correctness_only(fake_gpus: Any) -> None:
    """Whole-GPU floors would fail a healthy slice: its figures are reported, unchecked."""
    from gpuaccept.checks.judging import Findings, measurement_targets, target_model

    digits = "11111111-2222-3333-4444-555555555555"
    gpu = h100_sxm(mig={"current": 1, "pending": 1, "instances": [f"MIG-{digits}"]})
    fake_gpus({"gpus": [gpu]}, torch_uuids=[f"GPU-{digits}"])
    context = gpu_context()
    (target,) = measurement_targets(context)
    assert target.mig
    assert target.pci_device_id == 0x233010DE  # the parent's identity, found through NVML
    assert target_model(context, target) is None
    findings = Findings("compute", "COMPUTE")
    findings.judge(context, target, "matmul_bf16_tflops", 90.0, "TFLOPS")
    result = findings.conclude("ok")
    assert result.status is Status.WARN
    assert "NVIDIA H100 80GB HBM3 (a MIG instance): performance unchecked" in result.message


@pytest.mark.parametrize(
    ("action", "status", "text"),
    [
        (0, Status.PASS, None),
        (1, Status.FAIL, "asks for a GPU reset"),
        (2, Status.FAIL, "asks for a node reboot"),
        (4, Status.FAIL, "asks for a drain and reset"),
        (3, Status.WARN, "asks for drain P2P"),
    ],
)
def test_the_recovery_action_the_driver_asks_for_is_judged_as_dcgm_does(
    fake_gpus: Any, action: int, status: Status, text: str | None
) -> None:
    result = _health(fake_gpus, h100_sxm(recovery_action=action))
    assert result.status is status, result.message
    if text is not None:
        assert text in result.message
    assert result.details["gpus"][0]["recovery_action"] is not None


@pytest.mark.parametrize(("state", "label"), [(2, "sleep"), (3, "active, traffic disabled")])
def test_a_link_that_is_not_carrying_traffic_is_not_active(
    fake_gpus: Any, state: int, label: str
) -> None:
    links: list[dict[str, Any]] = [{"state": 1} for _ in range(18)]
    links[4] = {"state": state}
    result = _health(fake_gpus, h100_sxm(nvlink=links))
    assert result.status is Status.FAIL
    assert f"17 of 18 NVLinks active (down: 4 {label})" in result.message


def test_links_reported_down_on_a_mig_enabled_gpu_are_not_judged(fake_gpus: Any) -> None:
    # NVML reports a MIG-enabled GPU's links as down; DCGM skips them (Bug 200682374)
    links = [{"active": False} for _ in range(18)]
    mig = {"current": 1, "pending": 1, "instances": []}
    assert _health(fake_gpus, h100_sxm(nvlink=links, mig=mig)).status is Status.PASS
    assert _health(fake_gpus, h100_sxm(nvlink=links)).status is Status.FAIL


def test_a_healthy_pair_reads_in_full(fake_gpus: Any) -> None:
    fake_gpus({"gpus": [h100_sxm(0), h100_sxm(1)]})
    result = health.run(gpu_context())
    assert (result.name, result.area, result.status) == ("health", "HEALTH", Status.PASS)
    assert result.message == "2 GPU(s): no ECC, retirement, link or fabric faults"
    assert sorted(result.details) == ["gpus", "notes"]
    assert [g["index"] for g in result.details["gpus"]] == [0, 1]  # each GPU by its own index
    skipped = health.run(cpu_context())
    assert (skipped.name, skipped.area, skipped.status, skipped.message) == (
        "health",
        "HEALTH",
        Status.SKIP,
        "CPU mode: no GPU to read",
    )


def test_findings_of_every_gpu_are_kept(fake_gpus: Any) -> None:
    bad = {"remapped_rows": [0, 0, 1, 0], "persistence": 0}
    fake_gpus({"gpus": [h100_sxm(0, **bad), h100_sxm(1, **bad)]})
    result = health.run(gpu_context())
    assert result.message.count("row remapping pending") == 2
    assert "gpu0: row remapping pending (reset the GPU)" in result.message
    assert "gpu1: row remapping pending (reset the GPU)" in result.message


@pytest.mark.parametrize(
    ("facts", "text"),
    [
        (
            {
                "pcie": {
                    "gen": 5,
                    "gen_max_gpu": 5,
                    "gen_max_system": 5,
                    "width": 8,
                    "width_max": 16,
                }
            },
            "gpu0: PCIe link x8 of x16",
        ),
        (
            {
                "pcie": {
                    "gen": 4,
                    "gen_max_gpu": 5,
                    "gen_max_system": 4,
                    "width": 16,
                    "width_max": 16,
                }
            },
            "gpu0: PCIe slot allows Gen4, the GPU supports Gen5",
        ),
        ({"persistence": 0}, "gpu0: persistence mode off"),
        ({"throttle": 0x8 | 0x40}, "gpu0: clocks held back at rest by "),
    ],
)
def test_each_rest_state_warning_warns_with_its_text(
    fake_gpus: Any, facts: dict[str, Any], text: str
) -> None:
    result = _health(fake_gpus, h100_sxm(**facts))
    assert result.status is Status.WARN, result.message
    assert result.message.startswith(text), result.message


def test_the_throttle_reasons_are_all_named(fake_gpus: Any) -> None:
    result = _health(fake_gpus, h100_sxm(throttle=0x8 | 0x40))
    assert result.message.count(", ") >= 1  # two reasons, joined


@pytest.mark.parametrize(("sbe", "dbe", "full"), [(62, 0, True), (0, 62, True), (61, 0, False)])
def test_the_retirement_table_is_full_at_62_pages_of_either_cause(
    fake_gpus: Any, sbe: int, dbe: int, full: bool
) -> None:
    pages = {"sbe": sbe, "dbe": dbe, "pending": True}
    result = _health(fake_gpus, h100_sxm(retired_pages=pages))
    assert result.status is Status.FAIL  # pending alone fails
    assert ("page retirement table full" in result.message) is full
    assert "gpu0: page retirement pending (reset the GPU)" in result.message


def test_the_model_is_found_by_pci_id_when_the_name_says_nothing(fake_gpus: Any) -> None:
    links = [{"active": True} for _ in range(17)] + [{"active": False}]
    gpu = h100_sxm(name="NVIDIA Graphics Device", nvlink=links)
    result = _health(fake_gpus, gpu)
    assert result.status is Status.FAIL  # judged as an H100 SXM (18 links) by its id alone
    assert "a H100 SXM has 18" in result.message


def test_fabric_and_link_findings_name_the_gpu(fake_gpus: Any) -> None:
    result = _health(fake_gpus, h100_sxm(fabric={"state": 1}))
    assert result.message == (
        "gpu0: NVSwitch fabric registration not started (is nvidia-fabricmanager running and "
        "healthy?)"
    )
    links = [{"active": True} for _ in range(17)] + [{"active": False}]
    result = _health(fake_gpus, h100_sxm(nvlink=links))
    assert result.message.startswith("gpu0: 17 of 18 NVLinks active (down: 17); ")


def test_retirement_counts_add_both_causes(fake_gpus: Any) -> None:
    pages = {"sbe": 0, "dbe": 61, "pending": True}
    result = _health(fake_gpus, h100_sxm(retired_pages=pages))
    assert "page retirement table full" not in result.message  # 61 pages: not yet full


def test_every_gpu_is_read_when_one_cannot_be(fake_gpus: Any) -> None:
    """The first GPU is lost; the second is still read and judged (and its warning kept with
    the first one's finding)."""
    fake_gpus(
        {"gpus": [h100_sxm(0, lost=True), h100_sxm(1, persistence=0)]},
    )
    result = health.run(gpu_context())
    assert result.message.startswith("gpu0: NVML cannot reach")
    assert [snapshot["index"] for snapshot in result.details["gpus"]] == [1]


def test_warnings_of_every_gpu_are_kept(fake_gpus: Any) -> None:
    fake_gpus({"gpus": [h100_sxm(0, persistence=0), h100_sxm(1, persistence=0)]})
    result = health.run(gpu_context())
    assert result.message == "gpu0: persistence mode off; gpu1: persistence mode off"


def test_finding_texts_in_full(fake_gpus: Any) -> None:
    result = _health(fake_gpus, h100_sxm(remapped_rows=[0, 600, 0, 0]))
    assert result.message == (
        "gpu0: 600 rows remapped for uncorrectable errors, at or above DCGM's limit 512"
    )
    result = _health(fake_gpus, h100_sxm(throttle=0x8 | 0x40))
    assert result.message.startswith("gpu0: clocks held back at rest by ")
    assert ", " in result.message.removeprefix("gpu0: clocks held back at rest by ")
    assert "XX" not in result.message
    links = [{"active": True} for _ in range(16)] + [{"active": False}, {"state": 2}]
    result = _health(fake_gpus, h100_sxm(nvlink=links))
    assert result.message.startswith("gpu0: 16 of 18 NVLinks active (down: 16, 17 sleep); a H100")
    fewer = [{"active": True} for _ in range(12)]  # six links not even reported
    result = _health(fake_gpus, h100_sxm(nvlink=fewer))
    assert result.message.startswith("gpu0: 12 of 18 NVLinks active; a H100 SXM has 18")
    result = _health(fake_gpus, h100_sxm(fabric={"state": 3, "status": 7}))
    assert result.message == "gpu0: NVSwitch fabric registration failed (NVML status 7)"


def test_without_nvml_health_is_skip_with_the_reason(no_gpu: None) -> None:
    result = health.run(gpu_context())
    assert (result.name, result.area, result.status) == ("health", "HEALTH", Status.SKIP)
    assert result.message.startswith("NVML unavailable: ")


@pytest.mark.parametrize(
    ("fabric", "status", "text"),
    [
        # healthMask bits 0-1 = 1: degraded bandwidth; bits 4-5 = 1: route unhealthy
        (
            {"state": 3, "health_mask": 0x1},
            Status.FAIL,
            "NVSwitch fabric reports degraded bandwidth",
        ),
        ({"state": 3, "health_mask": 0x10}, Status.FAIL, "fabric reports route unhealthy"),
        ({"state": 3, "health_mask": 0x2 | 0x20}, Status.PASS, None),  # 2: the condition is false
        ({"error": 999}, Status.WARN, "fabric registration unreadable (NVMLError: NVML error 999)"),
        (None, Status.WARN, "fabric registration not reported by this driver"),
    ],
)
def test_the_fabric_of_an_nvswitch_model_is_judged_or_said_not_judged(
    fake_gpus: Any, fabric: dict[str, int] | None, status: Status, text: str | None
) -> None:
    result = _health(fake_gpus, h100_sxm(fabric=fabric))
    assert result.status is status, result.message
    if text is not None:
        assert text in result.message


@pytest.mark.parametrize(
    ("fabric", "status", "text"),
    [
        ({"state": 3}, Status.PASS, None),
        ({"state": 1}, Status.FAIL, "fabric registration not started"),
        ({"error": 999}, Status.WARN, "fabric registration unreadable (NVMLError: NVML error 999)"),
    ],
)
def test_a_driver_older_than_the_versioned_fabric_call_is_read_through_the_old_one(
    fake_gpus: Any, fabric: dict[str, int], status: Status, text: str | None
) -> None:
    # pynvml has nvmlDeviceGetGpuFabricInfoV whatever the driver; where the driver's library
    # lacks it the call raises FUNCTION_NOT_FOUND, which read as "unreadable" and left the
    # fabric unjudged on every such node
    fake_gpus({"gpus": [h100_sxm(fabric=fabric), h100_sxm(1)], "old_driver": True})
    result = health.run(gpu_context())
    assert result.status is status, result.message
    if text is not None:
        assert text in result.message
    assert result.details["gpus"][0]["fabric"]["state"] == (
        "unreadable" if "error" in fabric else _FABRIC_STATE[fabric["state"]]
    )


_FABRIC_STATE = {1: "not started", 3: "completed"}


def test_a_card_not_built_for_nvswitch_is_not_warned_about_its_fabric(fake_gpus: Any) -> None:
    gpu = h100_sxm(name="NVIDIA H100 PCIe", pci_device_id=0x233110DE, nvlink=None, fabric=None)
    assert _health(fake_gpus, gpu).status is Status.PASS


def test_every_fabric_condition_is_named(fake_gpus: Any) -> None:
    result = _health(fake_gpus, h100_sxm(fabric={"state": 3, "health_mask": 0x11}))
    assert result.message == ("gpu0: NVSwitch fabric reports degraded bandwidth, route unhealthy")
    result = _health(fake_gpus, h100_sxm(fabric=None))
    assert result.message == (
        "gpu0: NVSwitch fabric registration not reported by this driver: the fabric was not "
        "judged (a H100 SXM on an NVSwitch system registers with it)"
    )


@pytest.mark.parametrize("scope", ["volatile", "aggregate"])
@pytest.mark.parametrize(
    ("kind", "where", "limit"),
    [
        ("uncorrected", "sram", 0),  # any uncorrectable SRAM error fails
        ("corrected", "sram", 10_000),  # aznhc's check_gpu_ecc 20000000 10000 (ND H100 v5)
        ("corrected", "dram", 20_000_000),
        ("uncorrected", "dram", 20_000_000),
    ],
)
def test_every_ecc_rule_holds_at_its_limit_and_fails_one_past_it_in_each_scope(
    scope: str, kind: str, where: str, limit: int
) -> None:
    """Issue #30 §9: single-rule mutations of the ECC limits and of the aggregate counts
    survived the suite; each branch is pinned at its boundary, per scope."""
    from gpuaccept.probe.nvml_health import GpuHealth

    def judged(count: int) -> list[str]:
        gpu = GpuHealth(
            index=0, name="NVIDIA H100 80GB HBM3", ecc={f"{scope}_{kind}_{where}": count}
        )
        return health.judge_health(gpu)[0]

    assert judged(limit) == []
    [failure] = judged(limit + 1)
    assert failure.startswith(f"gpu0: {limit + 1} ")
    assert f"({scope})" in failure
    assert where.upper() in failure


def test_a_sites_rules_set_the_ras_limits() -> None:
    """Issue #31 §1: the ECC limits live in the action tables a site overrides (`[limit]`): a
    stricter site fails a GPU the built-in limit passes, and the message names the site's file."""
    from gpuaccept.actions import ActionRules, LimitRow, builtin_rules
    from gpuaccept.probe.nvml_health import GpuHealth

    gpu = GpuHealth(
        index=0,
        name="NVIDIA H100 80GB HBM3",
        ecc={"volatile_corrected_sram": 6},
        remapped_rows_uncorrectable=100,
        retired_pages_sbe=20,
        retired_pages_pending=True,
    )
    built_in = health.judge_health(gpu)[0]
    assert not [f for f in built_in if "limit" in f]
    site = builtin_rules().merged(
        ActionRules.model_validate(
            {
                "limit": {
                    "sram_corrected": LimitRow(value=5),
                    "remapped_rows_uncorrectable": LimitRow(value=100),
                    "retirement_full_pages": LimitRow(value=20),
                }
            }
        ),
        "site strict.toml",
    )
    failures = health.judge_health(gpu, rules=site)[0]
    assert "gpu0: 6 corrected SRAM ECC errors (volatile) above the limit 5 of site strict.toml" in (
        failures
    )
    assert any(
        "100 rows remapped" in f and "the limit 100 of site strict.toml" in f for f in failures
    )
    assert any("page retirement table full (20 pages retired" in f for f in failures)


def test_any_volatile_uncorrectable_ecc_error_fails_below_every_location_limit(
    fake_gpus: Any,
) -> None:
    """Issue #50 §7: the total rule survived its own deletion, since every ECC test also tripped
    a per-location rule. One volatile uncorrectable DRAM error is far below aznhc's DRAM limit
    (20,000,000) and is not SRAM: only the total catches it, as DCGM's health watch fails any
    volatile DBE (modules/health/DcgmHealthWatch.cpp:1735-1741 at NVIDIA/DCGM 72fa3fe,
    DCGM_FR_VOLATILE_DBE_DETECTED on `DCGM_FI_DEV_ECC_DBE_VOL_TOTAL > 0`)."""
    result = _health(fake_gpus, h100_sxm(ecc=_ecc(volatile_uncorrected_dram=1)))
    assert result.status is Status.FAIL, result.message
    assert "gpu0: 1 uncorrectable ECC error(s)" in result.message
    # the same error in the aggregate (since the driver loaded, not this boot) is the DRAM
    # limit's to judge: none of the total rule's business
    assert _health(fake_gpus, h100_sxm(ecc=_ecc(aggregate_uncorrected_dram=1))).status is (
        Status.PASS
    )


@pytest.mark.parametrize(
    ("action", "row", "status"),
    [
        (3, "reset-gpu", Status.FAIL),  # drain P2P: DCGM warns; a site that takes it out fails it
        (1, "monitor", Status.WARN),  # GPU reset: a site that only watches it warns
        (1, "none", Status.PASS),  # ... or ignores it
        (1, "reset-gpu", Status.FAIL),  # the built-in row, set again: the built-in verdict
        (3, "drain", Status.WARN),  # drain P2P's built-in row: DCGM's verdict stays
    ],
)
def test_a_sites_recovery_action_row_decides_fail_or_warn(
    fake_gpus: Any, action: int, row: str, status: Status
) -> None:
    """Issue #50 §1: `--rules` overrides any row, fail vs warn included; the NVML recovery
    action's verdict was a fixed list whatever the site's [recovery_action] row said."""
    from dataclasses import replace

    from gpuaccept.actions import Action, builtin_rules

    names = {1: "GPU reset", 3: "drain P2P"}
    base = builtin_rules()
    rules = base.model_copy(
        update={"recovery_action": {**base.recovery_action, names[action]: Action(row)}}
    )
    fake_gpus({"gpus": [h100_sxm(recovery_action=action), h100_sxm(1)]})
    result = health.run(replace(gpu_context(), action_rules=rules))
    assert result.status is status, result.message


def test_a_gpu_above_its_maximum_operating_temperature_at_rest_warns_as_gpud_reads_it(
    fake_gpus: Any,
) -> None:
    # gpud: degraded at any time (component.go:228-236); judged by DCGM_FR_TEMP_VIOLATION's row,
    # MONITOR: a warning, as under load
    result = _health(fake_gpus, h100_sxm(temperature_c=91))
    assert result.status is Status.WARN, result.message
    [found] = [f for f in result.details["findings"] if "°C" in f["text"]]
    assert found["text"] == (
        "gpu0: 91 °C at rest, above its 87 °C maximum operating temperature "
        "(DCGM_FR_TEMP_VIOLATION: check this GPU's cooling and the node's airflow)"
    )
    assert (found["kind"], found["code"]) == ("dcgm-error", "42")
    assert result.details["gpus"][0]["temperature_limit_c"] == 87.0
    assert _health(fake_gpus, h100_sxm(temperature_c=87)).status is Status.PASS
    no_limit = h100_sxm(temperature_c=91, temperature_thresholds={})
    assert _health(fake_gpus, no_limit).status is Status.PASS  # nothing to hold it to


def test_a_sites_row_makes_the_temperature_at_rest_fail_and_the_slowdown_limit_is_named(
    fake_gpus: Any, tmp_path: Any
) -> None:
    from dataclasses import replace

    from gpuaccept.actions import load_rules

    site = tmp_path / "rules.toml"
    site.write_text('[dcgm_error]\n42 = { action = "drain" }\n')
    fake_gpus({"gpus": [h100_sxm(0, temperature_c=92, temperature_thresholds={"slowdown": 90})]})
    result = health.run(replace(gpu_context(), action_rules=load_rules(site)))
    assert result.status is Status.FAIL, result.message
    assert "gpu0: 92 °C at rest, above its 90 °C slowdown temperature" in result.message
