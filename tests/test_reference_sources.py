"""Every figure of references.toml is what its own `source` says (issue #30 §9: a row a verdict
reads needs a test that fails without it). A derived floor is recomputed from the derivation its
source states and the model's own peaks and facts; a figure borrowed from another model equals
that model's; an aznhc floor or a published measurement is the number its source quotes; the
figures measured or published elsewhere are stated a second time here, each with its source; a
source in no form read here fails. `scripts/data_mutation.py` changes each value in turn and
shows that one of these tests (or another) fails."""

from __future__ import annotations

import re

import pytest

from gpuaccept import references as refs

TABLE = refs.load_shipped_references()
ROWS = [
    pytest.param(model, metric, reference, id=f"{model}/{metric}")
    for model, entry in TABLE.models.items()
    for metric, reference in entry.metrics.items()
]
# the peak a matmul or copy figure is a share of
PEAK_OF = {
    "matmul_bf16_tflops": "bf16_tflops",
    "matmul_fp16_tflops": "fp16_tflops",
    "matmul_tf32_tflops": "tf32_tflops",
    "matmul_fp32_tflops": "fp32_tflops",
    "matmul_fp64_tflops": "fp64_tflops",
    "membw_copy_gbps": "membw_gbps",
}
# NVLink's one-way bandwidth per link, GB/s: NVLink 3 and 4 carry 50 GB/s per link both ways
# together, NVLink 5 100 (the header of references.toml; NVIDIA's datasheets)
ONE_WAY_PER_LINK = {3: 25.0, 4: 25.0, 5: 50.0}
SHARE = re.compile(
    r"^derived: (?P<share>[0-9.]+) x (?P<approx>~?)(?P<peak>[0-9.]+)(?: tensor-core)? peak"
)
SHARE_OF_PART = re.compile(r"^derived: (?P<share>[0-9.]+) x (?P<peak>[0-9.]+) \(\d+ GB part\)")
NVLINK = re.compile(
    r"^derived: (?P<share>[0-9.]+) x (?P<bw>[0-9.]+) GB/s one way over (?P<links>\d+) "
    r"NVLink (?P<version>\d)"
)
PCIE = re.compile(r"^derived: PCIe Gen(?P<gen>\d) x(?P<width>\d+)")
PCIE_SHARE = re.compile(
    r"^derived: (?P<share>[0-9.]+) x PCIe Gen(?P<gen>\d) x(?P<width>\d+) "
    r"\(~(?P<bw>\d+) GB/s one way\)$"
)
# PCIe x16 one way, GB/s, by generation (../shared/FIELD-NOTES.md: "PCIe x16 one way: Gen4 ~31
# GB/s, Gen5 ~63 GB/s")
PCIE_X16_ONE_WAY = {4: 31.0, 5: 63.0}
BORROWED = {
    "derived: the H100 SXM measurement": "h100-sxm",
    "derived: the H100 SXM measurement (same GH100 compute)": "h100-sxm",
    "derived: the B300 mamf-finder figure": "b300",
}
# figures measured or published elsewhere, stated again from their sources (the file's header
# names them: gpuaccept's H100 runs in FIELD-NOTES and docs/results, mamf-finder's table, the
# torchtitan benchmark files)
STATED = {
    # measured by gpuaccept on one H100 80GB HBM3 (FIELD-NOTES; docs/results/2026-11-26-*)
    ("h100-sxm", "matmul_bf16_tflops"): 768.0,
    ("h100-sxm", "matmul_fp16_tflops"): 764.0,
    ("h100-sxm", "matmul_tf32_tflops"): 411.0,
    ("h100-sxm", "matmul_fp32_tflops"): 51.6,
    ("h100-sxm", "matmul_fp64_tflops"): 65.4,
    ("h100-sxm", "membw_copy_gbps"): 3019.0,
    # measured on one H200 (docs/results/2026-11-26-nvidia-h200-llm.md, the lowest run)
    ("h200", "llm_1b_tokens_per_second_per_gpu"): 24956.0,
    # mamf-finder's best bf16 matmul per GPU, as the file's header names it
    ("h200", "matmul_bf16_tflops"): 794.5,
    ("gh200", "matmul_bf16_tflops"): 828.6,
    ("a100-sxm", "matmul_bf16_tflops"): 271.2,
    ("b200", "matmul_bf16_tflops"): 1745.0,
    ("b300", "matmul_bf16_tflops"): 1769.0,
    ("gb200", "matmul_bf16_tflops"): 1822.0,
    # torchtitan's published Llama 3.1 8B runs (the benchmark file and lines its source names)
    ("h100-sxm", "llm_8b_tokens_per_second_per_gpu"): 5762.0,
    ("h100-sxm", "llm_8b_mfu"): 0.33,
    # the CPU twins' sanity floors: proof of work done, not performance
    ("cpu", "membw_copy_gbps"): 0.5,
    ("cpu", "h2d_pinned_gbps"): 0.5,
    ("cpu", "d2h_pinned_gbps"): 0.5,
    ("cpu", "p2p_gbps"): 0.5,
}
AZNHC = re.compile(r"^aznhc check_gpu_bw (?P<floor>[0-9.]+) \(conf/")
PUBLISHED = re.compile(r"^published measurement \((?P<value>[0-9.]+) of ~?[0-9.]+\)$")
GFLOPS = re.compile(r"^sanity floor: (?P<gflops>[0-9.]+) GFLOPS$")


def _peak(model: str, metric: str) -> float | None:
    key = PEAK_OF.get(metric)
    return TABLE.models[model].peaks.get(key) if key else None


@pytest.mark.parametrize(("model", "metric", "reference"), ROWS)
def test_a_figure_is_what_its_source_says(model: str, metric: str, reference: object) -> None:
    source: str = reference.source  # type: ignore[attr-defined]
    value: float = reference.value  # type: ignore[attr-defined]
    entry = TABLE.models[model]
    if (found := SHARE.match(source)) or (found := SHARE_OF_PART.match(source)):
        share, peak = float(found["share"]), float(found["peak"])
        approx = found.groupdict().get("approx")
        # rounded to a round floor within 2% (5% of a peak the source itself calls approximate)
        assert value == pytest.approx(share * peak, rel=0.05 if approx else 0.02), source
        if not approx and metric in PEAK_OF and "part)" not in source:
            assert _peak(model, metric) == peak, f"{source}: the model's peak is another"
    elif found := NVLINK.match(source):
        links, version = int(found["links"]), int(found["version"])
        assert entry.nvlink_links == links, source
        assert float(found["bw"]) == links * ONE_WAY_PER_LINK[version], source
        assert value == pytest.approx(float(found["share"]) * float(found["bw"]), rel=0.02)
    elif found := PCIE_SHARE.match(source):
        assert (entry.pcie_gen, entry.pcie_width) == (int(found["gen"]), int(found["width"]))
        assert int(found["width"]) == 16, source  # the one-way figures are x16's
        assert float(found["bw"]) == PCIE_X16_ONE_WAY[int(found["gen"])], source
        assert value == pytest.approx(float(found["share"]) * float(found["bw"]), rel=0.02)
    elif found := PCIE.match(source):
        assert (entry.pcie_gen, entry.pcie_width) == (int(found["gen"]), int(found["width"]))
    elif source in BORROWED:
        borrowed = TABLE.models[BORROWED[source]].metrics[_borrowed_metric(metric)].value
        assert value == pytest.approx(borrowed, rel=0.01), source  # 3019 said as 3000
    elif source == "derived from bf16":
        assert value == entry.metrics["matmul_bf16_tflops"].value, source
    elif found := AZNHC.match(source):
        assert value == float(found["floor"]), source
    elif found := PUBLISHED.match(source):
        assert value == float(found["value"]), source
    elif found := GFLOPS.match(source):
        assert value == pytest.approx(float(found["gflops"]) / 1000), source
    else:
        # measured or published elsewhere: stated a second time above, or a source no rule reads
        assert (model, metric) in STATED, f"{source!r}: no rule reads this source; state it"
        assert value == STATED[(model, metric)], source


def _borrowed_metric(metric: str) -> str:
    return "matmul_bf16_tflops" if metric.startswith("matmul_bf16") else metric


# Boards whose GPUs meet through NVSwitches, where the fabric manager must register every GPU
# (`switch_fabric`): NVIDIA AI Enterprise 8.0's NVSwitch page lists the "Platform Support for
# NVIDIA NVSwitch" as the HGX B300, B200, H200, H100, H800 and A100 8-GPU baseboards
# (docs.nvidia.com/ai-enterprise/release-8/8.0/infra-software/vgpu/features/nvswitch.html); a
# GB200 NVL72's GPUs meet through "5th-gen NVLink and NVLink Switches" (its MLPerf system
# description: mlcommons/inference_results_v6.1 closed/Crusoe/systems/
# GB200-NVL72_GB200-186GB_aarch64x16_Dynamo.json, its accelerator_interconnect, read at main
# on 2026-11-27: no commit is stored here for it). The H20, GB300 and the rest: no source read.
ON_NVSWITCH = {
    "b300": "HGX B300 8-GPU baseboard (NVIDIA AI Enterprise 8.0)",
    "b200": "HGX B200 8-GPU baseboard (NVIDIA AI Enterprise 8.0)",
    "h200": "HGX H200 8-GPU baseboard (NVIDIA AI Enterprise 8.0)",
    "h100-sxm": "HGX H100 8-GPU baseboard (NVIDIA AI Enterprise 8.0)",
    "h800": "HGX H800 8-GPU baseboard (NVIDIA AI Enterprise 8.0)",
    "a100-sxm": "HGX A100 8-GPU baseboard (NVIDIA AI Enterprise 8.0)",
    "gb200": "GB200 NVL72: 5th-gen NVLink and NVLink Switches (MLPerf v6.1, Crusoe)",
}
# The host link of SXM boards as their makers' MLPerf system descriptions state it
# ("accelerator_host_interconnect"). An SXM GPU's host link is the baseboard's design; a PCIe
# card's is its slot's (NVIDIA's own 8 x H100 PCIe on EPYC 7742 says "PCIe Gen4 x16": not a
# source for that card's own generation, so no PCIe card is stated here).
HOST_LINK = {
    # mlcommons/inference_results_v4.1 a2f5d66d closed/NVIDIA/systems/H200-SXM-141GBx8_TRT.json:3
    "h200": (5, 16),
    # mlcommons/inference_results_v4.1 a2f5d66d closed/NVIDIA/systems/
    # DGX-H100_H100-SXM-80GBx8_TRT.json:3
    "h100-sxm": (5, 16),
    # mlcommons/inference_results_v6.0 closed/Nebius/systems/nebius_b200_n1.json, its
    # accelerator_host_interconnect, read at main on 2026-11-27 (no commit stored here)
    "b200": (5, 16),
}


@pytest.mark.parametrize(("model", "source"), sorted(ON_NVSWITCH.items()))
def test_a_model_on_nvswitch_boards_needs_its_fabric_registered(model: str, source: str) -> None:
    assert TABLE.models[model].switch_fabric, source


@pytest.mark.parametrize(("model", "link"), sorted(HOST_LINK.items()))
def test_an_sxm_boards_host_link_is_its_makers(model: str, link: tuple[int, int]) -> None:
    entry = TABLE.models[model]
    assert entry.form_factor == "SXM"
    assert (entry.pcie_gen, entry.pcie_width) == link


# A PCIe card's own link, from its maker's documents where one was read (the slot it sits in
# may be slower: checks/load_judging.py holds the link to NVML's slot answer then). Each entry:
# (generation, width or None where the source gives no width), and what was read where.
CARD_LINK = {
    # NVIDIA A100 40GB PCIe GPU Accelerator, Product Brief PB-10137-001_v03 (September 2020),
    # Overview: "a dual-slot 10.5 inch PCI Express Gen4 card" (read as mirrored at
    # docslib.org/doc/3015592, 2026-11-27)
    "a100-pcie": (4, None),
    # NVIDIA H100 PCIe GPU, Product Brief PB-11133-001_v02 (November 2022), Overview: "a
    # dual-slot 10.5 inch PCI Express Gen5 card" (mirrored at manuals.plus, 2026-11-27)
    "h100-pcie": (5, None),
    # NVIDIA A40 datasheet, its specification table: "Interconnect interface ... PCIe Gen4:
    # 64GB/s" (64 GB/s both ways together: x16; reproduced by a reseller, ecer.com, 2026-11-27)
    "a40": (4, 16),
    # NVIDIA L40 datasheet, its specification table: "Interconnect Interface | PCIe Gen4 x16:
    # 64GB/s bidirectional" (reproduced with the L40S's by a reseller, mullet.se, 2026-11-27)
    "l40": (4, 16),
    # AnandTech's table of NVIDIA's H100 NVL announcement (March 2023): "Interface 2 x PCIe
    # 5.0 (Quad Slot)" for the pair, one link per card (anandtech.com/show/18780, 2026-11-27)
    "h100-nvl": (5, None),
}


@pytest.mark.parametrize(("model", "link"), sorted(CARD_LINK.items()))
def test_a_pcie_cards_link_is_its_makers(model: str, link: tuple[int, int | None]) -> None:
    entry = TABLE.models[model]
    assert entry.form_factor == "PCIe"
    generation, width = link
    assert entry.pcie_gen == generation
    if width is not None:
        assert entry.pcie_width == width
