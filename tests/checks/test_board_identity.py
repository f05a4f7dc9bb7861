"""Each GPU's serial and board part number from NVML (issue #31 §4): what an RMA names."""

from __future__ import annotations

from typing import Any

from gpuaccept.probe.nvml_health import board_identity
from tests.checks.conftest import h100_sxm


def test_the_serial_and_part_number_are_read_and_kept_printable(fake_gpus: Any) -> None:
    fake_gpus(
        {
            "gpus": [
                h100_sxm(0, serial="1654922003456", board_part_number="692-2G520-0200-000"),
                h100_sxm(1, serial="\x1b[31m" + "9" * 100),
            ]
        }
    )
    assert board_identity(0, "GPU-00000000-0000-0000-0000-000000000000") == {
        "serial": "1654922003456",
        "board_part_number": "692-2G520-0200-000",
    }
    # an escape sequence is not printed into a report or a reason, and the text is bounded
    second = board_identity(1, "GPU-00000000-0000-0000-0000-000000000001")
    assert second["serial"] == ("[31m" + "9" * 100)[:64]
    assert second["board_part_number"] is None  # the board does not report one


def test_no_nvml_or_no_such_gpu_is_no_identity(fake_gpus: Any) -> None:
    fake_gpus({"gpus": [h100_sxm(0, serial="1")]})
    assert board_identity(7, "GPU-not-here") == {"serial": None, "board_part_number": None}
