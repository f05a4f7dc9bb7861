"""The fused all-pairs n-body kernel itself (imports Triton: import this module lazily).

Each program owns BLOCK_I bodies and streams the others past them BLOCK_J at a time. The
interactions accumulate into BLOCK_I x BLOCK_J tiles held in registers and are summed over j once,
after the loop: a reduction inside the loop costs warp shuffles and barriers on every interaction
(Triton lays a 2-D tile over threads in both dimensions), which capped the earlier shape near 14%
of fp32 peak. Per interaction the fp32 loop is 3 FADD (the differences), FMUL + 2 FFMA + FADD
(the distance), one MUFU.RSQ, 2 FMUL (the cube), FMUL (the mass) and 3 FFMA (the accumulators):
13 FP32 instructions and one MUFU (tests/measure/test_nbody_compiled.py reads this off the SASS).

Module level, unannotated parameters, no globals but `tl`: Triton's code generator refuses any
other non-constexpr global inside a jitted function (a `typing.Any` annotation included), which
its interpreter never notices.
"""

from __future__ import annotations

import triton
import triton.language as tl


@triton.jit
def nbody_accelerations_kernel(
    x_ptr,
    y_ptr,
    z_ptr,
    m_ptr,
    ax_ptr,
    ay_ptr,
    az_ptr,
    softening_ptr,
    n,
    BLOCK_I: tl.constexpr,
    BLOCK_J: tl.constexpr,
):
    # The softening comes as a one-element tensor of the positions' dtype: a Python float
    # argument is passed as fp32 even to the fp64 kernel (0.01 would arrive as 0.009999999776).
    softening_squared = tl.load(softening_ptr)
    i = tl.program_id(0) * BLOCK_I + tl.arange(0, BLOCK_I)
    mine = i < n
    xi = tl.load(x_ptr + i, mask=mine, other=0.0)[:, None]
    yi = tl.load(y_ptr + i, mask=mine, other=0.0)[:, None]
    zi = tl.load(z_ptr + i, mask=mine, other=0.0)[:, None]
    ax = tl.zeros([BLOCK_I, BLOCK_J], dtype=x_ptr.dtype.element_ty)
    ay = tl.zeros([BLOCK_I, BLOCK_J], dtype=x_ptr.dtype.element_ty)
    az = tl.zeros([BLOCK_I, BLOCK_J], dtype=x_ptr.dtype.element_ty)
    for start in range(0, n, BLOCK_J):
        j = start + tl.arange(0, BLOCK_J)
        theirs = j < n
        # a body past the end has zero mass, so it adds exactly nothing
        mj = tl.load(m_ptr + j, mask=theirs, other=0.0)[None, :]
        dx = tl.load(x_ptr + j, mask=theirs, other=0.0)[None, :] - xi
        dy = tl.load(y_ptr + j, mask=theirs, other=0.0)[None, :] - yi
        dz = tl.load(z_ptr + j, mask=theirs, other=0.0)[None, :] - zi
        squared = dx * dx + dy * dy + dz * dz + softening_squared
        # fp32: MUFU.RSQ; fp64: libdevice's rsqrt (within an ulp or two), not 1 / sqrt (an exact
        # division and square root, two subroutines per interaction)
        inverse = tl.math.rsqrt(squared)
        weight = mj * (inverse * inverse * inverse)
        ax += dx * weight
        ay += dy * weight
        az += dz * weight
    tl.store(ax_ptr + i, tl.sum(ax, axis=1), mask=mine)
    tl.store(ay_ptr + i, tl.sum(ay, axis=1), mask=mine)
    tl.store(az_ptr + i, tl.sum(az, axis=1), mask=mine)
