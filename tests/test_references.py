from __future__ import annotations

import re
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
from tests.run_reports import judged_report, rejudged

# (model key, the name torch reports, NVML's PCI device id): ids from the supported-GPU table
# of NVIDIA's open-gpu-kernel-modules README (595.45.04)
MODELS = [
    ("h100-sxm", "NVIDIA H100 80GB HBM3", 0x2330),
    ("h100-pcie", "NVIDIA H100 PCIe", 0x2331),
    ("h100-nvl", "NVIDIA H100 NVL", 0x2321),
    ("h800", "NVIDIA H800", 0x2324),
    ("h800-pcie", "NVIDIA H800 PCIe", 0x2322),
    ("h20", "NVIDIA H20", 0x2329),
    ("h200", "NVIDIA H200", 0x2335),
    ("h200-nvl", "NVIDIA H200 NVL", 0x233B),
    ("gh200", "NVIDIA GH200 480GB", 0x2342),
    ("a100-sxm", "NVIDIA A100-SXM4-40GB", 0x20B0),
    ("a100-sxm", "NVIDIA A100-SXM4-80GB", 0x20B2),
    ("a100-pcie", "NVIDIA A100-PCIE-40GB", 0x20F1),
    ("a100-pcie", "NVIDIA A100 80GB PCIe", 0x20B5),
    ("l40s", "NVIDIA L40S", 0x26B9),
    ("l4", "NVIDIA L4", 0x27B8),
    ("a10", "NVIDIA A10", 0x2236),
    ("b200", "NVIDIA B200", 0x2901),
    ("gb200", "NVIDIA GB200", 0x2941),
    ("b300", "NVIDIA B300 SXM6 AC", 0x3182),
    ("gb300", "NVIDIA GB300", 0x31C2),
    ("rtx-pro-6000-blackwell", "NVIDIA RTX PRO 6000 Blackwell Server Edition", 0x2BB5),
    ("gb10", "NVIDIA GB10", 0x2E12),
    # each id and name of the table's other rows, stated again (the data-mutation run found
    # them held by no test: an id or a name pattern could change unseen)
    ("rtx-pro-6000-blackwell", "NVIDIA RTX PRO 6000 Blackwell", 0x2BB1),
    ("rtx-pro-6000-blackwell", "NVIDIA RTX PRO 6000 Blackwell", 0x2BB4),
    ("a800-sxm", "NVIDIA A800-SXM4-40GB", 0x20BD),
    ("a800-sxm", "NVIDIA A800-SXM4-80GB", 0x20F3),
    ("a800-pcie", "NVIDIA A800 80GB PCIe", 0x20F5),
    ("a800-pcie", "NVIDIA A800 40GB Active", 0x20F6),
    ("a30", "NVIDIA A30", 0x20B7),
    ("a40", "NVIDIA A40", 0x2235),
    ("l40", "NVIDIA L40", 0x26B5),
    ("l20", "NVIDIA L20", 0x26BA),
]


def test_shipped_table_covers_the_required_models() -> None:
    table = refs.load_shipped_references()
    assert {key for key, _, _ in MODELS} | {"cpu"} <= set(table.models)
    for key, model in table.models.items():
        for metric, reference in model.metrics.items():
            assert metric in refs.METRIC_UNITS, (key, metric)
            assert reference.unit == refs.METRIC_UNITS[metric]
            assert reference.source


def test_every_figure_says_where_it_comes_from() -> None:
    """A figure is measured, published or derived, and a derived one says so."""
    known = ("measured", "mamf-finder", "aznhc", "derived", "published", "sanity floor")
    for key, model in refs.load_shipped_references().models.items():
        for metric, reference in model.metrics.items():
            assert reference.source.startswith(known), (key, metric, reference.source)


@pytest.mark.parametrize(("model", "name", "device_id"), MODELS)
def test_models_are_known_by_pci_device_id_and_by_name(
    model: str, name: str, device_id: int
) -> None:
    table = refs.load_shipped_references()
    nvml_id = device_id << 16 | 0x10DE  # NVML packs the vendor in the low half
    assert table.model_for(name, nvml_id) == model
    assert table.model_for("an unfamiliar board name", nvml_id) == model
    assert table.model_for(name) == model


def test_the_pci_device_id_wins_over_a_misleading_name() -> None:
    table = refs.load_shipped_references()
    assert table.model_for("NVIDIA B200", 0x294110DE) == "gb200"


def test_a_mig_instance_borrows_no_whole_gpu_figures() -> None:
    table = refs.load_shipped_references()
    assert table.model_for("NVIDIA H100 80GB HBM3 MIG 1g.10gb", 0x233010DE) is None
    assert table.model_for("NVIDIA A100-SXM4-40GB MIG 3g.20gb") is None


def test_measured_h100_figures_replace_the_derived_ones() -> None:
    h100 = refs.load_shipped_references().models["h100-sxm"].metrics
    assert h100["matmul_bf16_tflops"].value == 768
    assert h100["membw_copy_gbps"].value == 3019
    # host transfers: aznhc's current floor (check_gpu_bw 48, not the README's stale 52), hard:
    # below 48 fails, as aznhc's evaluate_nvBW_result does
    for metric in ("h2d_pinned_gbps", "d2h_pinned_gbps"):
        assert h100[metric].floor == 48
        assert h100[metric].source.startswith("aznhc check_gpu_bw 48")
        assert "nd96isr_h100_v5.conf:49" in h100[metric].source


def test_aznhc_host_transfer_floors_are_the_conf_files_own() -> None:
    table = refs.load_shipped_references().models
    for key, floor in [("h100-sxm", 48), ("h200", 48), ("h100-nvl", 48), ("a100-sxm", 21)]:
        for metric in ("h2d_pinned_gbps", "d2h_pinned_gbps"):
            assert table[key].metrics[metric].floor == floor, (key, metric)


def test_h2d_floors_fail_a_halved_link() -> None:
    """A Gen5 x8 or Gen4 x16 link (~26-31 GB/s one way) on a Gen5 x16 GPU must fail."""
    table = refs.load_shipped_references()
    for key in ("h100-sxm", "h100-pcie", "h100-nvl", "h200", "h200-nvl", "b200"):
        for metric in ("h2d_pinned_gbps", "d2h_pinned_gbps"):
            reference = table.models[key].metrics[metric]
            assert 31 < reference.floor < 50, (key, metric, reference.floor)


def test_nvlink_expectations_fit_the_form_factor() -> None:
    table = refs.load_shipped_references().models
    assert table["h100-sxm"].nvlink_links == 18
    assert table["a100-sxm"].nvlink_links == 12
    assert table["h800"].nvlink_links == 8
    for pcie in ("h100-pcie", "h100-nvl", "a100-pcie", "h200-nvl"):
        assert table[pcie].nvlink_links is None, pcie  # optional bridges: never judged


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
        ("NVIDIA H100 NVL", "h100-nvl"),  # its own entry: it must not borrow PCIe figures
        ("NVIDIA GB200", "gb200"),  # not the B200 entry
        ("NVIDIA H20", "h20"),
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
    return judged_report(
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


def test_every_shipped_pci_id_resolves_to_the_model_that_declares_it() -> None:
    """Read from the shipped table itself, not a hand copy: each id is a 16-bit device id,
    declared once, and NVML's 32-bit form of it (device << 16 | 0x10de) finds its model even
    when the name matches no pattern."""
    table = refs.load_shipped_references()
    declared: dict[str, str] = {}
    for key, model in table.models.items():
        for pci in model.pci_device_ids:
            assert re.fullmatch(r"0x[0-9a-f]{4}", pci), (key, pci)
            assert pci not in declared, (pci, declared.get(pci), key)
            declared[pci] = key
            assert table.model_for("an unrecognised name", int(pci, 16) << 16 | 0x10DE) == key
    assert len(declared) >= 30
    # the driver's table (open-gpu-kernel-modules README, 595.45.04) has no 0x20b1; it has these
    assert "0x20b1" not in declared
    expected = {"0x2339": "h100-94gb", "0x2237": "a10", "0x20f3": "a800-sxm", "0x20f6": "a800-pcie"}
    for pci, key in expected.items():
        assert declared[pci] == key


def test_a_baseline_entry_keeps_its_ceiling_and_says_where_it_came_from(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        '[models."Some New GPU"]\n'
        'matmul_bf16_tflops = { value = 500, upper_fraction = 1.2, source = "rack 7" }\n'
        "membw_copy_gbps = { value = 900 }\n",
    )
    loaded = refs.load_baseline(path)["Some New GPU"]
    bf16, membw = loaded["matmul_bf16_tflops"], loaded["membw_copy_gbps"]
    assert (bf16.upper_fraction, bf16.source) == (1.2, "rack 7")
    assert bf16.judge(601) is Verdict.FAIL  # above its ceiling
    assert (membw.upper_fraction, membw.source) == (None, "baseline baseline.toml")
    # a model the shipped table does not know is added, named as the baseline names it
    table = refs.load_shipped_references().with_overrides(refs.load_baseline(path))
    key = table.model_for("Some New GPU")
    assert key is not None
    assert table.models[key].display == "Some New GPU"
    assert table.lookup(key, "membw_copy_gbps") is not None
    assert table.lookup("no-such-model", "membw_copy_gbps") is None
    assert table.lookup(None, "membw_copy_gbps") is None


def test_a_baseline_keeps_every_model_and_the_cpu_is_one_model(tmp_path: Path) -> None:
    gpu = report_with([700.0])
    cpu = rejudged(gpu, device_mode="cpu")
    other = report_with([300.0])
    other = rejudged(
        other,
        checks=[
            other.checks[0].model_copy(
                update={
                    "measurements": [
                        m.model_copy(update={"device_name": "NVIDIA L4"})
                        for m in other.checks[0].measurements
                    ]
                }
            )
        ],
    )
    figures = refs.baseline_figures([gpu, cpu, other])
    assert figures == {
        "NVIDIA H200": {"matmul_bf16_tflops": 700.0},
        refs.CPU_MODEL: {"matmul_bf16_tflops": 700.0},
        "NVIDIA L4": {"matmul_bf16_tflops": 300.0},
    }
    path = tmp_path / "b.toml"
    refs.write_baseline(path, figures, note="three models")
    text = path.read_text()
    assert text.startswith("# gpuaccept baseline, recorded by `gpuaccept accept --record-baseline`")
    assert set(refs.load_baseline(path)) == {"NVIDIA H200", refs.CPU_MODEL, "NVIDIA L4"}


# The facts a verdict reads, stated a second time from their sources (issue #30 §9: an edit of an
# NVLink count or a PCI id in references.toml survived the suite). NVLink counts: datasheet
# NVLink bandwidth / per-link bandwidth (50 GB/s NVLink 3 and 4, 100 GB/s NVLink 5), as the file's
# header says; PCI ids: the device ids NVML reports for each model, as the file lists them.
PINNED_NVLINKS = {
    "h200": 18,  # 900 GB/s / 50
    "h100-sxm": 18,  # 900 GB/s / 50
    "h20": 18,  # 900 GB/s / 50
    "h800": 8,  # 400 GB/s / 50
    "a100-sxm": 12,  # 600 GB/s / 50
    "a800-sxm": 8,  # 400 GB/s / 50
    "b200": 18,  # 1.8 TB/s / 100
    "b300": 18,  # 1.8 TB/s / 100
    "gb200": 18,  # 1.8 TB/s / 100
    "gb300": 18,  # 1.8 TB/s / 100
}
PINNED_PCI_IDS = {
    "h200-nvl": {"0x233b"},
    "gh200": {"0x2342", "0x2348"},
    "h200": {"0x2335"},
    "h100-nvl": {"0x2321"},
    "h100-pcie": {"0x2331"},
    "h800-pcie": {"0x2322", "0x233a"},
    "h800": {"0x2324"},
    "h20": {"0x2329", "0x232c", "0x230e"},
    "h100-sxm": {"0x2330"},
    "a100-sxm": {"0x20b0", "0x20b2", "0x20b3"},
    "a100-pcie": {"0x20b5", "0x20f1"},
    "b200": {"0x2901"},
    "b300": {"0x3182"},
    "gb200": {"0x2941"},
    "gb300": {"0x31c2"},
    "gb10": {"0x2e12"},
}


@pytest.mark.parametrize(("model", "links"), sorted(PINNED_NVLINKS.items()))
def test_each_models_nvlink_count_is_its_datasheets_and_judged_at_it(
    model: str, links: int
) -> None:
    from gpuaccept.checks.health import judge_health
    from gpuaccept.probe.nvml_health import GpuHealth, NvLink

    reference = refs.load_shipped_references().models[model]
    assert reference.nvlink_links == links

    def failures(active: int) -> list[str]:
        nvlinks = [NvLink(link=i, active=i < active) for i in range(links)]
        return judge_health(GpuHealth(index=0, name=model, nvlinks=nvlinks), reference)[0]

    assert failures(links) == []
    assert failures(links - 1) != []


@pytest.mark.parametrize(("model", "ids"), sorted(PINNED_PCI_IDS.items()))
def test_each_models_pci_ids_are_pinned(model: str, ids: set[str]) -> None:
    assert set(refs.load_shipped_references().models[model].pci_device_ids) == ids


# The tensor cores' dense rates stand in fixed ratios within an architecture, whatever the part:
# fp16 = bf16, tf32 = bf16 / 2, fp8 = 2 x bf16, and on GA100 and GH100 the fp64 tensor-core rate
# equals fp32's. Sources: H100 SXM 989.4 TFLOPS fp16 and bf16, 494.7 tf32, 1978.9 fp8, 66.9 fp64
# (matrix) and fp32 (glennklockwood.com/garden/processors/h100, from NVIDIA's Hopper whitepaper;
# read 2026-11-27); A100 SXM 312 and 156, fp64 tensor core 19.5 = fp32 19.5; L40S 362 and 183;
# B200 2250 and ~1100 (FIELD-NOTES, dense peaks). One peak edited alone breaks its ratio (the
# data mutation left 44 such edits unseen: issue #30 §9); a datasheet's rounding stays inside.
GA100_GH100 = {
    *("a100-sxm", "a100-pcie"),
    *("h100-sxm", "h100-pcie", "h100-nvl", "h200", "h200-nvl", "gh200"),
}


def test_each_models_tensor_core_peaks_keep_their_architectures_ratios() -> None:
    table = refs.load_shipped_references().models
    checked = 0
    for key, model in table.items():
        peaks = model.peaks
        bf16 = peaks.get("bf16_tflops")
        if bf16 is None:
            continue
        if "fp16_tflops" in peaks:
            assert peaks["fp16_tflops"] == bf16, key
            checked += 1
        if "tf32_tflops" in peaks:
            assert 0.485 <= peaks["tf32_tflops"] / bf16 <= 0.51, key
            checked += 1
        if "fp8_tflops" in peaks:
            assert 1.98 <= peaks["fp8_tflops"] / bf16 <= 2.03, key
            checked += 1
        if key in GA100_GH100:
            assert peaks["fp64_tflops"] == peaks["fp32_tflops"], key
            checked += 1
    assert checked >= 30  # the rows that have these peaks, not a table emptied of them


def test_the_ratios_hold_the_sources_own_figures() -> None:
    table = refs.load_shipped_references().models
    h100 = table["h100-sxm"].peaks
    assert (h100["bf16_tflops"], h100["tf32_tflops"], h100["fp8_tflops"]) == (989, 494.5, 1979)
    assert (table["a100-sxm"].peaks["bf16_tflops"], table["a100-sxm"].peaks["tf32_tflops"]) == (
        312,
        156,
    )
    assert table["b200"].peaks["tf32_tflops"] / table["b200"].peaks["bf16_tflops"] < 0.49
    assert table["l40s"].peaks["fp8_tflops"] / table["l40s"].peaks["bf16_tflops"] > 2.02


@pytest.mark.parametrize(
    ("facts", "refused"),
    [
        ({"pcie_gen": 7}, True),  # no Gen7 in the kernel's speeds (up to 64 GT/s, Gen6)
        ({"pcie_gen": 0}, True),
        ({"pcie_width": 17}, True),  # no x17 link
        ({"pcie_width": 3}, True),
        ({"pcie_gen": 6, "pcie_width": 32}, False),
        ({"pcie_width": 12}, False),
    ],
)
def test_a_models_pcie_link_is_one_a_pcie_link_can_be(facts: dict[str, int], refused: bool) -> None:
    from pydantic import ValidationError

    if refused:
        with pytest.raises(ValidationError):
            refs.ModelReferences(display="x", **facts)  # type: ignore[arg-type]
    else:
        assert refs.ModelReferences(display="x", **facts).model_dump(include=set(facts)) == facts  # type: ignore[arg-type]
