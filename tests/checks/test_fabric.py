"""The fabric checks over a sysfs tree of an HGX H100 node (tests/fabric_tree.py): each rule
turns its fault into the finding it names, and a healthy node passes."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import pytest

from gpuaccept.checks import fabric
from gpuaccept.checks.context import CheckContext, FabricExpectation
from gpuaccept.checks.judging import Findings
from gpuaccept.probe.fabric import read_inventory, read_port_counters
from gpuaccept.references import load_shipped_references
from gpuaccept.suite.levels import level_settings
from gpuaccept.verdict import Status
from tests.fabric_tree import hgx_tree, port_dir

HGX = FabricExpectation(nics=8, nic_rate_gbps=400, nvme=2)


@pytest.fixture
def node(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = hgx_tree(tmp_path / "node")
    monkeypatch.setenv("GPUACCEPT_SYSFS_ROOT", str(root))
    return root


def _context(expect: FabricExpectation | None = HGX, **more: object) -> CheckContext:
    return CheckContext(
        level="quick",
        device_mode="cpu",
        settings=level_settings("quick", "cpu"),
        references=load_shipped_references(),
        fabric=expect,
        **more,  # type: ignore[arg-type]
    )


def test_a_healthy_hgx_node_passes_with_every_gpu_next_to_its_hca(node: Path) -> None:
    result = fabric.run(_context())
    assert result.status is Status.PASS, result.message
    assert result.message == (
        "8 of 8 RDMA port(s) ACTIVE at 400 Gb/s; 2 NVMe; every GPU has an RDMA port near it"
    )
    first = result.details["affinity"][0]
    assert first == {
        "gpu": "0000:18:00.0",
        "numa_node": 0,
        "nics": ["mlx5_0:1"],
        "via": "PCIe switch",
    }
    ports = result.details["inventory"]["ports"]
    assert [p["rate_gbps"] for p in ports] == [400.0] * 8


def test_a_port_that_is_down_fails_by_name_and_the_count_with_it(node: Path) -> None:
    (port_dir(node, 3) / "state").write_text("1: DOWN\n")
    (port_dir(node, 3) / "phys_state").write_text("2: Polling\n")
    result = fabric.run(_context())
    assert result.status is Status.FAIL
    assert result.message == (
        "mlx5_3:1 is DOWN (Polling), expected ACTIVE (LinkUp); 7 ACTIVE InfiniBand/RoCE "
        "port(s), 8 expected (--expect-nics)"
    )


def test_a_port_that_trained_at_half_rate_fails_against_the_expectation_or_warns_without(
    node: Path,
) -> None:
    (port_dir(node, 5) / "rate").write_text("200 Gb/sec (4X HDR)\n")
    failed = fabric.run(_context())
    assert failed.status is Status.FAIL
    assert failed.message == "mlx5_5:1 runs at 200 Gb/s, below the expected 400 Gb/s"
    warned = fabric.run(_context(FabricExpectation(nics=8)))
    assert warned.status is Status.WARN
    assert warned.message == (
        "mlx5_5:1 runs at 200 Gb/s while the node's fastest InfiniBand port runs at 400 (give "
        "--expect-nic-rate to require a rate)"
    )


def test_pkeys_that_differ_and_gpudirect_without_peermem_warn(node: Path) -> None:
    (port_dir(node, 2) / "pkeys" / "1").write_text("0x8002\n")
    (node / "sys" / "module" / "nvidia_peermem").rmdir()
    result = fabric.run(_context())
    assert result.status is Status.WARN
    assert result.message == (
        "mlx5_2:1 has PKeys 0xffff, 0x8002, the node's other ports 0xffff, 0x8001; GPUDirect "
        "RDMA: the nvidia_peermem module is not loaded (dma-buf not checked): NCCL may stage "
        "GPU data through host memory"
    )


def test_missing_nvme_and_missing_hcas_fail_only_when_expected(
    tmp_path: Path, node: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    result = fabric.run(_context(FabricExpectation(nvme=8)))
    assert result.status is Status.FAIL
    assert result.message == "2 NVMe controller(s), 8 expected (--expect-nvme)"
    bare = tmp_path / "bare"
    (bare / "sys").mkdir(parents=True)
    monkeypatch.setenv("GPUACCEPT_SYSFS_ROOT", str(bare))
    skipped = fabric.run(_context(None))
    assert skipped.status is Status.SKIP
    assert skipped.message.startswith("no InfiniBand/RoCE port in /sys/class/infiniband")
    required = fabric.run(_context(FabricExpectation(nics=8)))
    assert required.status is Status.FAIL
    assert required.message == "0 ACTIVE InfiniBand/RoCE port(s), 8 expected (--expect-nics)"


def test_a_gpu_without_a_near_hca_and_an_hca_far_from_every_gpu_warn(node: Path) -> None:
    inventory = read_inventory(node)
    far = inventory.ports[0]
    moved = dataclasses.replace(
        far, place=dataclasses.replace(far.place, numa_node=2, bridges=("0000:ff:01.0",))
    )
    lonely = dataclasses.replace(inventory, ports=[moved], gpus=inventory.gpus[:1])
    findings = Findings("fabric", "FABRIC")
    rows = fabric.judge_topology(lonely, findings)
    assert rows == [{"gpu": "0000:18:00.0", "numa_node": 0, "nics": [], "via": "none"}]
    assert findings.warnings == [
        "GPU 0000:18:00.0 (NUMA node 0) has no RDMA port on its PCIe switch or NUMA node",
        "mlx5_0:1 is on NUMA node 2, where no GPU is",
    ]
    # the same HCA on the GPU's NUMA node but another switch: near by NUMA
    numa_near = dataclasses.replace(
        far, place=dataclasses.replace(far.place, bridges=("0000:00:01.0", "0000:70:00.0"))
    )
    rows = fabric.affinity_map(dataclasses.replace(lonely, ports=[numa_near]))
    assert rows[0]["via"] == "NUMA node"
    assert rows[0]["nics"] == ["mlx5_0:1"]


def test_error_counters_judged_by_growth_each_as_its_source_says(node: Path) -> None:
    start = read_port_counters(node)
    counters = port_dir(node, 1) / "counters"
    (counters / "link_downed").write_text("1\n")
    (counters / "symbol_error").write_text("12\n")
    (port_dir(node, 4) / "counters" / "port_xmit_discards").write_text("3\n")
    (port_dir(node, 6) / "counters" / "excessive_buffer_overrun_errors").write_text("2\n")
    end = read_port_counters(node)
    findings = Findings("fabric-errors", "FABRIC")
    growth = fabric.judge_counter_growth(start, end, findings)
    assert findings.failures == [
        "mlx5_1:1 link_downed grew by 1 in the run",
        "mlx5_6:1 excessive_buffer_overrun_errors grew by 2 in the run",
    ]
    assert findings.warnings == [
        "mlx5_1:1 symbol_error grew by 12 in the run",
        "mlx5_4:1 port_xmit_discards grew by 3 in the run",
    ]
    assert growth[0] == {"port": "mlx5_1:1", "grew": {"symbol_error": 12, "link_downed": 1}}


def test_a_saturated_counter_or_a_vanished_port_is_said(node: Path) -> None:
    (port_dir(node, 0) / "counters" / "symbol_error").write_text("65535\n")
    (port_dir(node, 0) / "counters" / "link_downed").write_text("N/A (no PMA)\n")
    start = read_port_counters(node)
    assert start["mlx5_0:1"]["link_downed"] is None  # unreadable, not zero
    end = {k: v for k, v in read_port_counters(node).items() if k != "mlx5_7:1"}
    findings = Findings("fabric-errors", "FABRIC")
    fabric.judge_counter_growth(start, end, findings)
    assert findings.failures == ["mlx5_7:1 was read at the start but not at the end (gone?)"]
    assert findings.warnings == [
        "mlx5_0:1 symbol_error is at its maximum (65535): it no longer counts (reset the port "
        "counters, e.g. perfquery -R)"
    ]


def test_the_final_check_compares_with_the_runs_start(node: Path) -> None:
    start = read_port_counters(node)
    (port_dir(node, 2) / "counters" / "link_error_recovery").write_text("4\n")
    failed = fabric.run_errors(_context(start_fabric_counters=start))
    assert failed.status is Status.FAIL
    assert failed.message == "mlx5_2:1 link_error_recovery grew by 4 in the run"
    assert fabric.run_errors(_context()).status is Status.SKIP  # no start: nothing to compare
    assert fabric.read_start() == read_port_counters(node)


def test_accept_judges_the_fabric_it_is_told_to_expect(tmp_path: Path) -> None:
    import subprocess
    import sys

    root = hgx_tree(tmp_path / "node")
    (port_dir(root, 3) / "state").write_text("1: DOWN\n")
    command = [sys.executable, "-m", "gpuaccept", "accept", "--level", "quick", "--device"]
    command += ["cpu", "--only", "fabric", "--expect-nics", "8", "--expect-nic-rate", "400"]
    done = subprocess.run(
        [*command, "--no-history"],
        capture_output=True,
        text=True,
        env=os.environ | {"GPUACCEPT_SYSFS_ROOT": str(root)},
        timeout=300,
        check=False,
    )
    assert done.returncode == 1, done.stdout + done.stderr
    assert "[FABRIC] FAIL fabric" in done.stdout
    assert "mlx5_3:1 is DOWN (LinkUp), expected ACTIVE (LinkUp)" in done.stdout
    assert done.stdout.splitlines()[-1] == "[RESULT] FAILURE: fabric"
