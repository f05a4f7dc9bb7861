"""The dma-buf probe (probe/dmabuf.py) against a stand-in CUDA driver library built here from C:
the same ctypes calls NCCL's question makes (cuDeviceGetAttribute with attribute 124), each
answer the library can give, and a driver that never answers."""

from __future__ import annotations

import ctypes
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from gpuaccept.probe import dmabuf

_FAKE_LIBCUDA = r"""
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
static int setting(const char *name, int otherwise) {
    const char *value = getenv(name);
    return value ? atoi(value) : otherwise;
}
int cuInit(unsigned int flags) {
    if (flags != 0) return 1;
    if (setting("FAKE_CU_HANG", 0)) sleep(30);
    return setting("FAKE_CU_INIT", 0);
}
int cuDriverGetVersion(int *version) { *version = setting("FAKE_CU_VERSION", 12040); return 0; }
int cuDeviceGetCount(int *count) { *count = setting("FAKE_CU_COUNT", 2); return 0; }
int cuDeviceGet(int *device, int ordinal) {
    if (ordinal < 0 || ordinal >= setting("FAKE_CU_COUNT", 2)) return 101;
    *device = 1000 + ordinal;
    return 0;
}
/* FAKE_CU_DMABUF: one digit per device ("11", "10"); attribute 124 only */
int cuDeviceGetAttribute(int *value, int attribute, int device) {
    const char *flags = getenv("FAKE_CU_DMABUF");
    int ordinal = device - 1000;
    if (attribute != 124 || !flags || ordinal < 0 || ordinal >= (int)strlen(flags)) return 1;
    *value = flags[ordinal] - '0';
    return 0;
}
"""


@pytest.fixture(scope="module")
def libcuda(tmp_path_factory: pytest.TempPathFactory) -> Path:
    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        pytest.skip("no C compiler to build the stand-in CUDA driver library")
    where = tmp_path_factory.mktemp("libcuda")
    (where / "libcuda.c").write_text(_FAKE_LIBCUDA)
    subprocess.run(
        [compiler, "-shared", "-fPIC", "-o", str(where / "libcuda.so.1"), str(where / "libcuda.c")],
        check=True,
    )
    return where / "libcuda.so.1"


@pytest.fixture
def driver(libcuda: Path, monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    monkeypatch.setattr(dmabuf, "_load_libcuda", lambda: ctypes.CDLL(str(libcuda)))
    for name in ("FAKE_CU_HANG", "FAKE_CU_INIT", "FAKE_CU_VERSION", "FAKE_CU_COUNT"):
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


@pytest.mark.parametrize(
    ("settings", "answer"),
    [
        ({"FAKE_CU_DMABUF": "11"}, True),  # every GPU supports it
        ({"FAKE_CU_DMABUF": "10"}, False),  # one does not: NCCL stages through host memory
        ({"FAKE_CU_DMABUF": "01"}, False),
        ({"FAKE_CU_DMABUF": "1"}, None),  # the driver cannot answer for the second GPU
        ({"FAKE_CU_DMABUF": "11", "FAKE_CU_INIT": "100"}, None),  # no device: cuInit fails
        ({"FAKE_CU_DMABUF": "11", "FAKE_CU_VERSION": "11060"}, None),  # older than NCCL's 11.7
        ({"FAKE_CU_DMABUF": "11", "FAKE_CU_VERSION": "11070"}, True),
        ({"FAKE_CU_DMABUF": "", "FAKE_CU_COUNT": "0"}, None),  # no GPU
        ({"FAKE_CU_DMABUF": "1", "FAKE_CU_COUNT": "1"}, True),  # one GPU is enough to ask
    ],
)
def test_the_drivers_answer(
    driver: pytest.MonkeyPatch, settings: dict[str, str], answer: bool | None
) -> None:
    for name, value in settings.items():
        driver.setenv(name, value)
    assert dmabuf.dmabuf_supported() is answer


def test_a_driver_that_never_answers_is_not_known_within_the_bound(
    driver: pytest.MonkeyPatch,
) -> None:
    driver.setenv("FAKE_CU_DMABUF", "11")
    driver.setenv("FAKE_CU_HANG", "1")
    started = time.monotonic()
    assert dmabuf.dmabuf_supported(seconds=1.0) is None
    assert time.monotonic() - started < 5


def test_no_driver_library_is_not_known(monkeypatch: pytest.MonkeyPatch) -> None:
    def missing() -> None:
        raise OSError("libcuda.so.1: cannot open shared object file")

    monkeypatch.setattr(dmabuf, "_load_libcuda", missing)
    assert dmabuf.dmabuf_supported() is None


def test_a_driver_that_never_answers_does_not_hold_the_process_at_exit(libcuda: Path) -> None:
    """The reader thread left waiting on a wedged driver must not keep gpuaccept from exiting
    (accept would hang after writing its report)."""
    import os
    import sys

    program = (
        "import ctypes, time\n"
        "from gpuaccept.probe import dmabuf\n"
        f"dmabuf._load_libcuda = lambda: ctypes.CDLL({str(libcuda)!r})\n"
        "assert dmabuf.dmabuf_supported(seconds=0.5) is None\n"
    )
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-c", program],
        env=os.environ | {"FAKE_CU_HANG": "1", "FAKE_CU_DMABUF": "11"},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert time.monotonic() - started < 15  # not the driver's 30 s
