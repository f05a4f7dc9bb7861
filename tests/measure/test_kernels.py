from __future__ import annotations

import pytest
import torch

from gpuaccept.errors import InputError
from gpuaccept.measure import matmul, membw, transfer

CPU = torch.device("cpu")


def test_matmul_tflops_follows_from_flops_and_time() -> None:
    figure = matmul.measure_matmul_tflops(CPU, "fp32", 128, 64, 32, warmup=1, repeats=3)
    assert figure.flops == 2 * 128 * 64 * 32
    assert figure.median_tflops == pytest.approx(figure.flops / figure.timing.median_seconds / 1e12)
    assert figure.best_tflops >= figure.median_tflops > 0
    assert len(figure.timing.samples_seconds) == 3


def test_tf32_is_not_offered_on_the_cpu_and_unknown_dtypes_are_input_errors() -> None:
    assert matmul.unsupported_reason(CPU, "tf32") is not None
    assert matmul.unsupported_reason(CPU, "fp64") is None
    with pytest.raises(InputError, match="unknown dtype"):
        matmul.unsupported_reason(CPU, "fp7")


def test_matmul_rejects_non_positive_sizes() -> None:
    with pytest.raises(InputError, match="positive"):
        matmul.measure_matmul_tflops(CPU, "fp32", 0, 4, 4, warmup=0, repeats=1)


def test_gemm_consistency_is_clean_on_a_healthy_device() -> None:
    figure = matmul.gemm_consistency(CPU, "fp32", 64, iterations=5)
    assert (figure.mismatched_results, figure.mismatched_elements) == (0, 0)
    assert figure.first_bad_iteration is None


def test_matmul_precision_is_restored() -> None:
    before = torch.get_float32_matmul_precision()
    with matmul.matmul_precision("tf32"):
        assert torch.get_float32_matmul_precision() == "high"
    assert torch.get_float32_matmul_precision() == before


def test_sustained_matmul_reports_each_window() -> None:
    windows = matmul.sustained_matmul_tflops(CPU, "fp32", 64, seconds=0.3, windows=3)
    assert len(windows) == 3
    assert all(w > 0 for w in windows)


@pytest.mark.parametrize(
    ("kernel", "per_element"), [("copy", 8), ("scale", 8), ("add", 12), ("triad", 12)]
)
def test_stream_bytes_follow_stream_conventions(kernel: str, per_element: int) -> None:
    figure = membw.measure_stream_gbps(CPU, kernel, 4 * 1024, warmup=1, repeats=2)
    assert figure.bytes_moved == per_element * 1024
    assert figure.median_gbps > 0


def test_pattern_test_covers_the_requested_bytes() -> None:
    figure = membw.memory_pattern_test(CPU, 3 * 1024**2, 1024**2)
    assert figure.bytes_tested == 3 * 1024**2
    assert figure.mismatched_bytes == 0
    assert "address-xor" in figure.patterns


def test_transfer_on_cpu_is_unpinned_host_copy() -> None:
    figure = transfer.measure_transfer_gbps(CPU, "h2d", 1024**2, pinned=True, warmup=1, repeats=2)
    assert figure.pinned is False
    assert figure.median_gbps > 0
    with pytest.raises(InputError):
        transfer.measure_transfer_gbps(CPU, "sideways", 1024, True, 0, 1)
