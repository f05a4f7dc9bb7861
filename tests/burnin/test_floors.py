"""The reference floor of a GPU no peer can hold (issue #30 §3): a one-GPU node's burn-in at 60% of
its model's floor warned nothing before; now each GEMM and copy window is held to the floor the
accept checks hold the same model to (a warning: under sustained load a healthy GPU runs below the
short benchmark, measured on an H200)."""

from __future__ import annotations

import math

from gpuaccept.burnin.checkpoint import resume, save_checkpoint
from gpuaccept.burnin.floors import STRESSOR_METRICS, below_floor, reference_floors
from gpuaccept.burnin.plan import BurnInPlan, BurnInProgress
from gpuaccept.burnin.window import judge_record
from gpuaccept.references import load_shipped_references
from tests.burnin.records import as_run, binding, device, record

H200 = ("gpu0", "NVIDIA H200", None)


def test_each_stressor_is_held_to_its_models_floor_in_references_toml() -> None:
    references = load_shipped_references()
    floors = reference_floors(references, [H200, ("gpu1", "NVIDIA H100 80GB HBM3", None)])
    h200 = references.models["h200"].metrics
    assert floors["gemm-bf16"]["gpu0"].value == h200["matmul_bf16_tflops"].value * 0.75
    assert floors["gemm-fp32"]["gpu0"].value == h200["matmul_fp32_tflops"].value * 0.6
    assert floors["hbm"]["gpu0"].value == h200["membw_copy_gbps"].value * 0.75
    assert (
        floors["gemm-bf16"]["gpu1"].value
        == references.models["h100-sxm"].metrics["matmul_bf16_tflops"].value * 0.8
    )
    assert "0.75 x the H200 reference 794.5 TFLOPS (matmul_bf16_tflops" in (
        floors["gemm-bf16"]["gpu0"].said
    )
    assert set(floors) == set(STRESSOR_METRICS)  # host-transfer and all-reduce: no floor


def test_an_unknown_gpu_or_a_mig_slice_has_no_floor() -> None:
    references = load_shipped_references()
    assert reference_floors(references, [("gpu0", "Some Future GPU", None)]) == {}
    assert reference_floors(references, [("gpu0", "NVIDIA H200 MIG 1g.18gb", None)]) == {}


def test_a_rate_at_the_floor_passes_and_below_or_nan_is_named() -> None:
    floors = reference_floors(load_shipped_references(), [H200])["hbm"]
    floor = floors["gpu0"].value
    assert below_floor({"gpu0": floor}, floors) == []
    assert [d for d, _, _ in below_floor({"gpu0": floor * 0.999}, floors)] == ["gpu0"]
    assert [d for d, _, _ in below_floor({"gpu0": math.nan}, floors)] == ["gpu0"]
    assert below_floor({"gpu9": 0.0}, floors) == []  # a device without a floor
    assert below_floor({"gpu0": 0.0}, None) == []


def test_a_lone_gpu_below_its_floor_is_warned_in_its_window_and_again_on_resume(
    tmp_path: object,
) -> None:
    from pathlib import Path

    plan = BurnInPlan.build(60.0, 60.0, 1, ["gemm-bf16"])
    floors = reference_floors(load_shipped_references(), [H200])
    slow = record(plan, 0, {"gpu0": device(throughput=357.0)})  # 0.6 x the floor's 595.9
    figures = judge_record(slow, 10.0, floors["gemm-bf16"])
    assert figures.failures == []  # one GPU: no straggler, and the floor warns
    [warning] = figures.warnings
    assert warning.startswith("window 1 (gemm-bf16): gpu0 ran 357 TFLOPS, below 595.9 (0.75 x")
    assert "accept's compute and memory checks fail a GPU below it" in warning
    assert (
        judge_record(
            record(plan, 0, {"gpu0": device(throughput=664.0)}), 10.0, floors["gemm-bf16"]
        ).warnings
        == []
    )  # the H200's measured 664
    # a resumed run holds the stored window to the floor again
    bound = binding(plan, ["gpu0"])
    bound = type(bound)(**{**bound.__dict__, "floors": floors})
    progress = BurnInProgress(plan=plan.fingerprint(), devices=["gpu0"])
    progress.record(figures, slow)
    path = Path(str(tmp_path)) / "burnin.json"
    save_checkpoint(path, as_run(progress), bound)
    assert resume(path, bound).windows[0].warnings == [warning]
