"""The NVML readers against a GPU whose every fact is a different number: a counter read from the
wrong call, scope, error type or location, or put in the wrong field, reads another GPU's state.
The verdicts are tested through these readers elsewhere (tests/checks); here, what they read."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from gpuaccept.probe import nvml_health
from tests import fake_nvml
from tests.checks.conftest import h100_sxm

UUID = "GPU-5e1f0000-0000-0000-0000-000000000001"

DISTINCT: dict[str, Any] = {
    "uuid": UUID,
    "name": "NVIDIA H100 80GB HBM3",
    "pci_device_id": 0x233010DE,
    "ecc": {
        "volatile": {
            "corrected": {"dram": 3, "sram": 5},
            "uncorrected": {"dram": 7, "sram": 11},
        },
        "aggregate": {
            "corrected": {"dram": 13, "sram": 17},
            "uncorrected": {"dram": 19, "sram": 23},
        },
    },
    "remapped_rows": [29, 31, 1, 0],
    "retired_pages": {"sbe": 2, "dbe": 4, "pending": True},
    "pcie": {"gen": 3, "gen_max_gpu": 5, "gen_max_system": 4, "width": 8, "width_max": 16},
    "pcie_replay": 37,
    "persistence": 1,
    "mig": {"current": 0, "pending": 1},
    "throttle": 0,
    "nvlink": [
        {"active": True, "version": 4, "crc": 41, "crc_data": 2, "replay": 43, "recovery": 47},
        # a board without the data CRC counter: the flit CRC alone
        {"active": False, "version": 3, "crc": 53, "crc_data": None, "replay": 59, "recovery": 61},
        {"state": 5, "version": 4},  # a state this gpuaccept does not name
    ],
    "fabric": {"state": 3, "status": 0, "clique": 1},
}


@pytest.fixture
def nvml() -> Iterator[Any]:
    yield fake_nvml
    fake_nvml.use(None)


def _handle(nvml: Any, gpu: dict[str, Any]) -> Any:
    nvml.use({"gpus": [gpu]})
    nvml.nvmlInit()
    return nvml.nvmlDeviceGetHandleByIndex(0)


def test_the_counters_are_read_from_their_own_calls(nvml: Any) -> None:
    handle = _handle(nvml, DISTINCT)
    counters = nvml_health.read_counters(nvml, handle, UUID, 0)
    assert counters.uuid == UUID
    assert counters.index == 0
    # volatile totals (DRAM + SRAM), as DCGM's volatile ECC watch reads them
    assert counters.ecc_corrected_volatile == 3 + 5
    assert counters.ecc_uncorrected_volatile == 7 + 11
    assert counters.pcie_replays == 37
    assert counters.pcie_gen_max == 5  # the GPU's own maximum, not the system's (4)
    assert counters.pcie_width_max == 16
    # CRC: flit + data errors (the data counter where the board has one)
    assert counters.nvlink == {0: (43, 43, 47), 1: (53, 59, 61), 2: (0, 0, 0)}
    assert counters.nvlink_uncounted == ()
    assert counters.nvlink_recoveries is None  # asked only where a link has no DL counters


def test_health_reads_every_fact_into_its_own_field(nvml: Any) -> None:
    _handle(nvml, DISTINCT)
    health = nvml_health.read_gpu_health(nvml, 0, UUID)
    assert health.uuid == UUID
    assert health.name == "NVIDIA H100 80GB HBM3"
    assert health.pci_device_id == 0x233010DE
    assert health.ecc_uncorrectable_volatile == 7 + 11
    assert health.ecc == {
        "volatile_corrected_dram": 3,
        "volatile_corrected_sram": 5,
        "volatile_uncorrected_dram": 7,
        "volatile_uncorrected_sram": 11,
        "aggregate_corrected_dram": 13,
        "aggregate_corrected_sram": 17,
        "aggregate_uncorrected_dram": 19,
        "aggregate_uncorrected_sram": 23,
    }
    assert (health.retired_pages_sbe, health.retired_pages_dbe) == (2, 4)
    assert health.retired_pages_pending is True
    assert (health.remapped_rows_correctable, health.remapped_rows_uncorrectable) == (29, 31)
    assert (health.remapped_rows_pending, health.remapped_rows_failed) == (True, False)
    assert (health.pcie_gen_current, health.pcie_gen_max_gpu, health.pcie_gen_max_system) == (
        3,
        5,
        4,
    )
    assert (health.pcie_width_current, health.pcie_width_max) == (8, 16)
    assert health.pcie_replays == 37
    assert health.persistence_mode is True
    assert health.mig_enabled is False  # the current mode, not the pending one
    assert [(link.link, link.active, link.state, link.version) for link in health.nvlinks] == [
        (0, True, "active", 4),
        (1, False, "inactive", 3),
        (2, False, "state 5", 4),
    ]
    assert health.fabric is not None
    assert health.throttle_reasons == []
    # found by its index when torch gave no UUID: the UUID is NVML's
    by_index = nvml_health.read_gpu_health(nvml, 0)
    assert by_index.uuid == UUID
    assert by_index.ecc == health.ecc


def _without(*keys: str) -> dict[str, Any]:
    return {key: value for key, value in DISTINCT.items() if key not in keys}


def test_what_a_board_does_not_report_is_none_never_zero(nvml: Any) -> None:
    """A count NVML does not give is unknown: a zero would pass a threshold it never read."""
    gone = ("ecc", "remapped_rows", "retired_pages", "pcie", "pcie_replay", "persistence", "mig")
    bare = _without(*gone, "nvlink", "fabric")
    handle = _handle(nvml, bare)
    counters = nvml_health.read_counters(nvml, handle, UUID, 0)
    assert (counters.ecc_corrected_volatile, counters.ecc_uncorrected_volatile) == (None, None)
    assert (counters.pcie_replays, counters.pcie_gen_max, counters.pcie_width_max) == (
        None,
        None,
        None,
    )
    assert counters.nvlink == {}
    health = nvml_health.read_gpu_health(nvml, 0, UUID)
    assert health.ecc_uncorrectable_volatile is None
    assert health.ecc == {}
    for name in (
        "retired_pages_pending",
        "retired_pages_sbe",
        "retired_pages_dbe",
        "remapped_rows_pending",
        "remapped_rows_failed",
        "remapped_rows_correctable",
        "remapped_rows_uncorrectable",
        "pcie_gen_current",
        "pcie_gen_max_gpu",
        "pcie_gen_max_system",
        "pcie_width_current",
        "pcie_width_max",
        "pcie_replays",
        "persistence_mode",
        "mig_enabled",
        "recovery_action",
    ):
        assert getattr(health, name) is None, name
    assert health.fabric is not None
    assert health.fabric.state == "not supported"


def test_zero_counts_read_as_zero_not_as_unknown(nvml: Any) -> None:
    """The other side: a board that reports no error reads 0 (a clean GPU), not None."""
    clean = h100_sxm()  # a healthy board's counts: every one 0
    zeros = {
        **DISTINCT,
        **{key: clean[key] for key in ("ecc", "remapped_rows", "retired_pages", "pcie_replay")},
        "persistence": 0,
    }
    handle = _handle(nvml, zeros)
    counters = nvml_health.read_counters(nvml, handle, UUID, 0)
    assert (counters.ecc_corrected_volatile, counters.ecc_uncorrected_volatile) == (0, 0)
    assert counters.pcie_replays == 0
    health = nvml_health.read_gpu_health(nvml, 0, UUID)
    assert health.ecc_uncorrectable_volatile == 0
    assert set(health.ecc.values()) == {0}
    assert len(health.ecc) == 8
    assert (health.retired_pages_sbe, health.retired_pages_dbe) == (0, 0)
    assert health.retired_pages_pending is False
    assert (health.remapped_rows_correctable, health.remapped_rows_uncorrectable) == (0, 0)
    assert (health.remapped_rows_pending, health.remapped_rows_failed) == (False, False)
    assert health.persistence_mode is False


@pytest.mark.parametrize(
    ("value_type", "action", "recoveries"),
    [
        (0, 2, (3, 1)),  # double
        (1, 3, (2**31 + 5, 7)),  # unsigned int
        (2, 4, (2**40 + 3, 2**33)),  # unsigned long
        (3, 5, (2**40 + 9, 1)),  # unsigned long long
        (4, 6, (-(2**35), 4)),  # signed long long (a sign that only its member reads)
        (5, 7, (-3, 3)),  # signed int
        (6, 1, (65535, 2)),  # unsigned short
    ],
)
def test_a_field_value_is_read_through_the_member_its_type_names(
    nvml: Any, value_type: int, action: int, recoveries: tuple[int, int]
) -> None:
    """NVML says which member of the value union it filled (valueType): the recovery action
    (field 230) and NVLink5's recovery counts (213/214) read right whatever the type, where
    reading another member gives the union's other bytes."""
    gpu = {**DISTINCT, "recovery_action": action, "nvlink5_recoveries": [list(recoveries)]}
    dl_counters = dict.fromkeys(("crc", "crc_data", "replay", "recovery"))  # none on NVLink5
    gpu["nvlink"] = [{"active": True, "version": 5, **dl_counters}]
    nvml.use({"gpus": [gpu], "field_value_type": value_type})
    nvml.nvmlInit()
    handle = nvml.nvmlDeviceGetHandleByIndex(0)
    assert nvml_health.read_recovery_action(nvml, handle) == nvml_health.RECOVERY_ACTIONS[action]
    assert nvml_health.read_nvlink_recoveries(nvml, handle) == recoveries
    counters = nvml_health.read_counters(nvml, handle, UUID, 0)
    assert counters.nvlink_uncounted == (0,)
    assert counters.nvlink_recoveries == recoveries
