"""sysfs read through one bounded reader (issue #30 §2): a FIFO, /dev/zero, a huge file, a
symlink loop, a wedged attribute or a strange name never hangs a run, never raises, and is
noted as unreadable."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gpuaccept.cli import app
from gpuaccept.measure.host import cpu_mhz
from gpuaccept.probe import sysfs
from gpuaccept.probe.fabric import read_inventory, read_port_counters
from tests.fabric_tree import hgx_tree, port_dir


@pytest.fixture(autouse=True)
def _never_hang() -> Iterator[None]:
    """A read that blocks fails the test after 20 s instead of hanging the suite."""

    def hung(signum: int, frame: object) -> None:
        raise TimeoutError("a sysfs read hung")

    previous = signal.signal(signal.SIGALRM, hung)
    signal.alarm(20)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, previous)


def test_a_fifo_dev_zero_and_a_huge_file_are_unreadable_at_once(tmp_path: Path) -> None:
    fifo, huge, zero = tmp_path / "fifo", tmp_path / "fw_ver", tmp_path / "rate"
    os.mkfifo(fifo)
    with huge.open("wb") as stream:
        stream.truncate(3 * 1024**3)  # sparse: 3 GB read whole would take the memory
    zero.symlink_to("/dev/zero")
    started = time.monotonic()
    assert [sysfs.read_attribute(p) for p in (fifo, huge, zero)] == [None, None, None]
    assert time.monotonic() - started < 5
    said = sysfs.problems()
    assert said[str(fifo)] == "not a regular file"
    assert said[str(zero)] == "not a regular file"
    assert said[str(huge)].startswith("larger than 65536 bytes")


def test_a_wedged_attribute_costs_one_bound_and_its_directory_is_not_read_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    wedged = tmp_path / "mlx5_3"
    wedged.mkdir()
    (wedged / "state").write_text("4: ACTIVE\n")
    (tmp_path / "ok").write_text("1\n")
    real = sysfs._read_now

    def blocking(path: Path) -> tuple[str | None, str | None]:
        if path.parent == wedged:
            time.sleep(30)  # a driver's show() that never returns
        return real(path)

    monkeypatch.setattr(sysfs, "_read_now", blocking)
    monkeypatch.setattr(sysfs, "READ_SECONDS", 0.3)
    started = time.monotonic()
    assert sysfs.read_attribute(wedged / "state") is None
    assert sysfs.read_attribute(wedged / "rate") is None  # not waited on a second time
    assert time.monotonic() - started < 2
    assert sysfs.read_attribute(tmp_path / "ok") == "1"
    assert "did not answer within 0.3 s" in sysfs.problems()[str(wedged / "state")]


def test_hostile_shapes_in_a_fabric_tree_never_raise(tmp_path: Path) -> None:
    root = hgx_tree(tmp_path)
    port = port_dir(root, 0)
    (port / "rate").unlink()
    (port / "rate").symlink_to("/dev/zero")
    counter = port / "counters" / "symbol_error"
    counter.unlink()
    os.mkfifo(counter)
    (port / "pkeys").mkdir(exist_ok=True)
    (port / "pkeys" / "0").write_text("0xffff\n")
    (port / "pkeys" / "1").write_text("not hex\n")
    with (root / "sys" / "class" / "infiniband" / "mlx5_1" / "fw_ver").open("wb") as stream:
        stream.truncate(3 * 1024**3)
    loop = root / "sys" / "class" / "infiniband" / "mlx5_9"
    loop.mkdir()
    (loop / "device").symlink_to("device")  # a symlink loop
    (loop / "ports").symlink_to("ports")
    (root / "sys" / "devices" / "system" / "node" / "node9x").mkdir(parents=True)
    inventory = read_inventory(root)
    ports = {p.name: p for p in inventory.ports}
    assert ports["mlx5_0:1"].rate_gbps is None
    assert ports["mlx5_0:1"].pkeys == ("0xffff",)
    assert ports["mlx5_1:1"].firmware is None
    assert "mlx5_9:1" not in ports
    assert 9 not in inventory.numa_cpus
    assert read_port_counters(root)["mlx5_0:1"]["symbol_error"] is None


def test_cpu_frequencies_skip_what_is_not_a_cpu_or_not_a_number(tmp_path: Path) -> None:
    base = tmp_path / "sys" / "devices" / "system" / "cpu"
    for name, khz in (("cpu0", "2400000"), ("cpu1", "garbage"), ("cpufreq", "1"), ("cpu2x", "1")):
        (base / name / "cpufreq").mkdir(parents=True)
        (base / name / "cpufreq" / "scaling_max_freq").write_text(khz + "\n")
    os.mkfifo(base / "cpu1" / "cpufreq" / "fifo")
    assert cpu_mhz(tmp_path) == {0: 2400.0}


@pytest.mark.parametrize("command", [["accept", "--no-history"], ["burnin", "--duration", "2s"]])
@pytest.mark.parametrize("shape", ["missing", "file", "no sys"])
def test_a_sysfs_root_that_holds_no_sys_is_refused_not_read_as_zero_ports(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, command: list[str], shape: str
) -> None:
    root = tmp_path / "root"
    if shape == "file":
        root.write_text("")
    elif shape == "no sys":
        root.mkdir()
    monkeypatch.setenv("GPUACCEPT_SYSFS_ROOT", str(root))
    result = CliRunner().invoke(app, [*command, "--device", "cpu"])
    assert result.exit_code == 2, result.output
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith(f"gpuaccept {command[0]}: error: GPUACCEPT_SYSFS_ROOT={root}: ")


def test_a_probe_reads_inline_in_one_watched_thread_and_a_wedge_restarts_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue #50 §7: a thread per read timed out a node of 20,008 ports. A whole probe reads in
    one watched thread; a read wedged past READ_SECONDS marks its directory, the thread is left
    (and unwinds when its read returns, reading nothing more), and the probe runs again."""
    import threading

    root = hgx_tree(tmp_path)
    wedged = port_dir(root, 3)
    release = threading.Event()
    readers: set[str] = set()
    real = sysfs._read_now

    def blocking(path: Path) -> tuple[str | None, str | None]:
        readers.add(threading.current_thread().name)
        if path.parent == wedged:
            release.wait(10)  # a driver's show() that does not return
        return real(path)

    monkeypatch.setattr(sysfs, "_read_now", blocking)
    monkeypatch.setattr(sysfs, "READ_SECONDS", 0.3)
    started = time.monotonic()
    inventory = read_inventory(root)
    assert time.monotonic() - started < 3
    assert readers == {"gpuaccept-sysfs"}  # never a thread per read
    ports = {p.name: p for p in inventory.ports}
    assert ports["mlx5_3:1"].state is None
    assert ports["mlx5_3:1"].firmware == "28.39.1002"  # the device's own directory answered
    assert [ports[f"mlx5_{i}:1"].state for i in (0, 7)] == ["ACTIVE", "ACTIVE"]
    assert "did not answer within 0.3 s" in sysfs.problems()[str(wedged / "state")]
    left = [t for t in threading.enumerate() if t.name == "gpuaccept-sysfs"]
    release.set()
    for thread in left:
        thread.join(2)
    assert not any(thread.is_alive() for thread in left)


def test_a_probes_error_reaches_its_caller_and_a_nested_probe_runs_inline() -> None:
    from gpuaccept.errors import InputError

    def refused() -> None:
        raise InputError("said in the probe")

    with pytest.raises(InputError, match="said in the probe"):
        sysfs.watched(refused)
    import threading

    outer = sysfs.watched(lambda: sysfs.watched(lambda: threading.current_thread().name))
    assert outer == "gpuaccept-sysfs"
