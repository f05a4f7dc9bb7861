from __future__ import annotations

import pytest

from gpuaccept.checks import stack
from gpuaccept.results import Status
from tests.checks.conftest import cpu_context

# torch.cuda.get_arch_list() of conda-forge's CUDA 12.9 and 13.0 builds (FIELD-NOTES).
CUDA_129 = [
    "sm_50",
    "sm_60",
    "sm_70",
    "sm_75",
    "sm_80",
    "sm_86",
    "sm_89",
    "sm_90",
    "sm_100",
    "sm_120",
    "compute_120",
]
CUDA_130 = [
    "sm_75",
    "sm_80",
    "sm_86",
    "sm_89",
    "sm_90",
    "sm_100",
    "sm_110",
    "sm_120",
    "compute_120",
]


@pytest.mark.parametrize(
    ("capability", "arch_list", "kind", "mentions"),
    [
        ((9, 0), CUDA_129, "exact", "sm_90"),
        ((12, 1), CUDA_130, "binary-compatible", "sm_120"),  # GB10 runs the sm_120 code
        ((8, 7), ["sm_80", "sm_86"], "binary-compatible", "sm_86"),
        ((9, 0), ["sm_80", "compute_80"], "ptx-only", "compute_80"),
        ((7, 0), CUDA_130, "none", "7.0"),  # V100 on a CUDA 13 build
        ((9, 0), ["sm_90a"], "exact", "sm_90"),
        ((9, 1), ["sm_90a"], "none", "9.1"),  # arch-specific code is not forward-compatible
        ((13, 0), ["sm_120", "compute_120"], "ptx-only", "compute_120"),
    ],
)
def test_classify_arch_support(
    capability: tuple[int, int], arch_list: list[str], kind: str, mentions: str
) -> None:
    support = stack.classify_arch_support(capability, arch_list)
    assert support.kind == kind
    assert mentions in support.detail


def test_cpu_mode_reports_the_stack() -> None:
    result = stack.run(cpu_context())
    assert result.status is Status.PASS
    assert result.details["gloo"] is True
    assert result.details["torch"].startswith("2.")
