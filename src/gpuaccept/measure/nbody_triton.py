"""The fused all-pairs n-body kernel (Triton): every interaction stays in registers.

The tiled torch code in `nbody` sends tile x N x 3 temporaries through memory, so on a GPU it
measures HBM, not arithmetic. Here each program owns BLOCK_I bodies, keeps their positions and
accelerations in registers, and streams every other body past them BLOCK_J at a time (the
cuda-samples kernel's shared-memory tiling, written for Triton's block model). Memory traffic is
O(N^2 / BLOCK_I) loads of 16 bytes, far below the arithmetic. The kernel itself is in
`nbody_triton_kernel` (imported only when Triton is there).

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
# Tile shapes tried on a GPU (autotuned once per N bucket), as (BLOCK_I, BLOCK_J, warps); the
# interpreter takes the first. Each compiles for sm_80, sm_90 and sm_100 with no spill
# (tests/measure/test_nbody_compiled.py): fp32 at 64-126 registers, fp64 at 183.
GPU_CONFIGS: dict[str, tuple[tuple[int, int, int], ...]] = {
    "fp32": ((64, 32, 4), (128, 16, 4), (32, 32, 4)),
    # fp64 doubles the registers per element: 64 x 32 spills (336 bytes of stack on sm_90)
    "fp64": ((32, 32, 4), (64, 16, 4)),
}


# The kernel's ceiling counts fused multiply-adds (nbody_triton_kernel: 2 + 3 FFMA an
# interaction): without fusion it falls from 65% to 49% of peak on sm_90. Fusion is Triton's
# default today (`enable_fp_fusion: bool = True` in the CUDA backend's options), a default Triton
# 3.9 warns it will change; so it is asked for, at compile and at launch.
FP_FUSION = True


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
def _kernel(precision: str) -> Any:
    """The jitted kernel: autotuned over `precision`'s tile shapes on a GPU, as is when
    interpreted."""
    import triton

    from gpuaccept.measure.nbody_triton_kernel import nbody_accelerations_kernel

    if interpreting():
        return nbody_accelerations_kernel
    configs = [
        triton.Config({"BLOCK_I": bi, "BLOCK_J": bj}, num_warps=warps)
        for bi, bj, warps in GPU_CONFIGS[precision]
    ]
    return triton.autotune(configs=configs, key=["n"])(nbody_accelerations_kernel)


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
    precision = "fp64" if positions.dtype == torch.float64 else "fp32"
    kernel = _kernel(precision)
    # a tensor, so the fp64 kernel gets the fp64 value (a Python float arrives as fp32)
    softening = torch.full((1,), softening_squared, dtype=positions.dtype, device=positions.device)
    arguments = (x, y, z, masses.contiguous(), ax, ay, az, softening, count)
    if interpret:
        block_i, block_j, _ = GPU_CONFIGS[precision][0]
        grid: Callable[[dict[str, int]], tuple[int]] | tuple[int] = (-(-count // block_i),)
        kernel[grid](*arguments, BLOCK_I=block_i, BLOCK_J=block_j)
    else:
        grid = lambda meta: (-(-count // meta["BLOCK_I"]),)  # noqa: E731
        # Triton launches on the current device, not the tensors': make it theirs
        with torch.cuda.device(positions.device):
            kernel[grid](*arguments, enable_fp_fusion=FP_FUSION)
    return torch.stack((ax, ay, az), dim=1)
