"""The burn-in's rules on real CPU results: a worker that computes other bits is named with the
first differing element, a 20% slower one is a straggler, drift is measured as a slope."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from gpuaccept.burnin.judging import (
    Difference,
    DigestVerdict,
    drift_percent_per_hour,
    first_difference,
    judge_digests,
    result_digest,
    stragglers,
)


def _seeded_gemm(seed: int = 7, n: int = 64) -> np.ndarray:
    """The same deterministic work every 'GPU' of the twin does: a seeded fp32 GEMM."""
    generator = torch.Generator().manual_seed(seed)
    a = torch.randn(n, n, generator=generator)
    b = torch.randn(n, n, generator=generator)
    return (a @ b).numpy()


def _flip_bit(result: np.ndarray, index: tuple[int, int], bit: int) -> np.ndarray:
    wrong = result.copy()
    wrong.view(np.uint32)[index] ^= np.uint32(1 << bit)
    return wrong


def test_a_gpu_whose_bits_differ_from_the_majority_is_named_with_the_first_element() -> None:
    results = {f"gpu{i}": _seeded_gemm() for i in range(4)}
    results["gpu2"] = _flip_bit(results["gpu2"], (5, 9), 3)  # one low mantissa bit
    verdict = judge_digests({gpu: result_digest(r) for gpu, r in results.items()})
    assert verdict.differing == ["gpu2"]
    assert verdict.agreeing == ["gpu0", "gpu1", "gpu3"]
    difference = first_difference(results["gpu2"], results["gpu0"])
    assert difference is not None
    assert difference.index == (5, 9)
    assert difference.value != difference.expected
    assert abs(difference.value - difference.expected) < 1e-3  # silent: a plausible value


def test_identical_work_agrees_bit_for_bit() -> None:
    results = [_seeded_gemm() for _ in range(3)]
    assert len({result_digest(r) for r in results}) == 1
    assert first_difference(results[0], results[1]) is None
    assert judge_digests({f"gpu{i}": result_digest(r) for i, r in enumerate(results)}).ok


def test_without_a_majority_every_gpu_is_named() -> None:
    assert judge_digests({"gpu0": "a", "gpu1": "b"}).differing == ["gpu0", "gpu1"]
    assert judge_digests({"gpu0": "a", "gpu1": "b", "gpu2": "c"}).majority is None
    assert judge_digests({"gpu0": "a", "gpu1": "a", "gpu2": "b", "gpu3": "b"}).differing == [
        "gpu0",
        "gpu1",
        "gpu2",
        "gpu3",
    ]
    assert judge_digests({}) == DigestVerdict(None, [], [])
    assert judge_digests({"gpu0": "a", "gpu1": "b"}) == DigestVerdict(None, [], ["gpu0", "gpu1"])
    assert judge_digests({"gpu0": "a", "gpu1": "a", "gpu2": "b"}) == DigestVerdict(
        "a", ["gpu0", "gpu1"], ["gpu2"]
    )


def test_bits_not_values_are_compared() -> None:
    zero, negative_zero = np.array([0.0], np.float32), np.array([-0.0], np.float32)
    assert first_difference(negative_zero, zero) == Difference((0,), -0.0, 0.0)
    nan = np.array([np.nan], np.float32)
    assert first_difference(nan, nan.copy()) is None
    assert result_digest(zero) != result_digest(zero.astype(np.float64))
    assert result_digest(np.zeros((2, 3), np.float32)) != result_digest(
        np.zeros((3, 2), np.float32)
    )
    with pytest.raises(ValueError, match="results of different kinds"):
        first_difference(zero, zero.astype(np.float64))


def test_a_gpu_twenty_percent_slower_than_its_peers_is_a_straggler() -> None:
    throughput = {"gpu0": 800.0, "gpu1": 805.0, "gpu2": 640.0, "gpu3": 795.0}
    [slow] = stragglers(throughput)
    assert slow.gpu == "gpu2"
    assert slow.reference == pytest.approx(800.0)  # the best that a second GPU confirms
    assert slow.deviation_percent == pytest.approx(-20.0, abs=0.01)


def test_two_gpus_and_a_slow_majority_have_their_stragglers_named() -> None:
    """Issue #30: against the median, one of two GPUs 40% slower passed, and so did three slow
    GPUs of five (a socket's worth)."""
    [slow] = stragglers({"gpu0": 100.0, "gpu1": 60.0})
    assert (slow.gpu, slow.reference) == ("gpu1", 100.0)
    socket = {"gpu0": 800.0, "gpu1": 798.0, "gpu2": 600.0, "gpu3": 610.0, "gpu4": 605.0}
    assert [s.gpu for s in stragglers(socket)] == ["gpu2", "gpu3", "gpu4"]
    assert stragglers({"gpu0": 800.0}) == []  # alone: nothing to compare with


def test_the_straggler_tolerance_is_a_bound_against_the_confirmed_best() -> None:
    # one unusually fast GPU must not make its healthy neighbours stragglers
    fast_one = {"gpu0": 1000.0, "gpu1": 800.0, "gpu2": 800.0, "gpu3": 800.0}
    assert stragglers(fast_one) == []
    exactly = {"gpu0": 100.0, "gpu1": 100.0, "gpu2": 90.0}  # 10% below the median: within
    assert stragglers(exactly) == []
    assert [s.gpu for s in stragglers({**exactly, "gpu2": 89.9})] == ["gpu2"]
    assert stragglers({**exactly, "gpu2": 89.9}, tolerance_percent=15) == []
    with pytest.raises(ValueError, match="tolerance"):
        stragglers(exactly, tolerance_percent=float("nan"))


def test_drift_is_the_slope_in_percent_of_the_mean_per_hour() -> None:
    # 1000 -> 900 over two hours, linearly: mean 950, slope -50 per hour
    points = [(t * 600.0, 1000.0 - 100.0 * t / 12) for t in range(13)]
    assert drift_percent_per_hour(points) == pytest.approx(-50 / 950 * 100)
    steady = [(t * 60.0, 500.0) for t in range(10)]
    assert drift_percent_per_hour(steady) == 0.0
    assert drift_percent_per_hour([(0.0, 1.0)]) is None
    assert drift_percent_per_hour([(0.0, 1.0), (0.0, 2.0)]) is None
    assert drift_percent_per_hour([(0.0, 0.0), (60.0, 0.0)]) is None


def test_the_edges_of_the_tolerance_and_of_drift() -> None:
    three = {"gpu0": 100.0, "gpu1": 100.0, "gpu2": 99.0}
    assert [s.gpu for s in stragglers(three, tolerance_percent=0)] == ["gpu2"]  # 0 is allowed
    assert [s.gpu for s in stragglers(three, tolerance_percent=0.5)] == ["gpu2"]
    for wrong in (-5.0, 100.0, 150.0, float("inf")):
        with pytest.raises(ValueError, match="tolerance"):
            stragglers(three, tolerance_percent=wrong)
    # a point that is not a number is left out, not allowed to make the slope NaN
    line = [(0.0, 100.0), (1800.0, 95.0), (3600.0, 90.0)]
    assert drift_percent_per_hour([*line, (5400.0, float("nan"))]) == pytest.approx(-10.5263, 1e-3)
    assert drift_percent_per_hour([*line, (float("inf"), 1.0)]) == pytest.approx(-10.5263, 1e-3)
    assert drift_percent_per_hour(line[:2]) == pytest.approx(-10 / 97.5 * 100)  # two suffice


def test_the_first_differing_row_of_two_digest_lists() -> None:
    from gpuaccept.burnin.judging import first_differing_row

    rows = ["a", "b", "c", "d"]
    assert first_differing_row(rows, list(rows)) is None
    assert first_differing_row(rows, ["a", "b", "x", "d"]) == 2
    assert first_differing_row(rows, ["x", "b", "c", "y"]) == 0
    # a result with fewer rows parts from the other where it ends, whichever is shorter
    assert first_differing_row(rows[:3], rows) == 3
    assert first_differing_row(rows, rows[:2]) == 2
