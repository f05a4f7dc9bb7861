from __future__ import annotations

from pathlib import Path

import pytest

from gpuaccept import references as refs
from gpuaccept.errors import InputError
from gpuaccept.results import (
    CheckResult,
    Measurement,
    Reference,
    RunReport,
    Status,
    Verdict,
)

REQUIRED_MODELS = [
    "h100-sxm",
    "h100-pcie",
    "h200",
    "a100-sxm",
    "a100-pcie",
    "l40s",
    "b200",
    "gb10",
    "cpu",
]


def test_shipped_table_covers_the_required_models() -> None:
    table = refs.load_shipped_references()
    assert set(REQUIRED_MODELS) <= set(table.models)
    for key, model in table.models.items():
        for metric, reference in model.metrics.items():
            assert metric in refs.METRIC_UNITS, (key, metric)
            assert reference.unit == refs.METRIC_UNITS[metric]
            assert reference.source


@pytest.mark.parametrize(
    ("name", "model"),
    [
        ("NVIDIA H100 80GB HBM3", "h100-sxm"),
        ("NVIDIA H100 PCIe", "h100-pcie"),
        ("NVIDIA H200", "h200"),
        ("NVIDIA A100-SXM4-80GB", "a100-sxm"),
        ("NVIDIA A100-PCIE-40GB", "a100-pcie"),
        ("NVIDIA A100 80GB PCIe", "a100-pcie"),
        ("NVIDIA L40S", "l40s"),
        ("NVIDIA B200", "b200"),
        ("NVIDIA GB10", "gb10"),
        ("NVIDIA H100 NVL", None),  # different memory system: must not borrow PCIe figures
        ("Tesla T4", None),
    ],
)
def test_device_names_map_to_models(name: str, model: str | None) -> None:
    assert refs.load_shipped_references().model_for(name) == model


def test_reference_judges_floor_and_ceiling() -> None:
    reference = Reference(value=100, lower_fraction=0.8, upper_fraction=1.5, unit="GB/s")
    assert reference.judge(80) is Verdict.PASS
    assert reference.judge(79.9) is Verdict.FAIL
    assert reference.judge(151) is Verdict.FAIL


def test_missing_reference_is_none_so_unchecked() -> None:
    table = refs.load_shipped_references()
    assert table.lookup("gb10", "h2d_pinned_gbps") is None
    assert table.lookup(None, "matmul_bf16_tflops") is None


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "baseline.toml"
    path.write_text(text)
    return path


def test_baseline_overrides_by_device_name_and_keeps_the_rest(tmp_path: Path) -> None:
    path = write(
        tmp_path, '[models."NVIDIA H100 80GB HBM3"]\nmatmul_bf16_tflops = { value = 700 }\n'
    )
    table = refs.load_shipped_references().with_overrides(refs.load_baseline(path))
    bf16 = table.lookup("h100-sxm", "matmul_bf16_tflops")
    assert bf16 is not None
    assert (bf16.value, bf16.lower_fraction, bf16.unit) == (700, 0.9, "TFLOPS")
    assert table.lookup("h100-sxm", "membw_copy_gbps") is not None


@pytest.mark.parametrize(
    ("text", "fault"),
    [
        ("[models.cpu\n", "not valid TOML"),
        ('[models.cpu]\nmatmul_fp32_tflops = { value = "fast" }\n', "valid number"),
        ("[models.cpu]\nmatmul_fp32_tflops = { value = -1 }\n", "greater than 0"),
        ("[models.cpu]\nmatmul_fp33_tflops = { value = 1 }\n", "unknown metric"),
        ("[models.cpu]\nmatmul_fp32_tflops = { value = 1, lower = 0.5 }\n", "Extra inputs"),
        ("schema_version = 2\n[models.cpu]\n", "schema_version"),
        ("[models]\n", "holds no model"),
        ("models = 3\n", "models"),
        ("\xff\xfe", "not valid TOML"),
    ],
)
def test_bad_baseline_is_an_input_error_naming_the_file(
    tmp_path: Path, text: str, fault: str
) -> None:
    path = tmp_path / "baseline.toml"
    path.write_bytes(text.encode("latin-1"))
    with pytest.raises(InputError, match=fault) as caught:
        refs.load_baseline(path)
    assert str(path) in str(caught.value)
    assert "\n" not in str(caught.value)


def test_missing_baseline_file(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="no such file"):
        refs.load_baseline(tmp_path / "absent.toml")


def report_with(values: list[float]) -> RunReport:
    measurements = [
        Measurement(
            name="matmul_bf16_tflops",
            value=v,
            unit="TFLOPS",
            device_index=i,
            device_name="NVIDIA H200",
        )
        for i, v in enumerate(values)
    ] + [Measurement(name="loss_final_over_initial", value=0.1, unit="ratio")]
    check = CheckResult(
        name="compute", area="COMPUTE", status=Status.PASS, message="", measurements=measurements
    )
    return RunReport(
        tool_version="0",
        command="accept",
        level="quick",
        device_mode="cuda",
        started_at="2026-11-01T08:00:00+00:00",
        finished_at="2026-11-01T08:00:01+00:00",
        duration_seconds=0,
        checks=[check],
    )


def test_recorded_baseline_is_the_median_and_reads_back(tmp_path: Path) -> None:
    figures = refs.baseline_figures([report_with([700, 710]), report_with([720, 900])])
    assert figures == {"NVIDIA H200": {"matmul_bf16_tflops": 715.0}}
    path = tmp_path / "out" / "baseline.toml"
    refs.write_baseline(path, figures, note='median of 2 "runs"')
    loaded = refs.load_baseline(path)
    assert loaded["NVIDIA H200"]["matmul_bf16_tflops"].value == 715.0
    assert list(path.parent.iterdir()) == [path]  # no temp file left behind


def test_without_metrics_leaves_every_figure_unchecked() -> None:
    table = refs.without_metrics(refs.load_shipped_references())
    assert table.lookup("h100-sxm", "matmul_bf16_tflops") is None
    assert table.model_for("NVIDIA H200") == "h200"
