"""The machine behind the hostname (issue #31 §4): systemd's machine-id and the DMI product
serial, read with the sysfs reader's bounds; whatever cannot be read is absent, never an error,
and never one of the node's unreadable attributes."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from gpuaccept.probe import sysfs
from gpuaccept.record import environment

MACHINE_ID = "0123456789abcdef0123456789abcdef"


def _dmi(root: Path, serial: str | None) -> None:
    path = root / "class/dmi/id"
    path.mkdir(parents=True)
    if serial is not None:
        (path / "product_serial").write_text(serial + "\n")


def test_the_machine_id_and_the_product_serial_are_captured(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "machine-id").write_text(MACHINE_ID + "\n")
    _dmi(tmp_path / "sys", "SN-4711\x07")
    monkeypatch.setattr(environment, "_MACHINE_ID", tmp_path / "machine-id")
    monkeypatch.setenv("GPUACCEPT_SYSFS_ROOT", str(tmp_path / "sys"))
    assert environment.machine_identity() == {
        "machine_id": MACHINE_ID,
        "product_serial": "SN-4711",  # the bell character dropped
    }
    captured = environment.capture_environment()["system"]
    assert (captured["machine_id"], captured["product_serial"]) == (MACHINE_ID, "SN-4711")


@pytest.mark.parametrize("placeholder", ["", "Not Specified", "To Be Filled By O.E.M.", "0"])
def test_a_vendors_placeholder_is_no_serial(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, placeholder: str
) -> None:
    _dmi(tmp_path, placeholder)
    monkeypatch.setenv("GPUACCEPT_SYSFS_ROOT", str(tmp_path))
    assert environment.machine_identity()["product_serial"] is None


@pytest.mark.parametrize("form", ["missing", "not-hex", "fifo", "dev-zero", "huge", "loop", "dir"])
def test_a_hostile_identity_file_is_absent_not_a_hang_nor_a_problem(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, form: str
) -> None:
    path = tmp_path / "machine-id"
    if form == "not-hex":
        path.write_text("not-a-machine-id-at-all-not-hex!")
    elif form == "fifo":
        os.mkfifo(path)
    elif form == "dev-zero":
        path.symlink_to("/dev/zero")
    elif form == "huge":
        with path.open("wb") as stream:
            stream.truncate(2 * 1024**3)
    elif form == "loop":
        path.symlink_to(path.name)
    elif form == "dir":
        path.mkdir()
    monkeypatch.setattr(environment, "_MACHINE_ID", path)
    _dmi(tmp_path / "sys", None)
    if form not in ("missing", "not-hex"):  # the DMI serial is the same hostile file
        (tmp_path / "sys/class/dmi/id/product_serial").symlink_to(path)
    monkeypatch.setenv("GPUACCEPT_SYSFS_ROOT", str(tmp_path / "sys"))
    before = dict(sysfs.problems())
    started = time.monotonic()
    assert environment.machine_identity() == {"machine_id": None, "product_serial": None}
    assert time.monotonic() - started < sysfs.READ_SECONDS + 2
    assert sysfs.problems() == before  # an identity nobody exposes is not the node's fault
