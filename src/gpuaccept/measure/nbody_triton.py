"""The fused all-pairs n-body kernel (Triton): every interaction stays in registers.

The tiled torch code in `nbody` sends tile x N x 3 temporaries through memory, so on a GPU it
measures HBM, not arithmetic. Here each program owns BLOCK_I bodies, keeps their positions and
accelerations in registers, and streams every other body past them BLOCK_J at a time (the
cuda-samples kernel's shared-memory tiling, written for Triton's block model). Memory traffic is
O(N^2 / BLOCK_I) loads of 16 bytes, far below the arithmetic.

On a CPU tensor the same kernel runs in Triton's interpreter (numpy): that is how tests exercise
this exact code without a GPU. It is slow, so only for small N.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable
from typing import Any

import torch

KERNEL_NAME = "triton-fused"
# Tile shapes tried on a GPU (autotuned once per N bucket); the interpreter takes the first.
_GPU_CONFIGS = ((128, 64, 4), (128, 128, 8), (256, 64, 8), (64, 64, 4))  # (BLOCK_I, BLOCK_J, warps)


def triton_available() -> bool:
    """True when Triton imports (conda-forge's pytorch-gpu brings it; the CPU wheels do not)."""
    try:
        import triton  # noqa: F401
    except Exception:  # an import can fail on a broken install in many ways; all mean "no"
        return False
    return True


def interpreting() -> bool:
    """Whether Triton runs kernels in its numpy interpreter. Triton fixes this when it is first
    imported (its own library functions are decorated then), so it is a property of the process:
    set TRITON_INTERPRET=1 before anything imports triton."""
    return os.environ.get("TRITON_INTERPRET", "0") == "1"


@functools.cache
def _kernel() -> Any:
    """The jitted kernel: autotuned over tile shapes on a GPU, the first shape when interpreted."""
    import triton
    import triton.language as tl

    def body(
        x_ptr: Any,
        y_ptr: Any,
        z_ptr: Any,
        m_ptr: Any,
        ax_ptr: Any,
        ay_ptr: Any,
        az_ptr: Any,
        n: Any,
        softening_squared: Any,
        BLOCK_I: tl.constexpr,
        BLOCK_J: tl.constexpr,
        FP64: tl.constexpr,
    ) -> None:
        i = tl.program_id(0) * BLOCK_I + tl.arange(0, BLOCK_I)
        mine = i < n
        xi = tl.load(x_ptr + i, mask=mine, other=0.0)
        yi = tl.load(y_ptr + i, mask=mine, other=0.0)
        zi = tl.load(z_ptr + i, mask=mine, other=0.0)
        ax = tl.zeros([BLOCK_I], dtype=xi.dtype)
        ay = tl.zeros([BLOCK_I], dtype=xi.dtype)
        az = tl.zeros([BLOCK_I], dtype=xi.dtype)
        for start in range(0, n, BLOCK_J):
            j = start + tl.arange(0, BLOCK_J)
            theirs = j < n
            # a body past the end has zero mass, so it adds exactly nothing
            mj = tl.load(m_ptr + j, mask=theirs, other=0.0)
            dx = tl.load(x_ptr + j, mask=theirs, other=0.0)[None, :] - xi[:, None]
            dy = tl.load(y_ptr + j, mask=theirs, other=0.0)[None, :] - yi[:, None]
            dz = tl.load(z_ptr + j, mask=theirs, other=0.0)[None, :] - zi[:, None]
            squared = dx * dx + dy * dy + dz * dz + softening_squared
            if FP64:  # noqa: SIM108 (a constexpr if: Triton compiles only the branch taken)
                inverse = 1.0 / tl.sqrt(squared)
            else:
                inverse = tl.math.rsqrt(squared)
            weight = mj[None, :] * (inverse * inverse * inverse)
            ax += tl.sum(dx * weight, axis=1)
            ay += tl.sum(dy * weight, axis=1)
            az += tl.sum(dz * weight, axis=1)
        tl.store(ax_ptr + i, ax, mask=mine)
        tl.store(ay_ptr + i, ay, mask=mine)
        tl.store(az_ptr + i, az, mask=mine)

    if interpreting():
        return triton.jit(body)
    configs = [
        triton.Config({"BLOCK_I": bi, "BLOCK_J": bj}, num_warps=warps)
        for bi, bj, warps in _GPU_CONFIGS
    ]
    return triton.autotune(configs=configs, key=["n", "FP64"])(triton.jit(body))


def fused_accelerations(
    positions: torch.Tensor, masses: torch.Tensor, softening_squared: float
) -> torch.Tensor:
    """a_i = sum_j m_j (p_j - p_i) / (|p_j - p_i|^2 + eps^2)^(3/2) for every body, in one launch
    (N x 3 positions and N masses of one dtype; the result has the positions' shape)."""
    interpret = positions.device.type != "cuda"
    if interpret and not interpreting():
        from gpuaccept.errors import EnvironmentProblem

        raise EnvironmentProblem(
            "the fused n-body kernel runs on a GPU, or on the CPU only in Triton's interpreter "
            "(TRITON_INTERPRET=1 set before the run)"
        )
    x, y, z = positions.t().contiguous()  # structure of arrays: coalesced loads
    ax, ay, az = torch.empty_like(x), torch.empty_like(y), torch.empty_like(z)
    count = len(positions)
    kernel = _kernel()
    fp64 = positions.dtype == torch.float64
    arguments = (x, y, z, masses.contiguous(), ax, ay, az, count, softening_squared)
    if interpret:
        block_i, block_j, _ = _GPU_CONFIGS[0]
        grid: Callable[[dict[str, int]], tuple[int]] | tuple[int] = (-(-count // block_i),)
        kernel[grid](*arguments, BLOCK_I=block_i, BLOCK_J=block_j, FP64=fp64)
    else:
        grid = lambda meta: (-(-count // meta["BLOCK_I"]),)  # noqa: E731
        kernel[grid](*arguments, FP64=fp64)
    return torch.stack((ax, ay, az), dim=1)
