"""The fused Triton n-body kernel: its CPU twin is the same kernel in Triton's interpreter.

Triton decides interpreter or compiler once per process, so the CPU twin runs in a child process
started with TRITON_INTERPRET=1; on a GPU node the `gpu` test runs the compiled kernel.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest
import torch

from gpuaccept.measure.nbody import FUSED, TILED, choose_kernel, nbody_max_relative_error
from gpuaccept.measure.nbody_triton import triton_available

needs_triton = pytest.mark.skipif(
    not triton_available(), reason="Triton is not installed: the fused kernel cannot run here"
)


def _interpreted(script: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = os.environ | {"TRITON_INTERPRET": "1", "CUDA_VISIBLE_DEVICES": ""}
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(script), *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        check=False,
    )


@needs_triton
def test_the_fused_kernel_matches_float64_and_conserves_momentum() -> None:
    done = _interpreted(
        """
        import torch
        from gpuaccept.measure.nbody import (
            FUSED, initial_bodies, kernel_accelerations, nbody_max_relative_error,
        )
        cpu = torch.device("cpu")
        # 77 and 300 bodies: neither a multiple of the tile, so the masked edges are exercised
        for dtype in ("fp32", "fp64"):
            for bodies in (77, 300):
                print(dtype, bodies, nbody_max_relative_error(cpu, dtype, bodies, 64, FUSED))
        positions, _, masses = initial_bodies(300, cpu, "fp64")
        force = masses[:, None] * kernel_accelerations(FUSED, positions, masses, 64)
        print("momentum", float(force.sum(0).abs().max()))
        """
    )
    assert done.returncode == 0, done.stderr
    lines = dict(line.rsplit(" ", 1) for line in done.stdout.splitlines())
    for bodies in (77, 300):
        assert float(lines[f"fp32 {bodies}"]) < 1e-4
        assert float(lines[f"fp64 {bodies}"]) < 1e-12
    assert float(lines["momentum"]) < 1e-9  # Newton's third law: internal forces cancel


@needs_triton
def test_bench_nbody_names_the_fused_kernel_that_ran() -> None:
    done = _interpreted(
        "import sys; from gpuaccept.cli import main; sys.argv[0] = 'gpuaccept'; main()",
        *("bench", "nbody", "--device", "cpu", "--kernel", "triton"),
        *("--bodies", "160", "-w", "0", "-n", "1", "--no-history"),
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "kernel triton-fused" in done.stdout
    assert "triton-fused" in done.stdout.split("kernel triton-fused", 1)[1]  # in the table too


def test_triton_on_the_cpu_without_the_interpreter_is_refused() -> None:
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    command = ["bench", "nbody", "--device", "cpu", "--kernel", "triton", "--no-history"]
    done = subprocess.run(
        [sys.executable, "-m", "gpuaccept", *command],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert done.returncode == 3
    assert "Traceback" not in done.stderr
    reason = "Triton is not installed" if not triton_available() else "TRITON_INTERPRET=1"
    assert reason in done.stderr
    assert done.stdout == ""


def test_auto_takes_the_tiled_torch_kernel_on_the_cpu() -> None:
    assert choose_kernel(torch.device("cpu"), "auto") == TILED
    assert choose_kernel(torch.device("cpu"), "torch") == TILED


@pytest.mark.gpu
@needs_triton
def test_the_compiled_fused_kernel_on_a_gpu() -> None:
    gpu = torch.device("cuda")
    assert choose_kernel(gpu, "auto") == FUSED
    assert nbody_max_relative_error(gpu, "fp32", 4099, 256, FUSED) < 1e-4
    assert nbody_max_relative_error(gpu, "fp64", 1021, 256, FUSED) < 1e-12
