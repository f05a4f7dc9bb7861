"""One burn-in window on the CPU twin: the same seed gives the same bits on every device, each
window holds load for its time, and a device whose bits change within a window is caught."""

from __future__ import annotations

import pytest

from gpuaccept.burnin import stress
from gpuaccept.burnin.judging import first_differing_row, judge_digests


@pytest.mark.parametrize("stressor", ["gemm-bf16", "gemm-fp32", "hbm", "host-transfer"])
def test_every_device_of_the_twin_computes_the_same_bits_for_the_same_seed(stressor: str) -> None:
    works = [stress.run_window(stressor, 0.2, seed=11, device_index=None) for _ in range(2)]
    for work in works:
        assert work.stressor == stressor
        assert work.iterations >= 1
        assert work.seconds >= 0.2  # held for the window, then stopped
        assert work.throughput > 0
        assert work.unit == ("TFLOPS" if stressor.startswith("gemm") else "GB/s")
        assert work.repeats_agree
    assert judge_digests({f"cpu{i}": w.digest for i, w in enumerate(works)}).ok
    assert works[0].row_digests == works[1].row_digests
    other_seed = stress.run_window(stressor, 0.05, seed=12, device_index=None)
    assert other_seed.digest != works[0].digest


def test_a_device_whose_result_changes_within_the_window_is_caught(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import torch

    real_matmul = torch.Tensor.__matmul__
    calls = [0]

    def flaky(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        calls[0] += 1
        out = real_matmul(a, b)
        if calls[0] > 1:  # every iteration after the first: one element off by a low bit
            out = out.clone()
            out.view(torch.int32)[3, 4] ^= 1
        return out

    monkeypatch.setattr(torch.Tensor, "__matmul__", flaky)
    work = stress.run_window("gemm-fp32", 0.05, seed=11, device_index=None)
    assert not work.repeats_agree
    monkeypatch.setattr(torch.Tensor, "__matmul__", real_matmul)
    healthy = stress.run_window("gemm-fp32", 0.05, seed=11, device_index=None)
    assert first_differing_row(work.row_digests, healthy.row_digests) == 3
    assert first_differing_row(healthy.row_digests, healthy.row_digests) is None


def test_all_reduce_is_not_a_per_device_stressor() -> None:
    with pytest.raises(ValueError, match="runs as ranks"):
        stress.run_window("all-reduce", 0.01, seed=1, device_index=None)


def test_tf32_and_reduced_precision_sums_are_off_during_a_window_and_restored_after() -> None:
    import torch

    matmul = torch.backends.cuda.matmul
    kept = (matmul.allow_tf32, matmul.allow_bf16_reduced_precision_reduction)
    matmul.allow_tf32, matmul.allow_bf16_reduced_precision_reduction = True, True
    try:
        with stress._reduced_precision_off():
            assert matmul.allow_tf32 is False
            assert matmul.allow_bf16_reduced_precision_reduction is False
        assert matmul.allow_tf32 is True
        assert matmul.allow_bf16_reduced_precision_reduction is True
    finally:
        matmul.allow_tf32, matmul.allow_bf16_reduced_precision_reduction = kept


def test_clock_events_are_counted_over_the_loaded_samples_only() -> None:
    from gpuaccept.probe.load_sampler import LoadSample, LoadTrace

    trace = LoadTrace(
        samples=[
            LoadSample(seconds=0.1, reasons=("hardware slowdown",)),  # still ramping up
            LoadSample(seconds=0.6, reasons=("hardware slowdown", "software power cap")),
            LoadSample(seconds=0.7, reasons=("software power cap",)),
            LoadSample(seconds=0.8),
        ]
    )
    assert stress.clock_event_counts(trace) == {"hardware slowdown": 1, "software power cap": 2}
