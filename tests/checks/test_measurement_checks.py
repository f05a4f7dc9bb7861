"""compute, memory, transfer, train: pass on this CPU, and FAIL on each injected fault."""

from __future__ import annotations

import functools
import itertools
from typing import Any

import pytest
import torch

from gpuaccept.checks import compute, memory, train, transfer
from gpuaccept.checks.judging import Findings, Target
from gpuaccept.measure import matmul as matmul_bench
from gpuaccept.results import Status, Verdict
from tests.checks.conftest import cpu_context, impossible


def test_compute_passes_and_judges_each_dtype_against_the_cpu_floor() -> None:
    result = compute.run(cpu_context())
    assert result.status is Status.PASS, result.message
    judged = {m.name: m for m in result.measurements if m.name.startswith("matmul_")}
    assert set(judged) == {"matmul_fp32_tflops", "matmul_fp64_tflops"}
    for measurement in judged.values():
        assert measurement.verdict is Verdict.PASS
        assert measurement.reference is not None
        assert measurement.value > 0


def test_compute_below_reference_fails() -> None:
    context = cpu_context(references={"matmul_fp32_tflops": impossible("TFLOPS")})
    result = compute.run(context)
    assert result.status is Status.FAIL
    assert "matmul_fp32_tflops" in result.message
    assert "below floor" in result.message


def test_compute_corrupted_gemm_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = itertools.count()

    def faulty_matmul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        result = torch.matmul(a, b)
        if next(calls) == 3:  # one bit of one result goes wrong, as a failing GPU would
            result[7, 11] = torch.nextafter(result[7, 11], torch.tensor(float("inf")))
        return result

    monkeypatch.setattr(
        compute,
        "gemm_consistency",
        functools.partial(matmul_bench.gemm_consistency, matmul=faulty_matmul),
    )
    result = compute.run(cpu_context())
    assert result.status is Status.FAIL
    assert "not reproducible" in result.message
    assert "1 of 10 repeats" in result.message


def test_unknown_gpu_model_is_unchecked_and_says_so() -> None:
    from dataclasses import replace

    context = replace(cpu_context(), device_mode="cuda")
    findings = Findings("compute", "COMPUTE")
    measurement = findings.judge(
        context, Target(0, "NVIDIA Mystery 9000"), "matmul_bf16_tflops", 5.0, "TFLOPS"
    )
    assert measurement.verdict is Verdict.UNCHECKED
    result = findings.conclude("ok")
    assert result.status is Status.WARN
    assert "no reference for NVIDIA Mystery 9000" in result.message
    assert "correctness only" in result.message


def test_memory_passes_and_below_reference_fails() -> None:
    assert memory.run(cpu_context()).status is Status.PASS
    failed = memory.run(cpu_context(references={"membw_copy_gbps": impossible("GB/s")}))
    assert failed.status is Status.FAIL
    assert "membw_copy_gbps" in failed.message


def test_memory_pattern_test_runs_at_full() -> None:
    result = memory.run(cpu_context(pattern_fraction=1.0, pattern_max_bytes=8 * 1024**2))
    assert result.status is Status.PASS
    tested = [m for m in result.measurements if m.name == "pattern_bytes_tested"]
    assert tested[0].value == 8 * 1024**2
    assert result.message == "bandwidth within reference"
    assert [(m.name, m.unit) for m in result.measurements] == [
        ("membw_copy_gbps", "GB/s"),
        ("pattern_bytes_tested", "bytes"),
    ]


def test_transfer_passes_and_below_reference_fails() -> None:
    result = transfer.run(cpu_context())
    assert result.status is Status.PASS
    assert {m.name for m in result.measurements} == {"h2d_pinned_gbps", "d2h_pinned_gbps"}
    failed = transfer.run(cpu_context(references={"h2d_pinned_gbps": impossible("GB/s")}))
    assert failed.status is Status.FAIL


def test_p2p_twin_copies_between_buffers_and_judges_the_pair() -> None:
    from gpuaccept.checks import p2p

    result = p2p.run(cpu_context())
    assert result.status is Status.PASS, result.message
    assert [m.name for m in result.measurements] == ["p2p_gbps"]
    assert result.details["rows"][0]["pair"] == "cpu buffer -> buffer"
    # no GPU pair was measured, and the line says so
    assert result.message == "a host buffer copied to another within the sanity floor (CPU twin)"
    failed = p2p.run(cpu_context(references={"p2p_gbps": impossible("GB/s")}))
    assert failed.status is Status.FAIL
    assert failed.message.startswith("cpu buffer -> buffer p2p_gbps")


def test_p2p_with_one_gpu_has_no_pair(fake_gpus: Any) -> None:
    from gpuaccept.checks import p2p
    from tests.checks.conftest import gpu_context, h100_sxm

    fake_gpus({"gpus": [h100_sxm()]})
    result = p2p.run(gpu_context())
    assert result.status is Status.SKIP
    assert "no pair" in result.message


def test_train_loss_falls_in_one_epoch() -> None:
    result = train.run(cpu_context(smoke_epochs=1))
    assert result.status is Status.PASS, result.message
    ratio = next(m for m in result.measurements if m.name == "loss_final_over_initial")
    assert ratio.value < 0.5


def test_the_train_check_does_not_import_the_compiler() -> None:
    """torch.optim imports torch._dynamo on an optimizer's first use: 1.7 s of the quick
    level's train check on this CPU (more on an image without byte-code), so the check steps
    its own SGD. A fresh process, as a check's worker is."""
    import subprocess
    import sys

    code = (
        "import sys\n"
        "from gpuaccept.checks import train\n"
        "from tests.checks.conftest import cpu_context\n"
        "result = train.run(cpu_context(smoke_epochs=1))\n"
        "print(result.status.value, 'torch._dynamo' in sys.modules)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["pass", "False"], done.stdout + done.stderr


def test_train_fails_when_loss_does_not_fall_far_enough() -> None:
    result = train.run(cpu_context(smoke_max_loss_ratio=1e-6))
    assert result.status is Status.FAIL
    assert "must fall below" in result.message


def test_a_figure_that_comes_out_nan_fails_its_check() -> None:
    from gpuaccept.checks.judging import Findings, Target

    findings = Findings("compute", "COMPUTE")
    findings.record(Target(None, "cpu"), "matmul_fp32_tflops", float("nan"), "TFLOPS")
    result = findings.conclude("all good")
    assert result.status is Status.FAIL
    assert "measured NaN" in result.message


def test_the_pattern_test_takes_half_of_a_gpu_memory_the_cpu_shares() -> None:
    from gpuaccept.checks.memory import pattern_budget

    gib = 1024**3
    # a GPU with memory of its own: 0.9 of what is free, up to the cap
    assert pattern_budget(80 * gib, 0.9, 1024 * gib, integrated=False) == (int(72 * gib), None)
    assert pattern_budget(80 * gib, 0.9, 10 * gib, integrated=False) == (10 * gib, None)
    # one that shares the host's memory (what is free is what the OS has free): half, said so
    budget, why = pattern_budget(100 * gib, 0.9, 1024 * gib, integrated=True)
    assert budget == 50 * gib
    assert why == (
        "memory shared with the CPU: 0.5 of what the OS reports free, not more, so the host "
        "keeps room"
    )
    # a level that already asks for less, or for exactly half, keeps its own figure
    assert pattern_budget(100 * gib, 0.25, 1024 * gib, integrated=True) == (25 * gib, None)
    assert pattern_budget(100 * gib, 0.5, 1024 * gib, integrated=True) == (50 * gib, None)
    assert pattern_budget(100 * gib, 0.9, 8 * gib, integrated=True)[0] == 8 * gib


@pytest.mark.parametrize(("integrated", "tested_gib"), [(1, 50), (0, 90), (None, 90)])
def test_the_memory_checks_gpu_path_sizes_the_pattern_test_by_what_the_gpu_shares(
    monkeypatch: pytest.MonkeyPatch, integrated: int | None, tested_gib: int
) -> None:
    """The CUDA branch of memory.run, its device calls stood in for (no GPU here): the free
    memory and the integrated flag of the GPU measured reach the budget (a torch without the
    flag: not integrated), the budget reaches the pattern test on that GPU, the reason lands in
    the details, the GPU's cache is handed back, and a byte read back wrong fails it by name."""
    import types

    import torch

    from gpuaccept.checks.judging import Target
    from gpuaccept.measure.membw import PatternFigure

    gib = 1024**3
    gpu = torch.device("cuda", 0)
    asked: list[int] = []
    emptied: list[bool] = []

    def on_the_gpu(device: object, answer: object) -> object:
        assert device == gpu
        return answer

    properties = (
        types.SimpleNamespace()
        if integrated is None
        else types.SimpleNamespace(is_integrated=integrated)
    )
    monkeypatch.setattr(memory, "measurement_targets", lambda _c: [Target(0, "a GPU")])
    monkeypatch.setattr(memory, "torch_device", lambda _t: gpu)
    monkeypatch.setattr(
        memory, "measure_stream_gbps", lambda *a, **k: types.SimpleNamespace(median_gbps=1.0)
    )
    monkeypatch.setattr(
        torch.cuda, "mem_get_info", lambda device: on_the_gpu(device, (100 * gib, 128 * gib))
    )
    monkeypatch.setattr(
        torch.cuda, "get_device_properties", lambda device: on_the_gpu(device, properties)
    )
    monkeypatch.setattr(torch.cuda, "empty_cache", lambda: emptied.append(True))

    def pattern(device: object, budget: int, chunk: int) -> PatternFigure:
        on_the_gpu(device, None)
        asked.append(budget)
        return PatternFigure(budget, ("zeros",), 3)

    monkeypatch.setattr(memory, "memory_pattern_test", pattern)
    result = memory.run(cpu_context(pattern_fraction=0.9, pattern_max_bytes=1024 * gib))
    assert asked == [int(tested_gib / 100 * 100 * gib)]
    assert emptied == [True]
    assert (result.name, result.area, result.status) == ("memory", "MEMORY", Status.FAIL)
    assert result.message.startswith(
        f"gpu0: 3 byte(s) read back wrong in {asked[0] / 1e9:.2f} GB of pattern tests"
    )
    (tested,) = [m for m in result.measurements if m.name == "pattern_bytes_tested"]
    assert (tested.value, tested.unit) == (asked[0], "bytes")
    if integrated:
        assert result.details["pattern_budget"] == {
            "gpu0": "memory shared with the CPU: 0.5 of what the OS reports free, not more, so "
            "the host keeps room"
        }
    else:
        assert "pattern_budget" not in result.details


def test_without_a_pattern_test_every_gpu_still_has_its_bandwidth_measured(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import types

    from gpuaccept.checks.judging import Target

    monkeypatch.setattr(
        memory, "measurement_targets", lambda _c: [Target(0, "a GPU"), Target(1, "a GPU")]
    )
    monkeypatch.setattr(memory, "torch_device", lambda target: f"cuda:{target.index}")
    measured: list[object] = []

    def stream(device: object, *args: object, **kwargs: object) -> object:
        measured.append(device)
        return types.SimpleNamespace(median_gbps=1.0)

    monkeypatch.setattr(memory, "measure_stream_gbps", stream)
    result = memory.run(cpu_context(pattern_fraction=0.0))
    assert measured == ["cuda:0", "cuda:1"]
    assert [m.name for m in result.measurements] == ["membw_copy_gbps"] * 2
