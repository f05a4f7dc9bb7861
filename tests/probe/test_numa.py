"""The CPUs near a GPU, from a sysfs tree laid out as the kernel's (sysfs-bus-pci local_cpulist),
and the worker's affinity restricted to them."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from gpuaccept.probe.numa import local_cpus, parse_cpulist


def _sysfs(tmp_path: Path, device: str, cpulist: str) -> Path:
    folder = tmp_path / "sys" / "bus" / "pci" / "devices" / device
    folder.mkdir(parents=True)
    (folder / "local_cpulist").write_text(cpulist + "\n")
    return tmp_path / "sys"


@pytest.mark.parametrize(
    ("text", "cpus"),
    [("0-3,8,10-11", {0, 1, 2, 3, 8, 10, 11}), ("5", {5}), ("", set())],
)
def test_cpulists_are_read_as_the_kernel_writes_them(text: str, cpus: set[int]) -> None:
    assert parse_cpulist(text) == cpus


@pytest.mark.parametrize(
    "text", ["3-1", "a-b", "0-99999999", "abc", "0-999999999", "-1", "1-2-3", "0x3", "7-" * 5000]
)
def test_what_is_not_a_cpulist_is_refused_in_one_short_line(text: str) -> None:
    with pytest.raises(ValueError, match=r"^not a cpulist") as refused:
        parse_cpulist(text)
    assert len(str(refused.value)) < 80
    assert "\n" not in str(refused.value)


def test_torch_s_bus_id_finds_the_kernel_s_device(tmp_path: Path) -> None:
    sysfs = _sysfs(tmp_path, "0000:cb:00.0", "48-95,144-191")
    assert local_cpus("00000000:CB:00.0", sysfs) == set(range(48, 96)) | set(range(144, 192))
    assert local_cpus("0000:cb:00.0", sysfs) == set(range(48, 96)) | set(range(144, 192))
    assert local_cpus("0000:1b:00.0", sysfs) is None  # no such device: locality unknown
    assert local_cpus("not a bus id", sysfs) is None


def test_the_worker_runs_near_its_gpu(tmp_path: Path) -> None:
    """In a child process (affinity is per process): only the allowed CPUs near the GPU."""
    allowed = sorted(os.sched_getaffinity(0))
    near = allowed[:1]
    sysfs = _sysfs(tmp_path, "0000:cb:00.0", ",".join(map(str, near)))
    code = (
        "import os, sys; from pathlib import Path; from gpuaccept.probe.numa import run_near\n"
        f"print(sorted(run_near('00000000:cb:00.0', Path({str(sysfs)!r})) or []))\n"
        "print(sorted(os.sched_getaffinity(0)))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    changed, now = done.stdout.splitlines()
    if len(allowed) > 1:
        assert changed == str(near)
        assert now == str(near)
    else:  # one CPU allowed already: nothing to change
        assert changed == "[]"
