"""The fabric checks over a sysfs tree of an HGX H100 node (tests/fabric_tree.py): each rule
turns its fault into the finding it names, and a healthy node passes."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import pytest

from gpuaccept.checks import fabric
from gpuaccept.checks.context import CheckContext
from gpuaccept.checks.judging import Findings
from gpuaccept.node_profile import NodeExpectation
from gpuaccept.probe.fabric import Q_COUNTERS, read_inventory, read_port_counters
from gpuaccept.references import load_shipped_references
from gpuaccept.suite.levels import level_settings
from gpuaccept.verdict import Status
from tests.fabric_tree import hgx_tree, port_dir

HGX = NodeExpectation(nics=8, nic_rate_gbps=400, nvme=2)


@pytest.fixture
def node(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = hgx_tree(tmp_path / "node")
    monkeypatch.setenv("GPUACCEPT_SYSFS_ROOT", str(root))
    (tmp_path / "quiet.log").write_text("")  # this machine's own kernel log stays out
    monkeypatch.setenv("GPUACCEPT_KERNEL_LOG", str(tmp_path / "quiet.log"))
    return root


def _context(expect: NodeExpectation | None = HGX, **more: object) -> CheckContext:
    return CheckContext(
        level="quick",
        device_mode="cpu",
        settings=level_settings("quick", "cpu"),
        references=load_shipped_references(),
        node=expect,
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
    # with no node profile or expectation at all: judged as found, every port a rail
    plain = fabric.run(_context(None))
    assert plain.status is Status.PASS, plain.message
    assert plain.message.startswith("8 of 8 RDMA port(s) ACTIVE at 400 Gb/s")


def test_an_unreadable_attribute_warns_as_unknown_and_never_hangs_the_check(node: Path) -> None:
    fw_ver = node / "sys" / "class" / "infiniband" / "mlx5_2" / "fw_ver"
    fw_ver.unlink()
    os.mkfifo(fw_ver)
    result = fabric.run(_context())
    assert result.status is Status.WARN, result.message
    assert (
        f"1 sysfs attribute(s) unreadable, e.g. {fw_ver}: not a regular file (read as unknown; "
        "see the details)"
    ) in result.message
    assert result.details["unreadable"] == {str(fw_ver): "not a regular file"}


def test_a_port_that_is_down_fails_by_name_and_the_count_with_it(node: Path) -> None:
    (port_dir(node, 3) / "state").write_text("1: DOWN\n")
    (port_dir(node, 3) / "phys_state").write_text("2: Polling\n")
    result = fabric.run(_context())
    assert result.status is Status.FAIL
    assert result.message == (
        "mlx5_3:1 is DOWN (Polling), expected ACTIVE (LinkUp); 7 ACTIVE InfiniBand/RoCE "
        "rail port(s), 8 expected (--expect-nics or the node profile's nics)"
    )


def test_a_port_that_trained_at_half_rate_fails_against_the_expectation_or_warns_without(
    node: Path,
) -> None:
    (port_dir(node, 5) / "rate").write_text("200 Gb/sec (4X HDR)\n")
    failed = fabric.run(_context())
    assert failed.status is Status.FAIL
    assert failed.message == "mlx5_5:1 runs at 200 Gb/s, below the expected 400 Gb/s"
    warned = fabric.run(_context(NodeExpectation(nics=8)))
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
    result = fabric.run(_context(NodeExpectation(nvme=8)))
    assert result.status is Status.FAIL
    assert result.message == (
        "2 NVMe controller(s), 8 expected (--expect-nvme or the node profile's nvme)"
    )
    bare = tmp_path / "bare"
    (bare / "sys").mkdir(parents=True)
    monkeypatch.setenv("GPUACCEPT_SYSFS_ROOT", str(bare))
    skipped = fabric.run(_context(None))
    assert skipped.status is Status.SKIP
    assert skipped.message.startswith("no InfiniBand/RoCE port in /sys/class/infiniband")
    required = fabric.run(_context(NodeExpectation(nics=8)))
    assert required.status is Status.FAIL
    assert (
        required.message
        == "0 ACTIVE InfiniBand/RoCE rail port(s), 8 expected (--expect-nics or the node "
        "profile's nics)"
    )


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
        "counters, e.g. perfquery -R)",
        "mlx5_0:1: 1 error counter(s) unreadable at the start or the end of the run "
        "(link_downed): their growth is unknown, not judged",
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
    quiet = tmp_path / "quiet.log"
    quiet.write_text("")
    command = [sys.executable, "-m", "gpuaccept", "accept", "--level", "quick", "--device"]
    command += ["cpu", "--only", "fabric", "--expect-nics", "8", "--expect-nic-rate", "400"]
    done = subprocess.run(
        [*command, "--no-history"],
        capture_output=True,
        text=True,
        env=os.environ | {"GPUACCEPT_SYSFS_ROOT": str(root), "GPUACCEPT_KERNEL_LOG": str(quiet)},
        timeout=300,
        check=False,
    )
    assert done.returncode == 1, done.stdout + done.stderr
    assert "[FABRIC] FAIL fabric" in done.stdout
    assert "mlx5_3:1 is DOWN (LinkUp), expected ACTIVE (LinkUp)" in done.stdout
    assert done.stdout.splitlines()[-1] == "[RESULT] FAILURE: fabric"


def _port(name: str = "mlx5_0", **fields: object) -> object:
    from gpuaccept.probe.fabric import IbPort, PciPlace

    base: dict[str, object] = {
        "device": name,
        "port": 1,
        "state": "ACTIVE",
        "phys_state": "LinkUp",
        "rate_gbps": 400.0,
        "link_layer": "InfiniBand",
        "firmware": "28.39.1002",
        "netdev": None,
        "pkeys": ("0xffff",),
        "place": PciPlace("0000:19:00.0", 0, ("0000:00:01.0", "0000:10:00.0")),
    }
    return IbPort(**{**base, **fields})  # type: ignore[arg-type]


def _judge_ports(ports: list[object], **expect: object) -> Findings:
    from gpuaccept.probe.fabric import NodeInventory

    findings = Findings("fabric", "FABRIC")
    fabric.judge_ports(NodeInventory(ports=ports), findings, **expect)  # type: ignore[arg-type]
    return findings


def test_each_half_of_a_ports_state_is_required_and_unreadable_is_said() -> None:
    found = _judge_ports(
        [
            _port("mlx5_0", phys_state="Polling"),
            _port("mlx5_1", state="INIT"),
            _port("mlx5_2", state=None, phys_state=None),
        ],
        expect_nics=1,
    )
    assert found.failures == [
        "mlx5_0:1 is ACTIVE (Polling), expected ACTIVE (LinkUp)",
        "mlx5_1:1 is INIT (LinkUp), expected ACTIVE (LinkUp)",
        "mlx5_2:1 is unreadable (unreadable), expected ACTIVE (LinkUp)",
        "0 ACTIVE InfiniBand/RoCE rail port(s), 1 expected (--expect-nics or the node profile's "
        "nics)",
    ]


def test_rates_are_compared_within_a_link_layer_and_an_unreadable_rate_is_said() -> None:
    found = _judge_ports(
        [
            _port("mlx5_0"),
            _port("mlx5_1", rate_gbps=None),
            _port("mlx5_2", link_layer="Ethernet", rate_gbps=200.0, pkeys=()),
            _port("mlx5_3", link_layer="Ethernet", rate_gbps=100.0, pkeys=()),
        ],
        rails=["mlx5_0", "mlx5_1", "mlx5_2", "mlx5_3"],  # RoCE rails beside InfiniBand ones
    )
    assert found.warnings == [
        # issue #50 §7: this one was silent without an expected rate
        "mlx5_1:1: rate unreadable, its speed is not judged here (give --expect-nic-rate to "
        "require a rate)",
        "mlx5_3:1 runs at 100 Gb/s while the node's fastest Ethernet port runs at 200 (give "
        "--expect-nic-rate to require a rate)",
    ]
    expected = _judge_ports(
        [_port("mlx5_0", rate_gbps=None), _port("mlx5_1", rate_gbps=0.5)], nic_rate_gbps=1.0
    )
    assert expected.failures == [
        "mlx5_0:1: rate unreadable, expected 1 Gb/s",
        "mlx5_1:1 runs at 0.5 Gb/s, below the expected 1 Gb/s",
    ]


def test_ports_whose_link_layer_is_unreadable_are_compared_among_themselves() -> None:
    found = _judge_ports(
        [_port("mlx5_0", link_layer=None), _port("mlx5_1", link_layer=None, rate_gbps=200.0)]
    )
    assert found.warnings == [
        "mlx5_1:1 runs at 200 Gb/s while the node's fastest port of unreadable link layer "
        "runs at 400 (give --expect-nic-rate to require a rate)"
    ]


def test_a_port_without_pkeys_among_ports_with_them_is_named() -> None:
    found = _judge_ports([_port("mlx5_0"), _port("mlx5_1"), _port("mlx5_2", pkeys=())])
    assert found.warnings == ["mlx5_2:1 has PKeys none, the node's other ports 0xffff"]
    assert _judge_ports([_port("mlx5_0"), _port("mlx5_1")]).warnings == []


def test_a_pcie_switch_is_a_bridge_below_the_root_port() -> None:
    from gpuaccept.probe.fabric import NodeInventory, PciGpu, PciPlace

    def gpu(*bridges: str) -> PciGpu:
        return PciGpu("0000:18:00.0", PciPlace("0000:18:00.0", 0, bridges))

    hca = _port(place=PciPlace("0000:19:00.0", 0, ("0000:00:01.0", "0000:10:00.0")))
    behind_switch = NodeInventory(ports=[hca], gpus=[gpu("0000:00:01.0", "0000:10:00.0")])
    assert fabric.affinity_map(behind_switch)[0]["via"] == "PCIe switch"
    on_root_port = NodeInventory(ports=[hca], gpus=[gpu("0000:00:01.0")])
    assert fabric.affinity_map(on_root_port)[0]["via"] == "NUMA node"
    findings = Findings("fabric", "FABRIC")
    fabric.judge_topology(NodeInventory(ports=[hca]), findings)  # a node without GPUs
    assert findings.warnings == []


def test_fabric_results_are_named_and_placed_and_say_what_they_saw(
    node: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    passed = fabric.run(_context())
    assert (passed.name, passed.area) == ("fabric", "FABRIC")
    errors = fabric.run_errors(_context(start_fabric_counters=read_port_counters(node)))
    assert (errors.name, errors.area, errors.status) == ("fabric-errors", "FABRIC", Status.PASS)
    assert errors.message == "8 port(s): no error counter grew in the run"
    assert errors.details == {"growth": [], "ports": [f"mlx5_{i}:1" for i in range(8)]}
    bare = tmp_path / "bare"
    (bare / "sys").mkdir(parents=True)
    monkeypatch.setenv("GPUACCEPT_SYSFS_ROOT", str(bare))
    skipped = fabric.run(_context(None))
    assert (skipped.name, skipped.area) == ("fabric", "FABRIC")
    assert skipped.message == (
        "no InfiniBand/RoCE port in /sys/class/infiniband (an expected count, from "
        "--expect-nics or the node profile's nics, requires some)"
    )
    assert skipped.details["inventory"]["ports"] == []
    no_ports = fabric.run_errors(_context())
    assert (no_ports.name, no_ports.area, no_ports.status, no_ports.message) == (
        "fabric-errors",
        "FABRIC",
        Status.SKIP,
        "no InfiniBand/RoCE port to read counters from",
    )
    # every port gone since the start: that is a failure, not nothing to read
    gone = fabric.run_errors(_context(start_fabric_counters={"mlx5_0:1": {"link_downed": 0}}))
    assert gone.status is Status.FAIL
    assert gone.message == "mlx5_0:1 was read at the start but not at the end (gone?)"
    expected_only = fabric.run(_context(NodeExpectation(nvme=0)))
    assert expected_only.status is Status.PASS
    assert expected_only.message == "0 of 0 RDMA port(s) ACTIVE at no Gb/s; 0 NVMe"


def test_each_port_and_counter_is_judged_on_its_own() -> None:
    start = {
        "mlx5_0:1": {"link_downed": 0},
        "mlx5_1:1": {"symbol_error": None, "link_downed": 3, "port_rcv_errors": 65534},
        "mlx5_2:1": {"symbol_error": 5},
    }
    end = {
        "mlx5_1:1": {"symbol_error": 9, "link_downed": 5, "port_rcv_errors": 65535},
        "mlx5_2:1": {"symbol_error": 12},
    }
    findings = Findings("fabric-errors", "FABRIC")
    growth = fabric.judge_counter_growth(start, end, findings)
    assert findings.failures == [
        "mlx5_0:1 was read at the start but not at the end (gone?)",
        "mlx5_1:1 link_downed grew by 2 in the run",
    ]
    assert findings.warnings == [
        "mlx5_1:1 port_rcv_errors reached its maximum (65535) in the run: it grew by at least 1 "
        "and may no longer count",
        "mlx5_1:1: 1 error counter(s) unreadable at the start or the end of the run "
        "(symbol_error): their growth is unknown, not judged",
        "mlx5_1:1 port_rcv_errors grew by 1 in the run",
        "mlx5_2:1 symbol_error grew by 7 in the run",
    ]
    assert growth == [
        {"port": "mlx5_1:1", "grew": {"link_downed": 2, "port_rcv_errors": 1}},
        {"port": "mlx5_2:1", "grew": {"symbol_error": 7}},
    ]


def test_a_roce_ports_retransmissions_warn_and_a_connection_that_gave_up_fails(
    node: Path,
) -> None:
    roce = port_dir(node, 0)
    (roce / "link_layer").write_text("Ethernet\n")
    hw = roce / "hw_counters"
    hw.mkdir()
    for name in ("out_of_sequence", "local_ack_timeout_err", "req_transport_retries_exceeded"):
        (hw / name).write_text("10\n")
    ib_hw = port_dir(node, 1) / "hw_counters"  # mlx5 keeps Q counters on InfiniBand ports too
    ib_hw.mkdir()
    (ib_hw / "req_transport_retries_exceeded").write_text("0\n")
    start = read_port_counters(node)
    assert start["mlx5_0:1"]["out_of_sequence"] == 10
    (hw / "out_of_sequence").write_text("250\n")
    (hw / "req_transport_retries_exceeded").write_text("11\n")
    (ib_hw / "req_transport_retries_exceeded").write_text("3\n")
    findings = Findings("fabric-errors", "FABRIC")
    fabric.judge_counter_growth(start, read_port_counters(node), findings)
    assert findings.failures == [
        "mlx5_0:1 req_transport_retries_exceeded grew by 1 in the run",
        "mlx5_1:1 req_transport_retries_exceeded grew by 3 in the run",
    ]
    assert findings.warnings == ["mlx5_0:1 out_of_sequence grew by 240 in the run"]


def test_a_wrapped_q_counter_grew_and_a_reset_one_is_said_and_judged_since() -> None:
    """mlx5's Q counters are 32 bits and wrap; a counter read lower otherwise was reset."""
    start = {"mlx5_0:1": {"out_of_sequence": 2**32 - 5, "link_downed": 7}}
    end = {"mlx5_0:1": {"out_of_sequence": 3, "link_downed": 2}}
    findings = Findings("fabric-errors", "FABRIC")
    growth = fabric.judge_counter_growth(start, end, findings)
    assert growth == [{"port": "mlx5_0:1", "grew": {"out_of_sequence": 8, "link_downed": 2}}]
    assert findings.failures == ["mlx5_0:1 link_downed grew by 2 in the run"]
    assert findings.warnings == [
        "mlx5_0:1 link_downed went back from 7 to 2: its counters were reset during the run, "
        "what they counted before the reset is unknown",
        "mlx5_0:1 out_of_sequence grew by 8 in the run",
    ]
    _recommended(findings, "fabric error counters that grew in the run")
    quiet = Findings("fabric-errors", "FABRIC")
    low = {"mlx5_0:1": {"out_of_sequence": 100}}  # low in its range: a reset, not a wrap
    assert fabric.judge_counter_growth(low, {"mlx5_0:1": {"out_of_sequence": 0}}, quiet) == []
    assert quiet.warnings[0].startswith("mlx5_0:1 out_of_sequence went back from 100 to 0")


def test_ports_without_a_readable_counter_skip_never_pass(
    node: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for hca in range(8):
        for counter in (port_dir(node, hca) / "counters").iterdir():
            counter.write_text("N/A (no PMA)\n")
    start = read_port_counters(node)
    result = fabric.run_errors(_context(start_fabric_counters=start))
    assert (result.name, result.area, result.status) == ("fabric-errors", "FABRIC", Status.SKIP)
    assert "none with a readable error counter" in result.message


def test_link_flaps_in_the_last_day_are_counted_per_interface_as_aznhc_does() -> None:
    from gpuaccept.probe.kernel_log import KernelLogScan, parse_link_flaps

    uptime = 200_000.0
    lines = [
        f"[{uptime - 60 * i:.6f}] mlx5_core 0000:19:00.0 ibp3s0: Link down, lost carrier"
        for i in range(5)
    ]  # aznhc takes the first ib... word: the interface
    lines += [
        f"[{uptime - 100.0:.6f}] IPoIB ib1: lost carrier",
        f"[{uptime - 25 * 3600:.6f}] IPoIB ib1: Lost Carrier",  # a day and more ago: not counted
        "IPoIB ib2: lost carrier",  # no stamp (a saved log): its age is unknown, never a failure
        f"[{uptime - 5:.6f}] eth0: lost carrier",  # not InfiniBand
        f"[{uptime - 5:.6f}] ib0: link up",
    ]
    scan = KernelLogScan(
        readable=True,
        source="dmesg",
        flaps=tuple(parse_link_flaps("\n".join(lines))),
        uptime_seconds=uptime,
    )
    findings = Findings("fabric", "FABRIC")
    counts = fabric.judge_link_flaps(scan, findings)
    assert counts == {"ibp3s0": 5, "ib1": 1}
    assert findings.failures == [
        "ibp3s0: 5 link flap(s) (lost carrier) in the kernel log in 24 h, aznhc fails at 5"
    ]
    _recommended(findings, "fabric error counters that grew in the run")
    assert findings.warnings == [
        "ib1: 1 link flap(s) (lost carrier) in the kernel log in 24 h",
        "ib2: 1 lost-carrier line(s) in dmesg with no time stamp (or one in the future): their "
        "age is unknown, so they are not judged",
    ]
    four = KernelLogScan(True, "dmesg", flaps=scan.flaps[:4], uptime_seconds=uptime)
    quiet = Findings("fabric", "FABRIC")
    fabric.judge_link_flaps(four, quiet)
    assert quiet.failures == []


def test_flaps_are_dated_by_their_own_stamps_and_matched_by_interface_not_host_name() -> None:
    """Issue #30: lost-carrier lines from three days ago failed the node, and an Ethernet
    interface counted when the host's name held "ib"."""
    from datetime import UTC, datetime

    from gpuaccept.probe.kernel_log import KernelLogScan, parse_link_flaps

    now = datetime(2026, 11, 25, 12, 0, 0, tzinfo=UTC).timestamp()
    old = "2026-11-22T12:00:00+00:00 node1 systemd-networkd[812]: ib0: Lost carrier"
    recent = "2026-11-25T11:00:00Z node1 systemd-networkd[812]: ib1: Lost carrier"
    host = "2026-11-25T11:00:00Z calib01 kernel: eth0: Link down, lost carrier"
    lines = [old] * 6 + [recent] * 5 + [host] * 6
    flaps = parse_link_flaps("\n".join(lines), now)
    assert {f.interface for f in flaps} == {"ib0", "ib1"}
    findings = Findings("fabric", "FABRIC")
    scan = KernelLogScan(True, "/var/log/syslog", flaps=tuple(flaps))
    assert fabric.judge_link_flaps(scan, findings, now) == {"ib1": 5}
    assert findings.failures == [
        "ib1: 5 link flap(s) (lost carrier) in the kernel log in 24 h, aznhc fails at 5"
    ]


def test_a_syslog_date_is_read_in_the_year_nearest_now() -> None:
    from gpuaccept.probe.kernel_log import line_time

    january = datetime_at(2027, 1, 1, 0, 30)
    assert line_time("Dec 31 23:00:00 node1 kernel: x", january) == datetime_at(2026, 12, 31, 23)
    assert line_time("Nov 22 10:00:00 node1 kernel: x", january) == datetime_at(2026, 11, 22, 10)
    assert line_time("Feb 29 10:00:00 node1 kernel: x", january) is None  # no such day since
    assert line_time("ib0: lost carrier", january) is None


def datetime_at(year: int, month: int, day: int, hour: int, minute: int = 0) -> float:
    from datetime import datetime

    return datetime(year, month, day, hour, minute).timestamp()


def test_the_fabric_check_reads_flaps_from_the_kernel_log(
    node: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import time

    log = tmp_path / "kernel.log"
    stamp = time.strftime("%b %d %H:%M:%S", time.localtime(time.time() - 600))
    log.write_text("".join(f"{stamp} gpu7 kernel: IPoIB ib4: lost carrier\n" for _ in range(6)))
    monkeypatch.setenv("GPUACCEPT_KERNEL_LOG", str(log))
    result = fabric.run(_context())
    assert result.status is Status.FAIL
    assert result.message == (
        "ib4: 6 link flap(s) (lost carrier) in the kernel log in 24 h, aznhc fails at 5"
    )
    assert result.details["link_flaps"] == {"ib4": 6}


def test_rate_and_pkey_warnings_are_all_kept_and_a_port_on_a_root_port_is_no_switch_peer() -> None:
    found = _judge_ports(
        [_port("mlx5_0"), _port("mlx5_1", rate_gbps=200.0), _port("mlx5_2", pkeys=())]
    )
    assert found.warnings == [
        "mlx5_1:1 runs at 200 Gb/s while the node's fastest InfiniBand port runs at 400 (give "
        "--expect-nic-rate to require a rate)",
        "mlx5_2:1 has PKeys none, the node's other ports 0xffff",
    ]
    from gpuaccept.probe.fabric import NodeInventory, PciGpu, PciPlace

    gpu = PciGpu("0000:18:00.0", PciPlace("0000:18:00.0", 0, ("0000:00:01.0", "0000:10:00.0")))
    root_port_hca = _port(place=PciPlace("0000:19:00.0", 1, ("0000:00:01.0",)))
    rows = fabric.affinity_map(NodeInventory(ports=[root_port_hca], gpus=[gpu]))
    assert rows[0]["via"] == "none"


def test_a_stopped_counter_does_not_hide_the_next_ones() -> None:
    start = {"mlx5_0:1": {"symbol_error": 65535, "link_downed": 1}}
    end = {"mlx5_0:1": {"symbol_error": 65535, "link_downed": 2}}
    findings = Findings("fabric-errors", "FABRIC")
    fabric.judge_counter_growth(start, end, findings)
    assert findings.failures == ["mlx5_0:1 link_downed grew by 1 in the run"]


def test_without_start_counters_the_errors_check_says_so(node: Path) -> None:
    result = fabric.run_errors(_context())
    assert (result.name, result.area, result.status, result.message) == (
        "fabric-errors",
        "FABRIC",
        Status.SKIP,
        "no port counters from the start of the run to compare with",
    )


def test_a_fabric_failure_reaches_prometheus_and_the_html_page(tmp_path: Path) -> None:
    from prometheus_client.parser import text_string_to_metric_families
    from typer.testing import CliRunner

    from gpuaccept.cli import app
    from gpuaccept.results import CheckResult, RunReport
    from tests.run_reports import T0, judged_report

    check = CheckResult(
        name="fabric", area="FABRIC", status=Status.FAIL, message="mlx5_3:1 is DOWN (Polling)"
    )
    report: RunReport = judged_report(
        command="accept",
        level="quick",
        device_mode="cuda",
        started_at=T0.isoformat(),
        finished_at=T0.isoformat(),
        duration_seconds=1.0,
        checks=[check],
        environment={"system": {"hostname": "gpu017"}},
    )
    path = tmp_path / "report.json"
    path.write_text(report.model_dump_json())
    prom, html = tmp_path / "m.prom", tmp_path / "r.html"
    result = CliRunner().invoke(
        app, ["report", str(path), "--prometheus", str(prom), "--html", str(html)]
    )
    assert result.exit_code == 0, result.output
    samples = [
        s
        for family in text_string_to_metric_families(prom.read_text())
        for s in family.samples
        if s.labels.get("check") == "fabric" and s.value == 1.0
    ]
    assert any(s.labels.get("status") == "fail" for s in samples), samples
    assert "mlx5_3:1 is DOWN (Polling)" in html.read_text()


def test_a_flap_exactly_a_day_old_counts_and_no_port_means_no_flap_judged(
    node: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from gpuaccept.probe.kernel_log import KernelLogScan, LinkFlap

    day_old = KernelLogScan(
        True, "dmesg", flaps=(LinkFlap("ib0", "x", 100.0),), uptime_seconds=100.0 + 24 * 3600
    )
    findings = Findings("fabric", "FABRIC")
    assert fabric.judge_link_flaps(day_old, findings) == {"ib0": 1}
    log = tmp_path / "flappy.log"
    log.write_text("IPoIB ib4: lost carrier\n" * 6)
    monkeypatch.setenv("GPUACCEPT_KERNEL_LOG", str(log))
    bare = tmp_path / "bare"
    (bare / "sys").mkdir(parents=True)
    monkeypatch.setenv("GPUACCEPT_SYSFS_ROOT", str(bare))
    quiet = fabric.run(_context(NodeExpectation(nvme=0)))  # no port: its flaps are not judged
    assert quiet.status is Status.PASS, quiet.message


def test_the_rates_seen_are_listed(node: Path) -> None:
    (port_dir(node, 6) / "rate").write_text("200 Gb/sec (4X HDR)\n")
    result = fabric.run(_context(NodeExpectation(nics=8)))
    assert result.status is Status.WARN
    assert result.details["inventory"]["ports"][6]["rate_gbps"] == 200.0
    (port_dir(node, 6) / "rate").write_text("400 Gb/sec (4X NDR)\n")
    (port_dir(node, 7) / "link_layer").write_text("Ethernet\n")
    (port_dir(node, 7) / "rate").write_text("200 Gb/sec (4X HDR)\n")
    mixed = fabric.run(_context(NodeExpectation(nics=8)))
    assert mixed.message.startswith("8 of 8 RDMA port(s) ACTIVE at 200, 400 Gb/s;")


def _frontend(root: Path, name: str, *, numa: int, switch: int, layer: str, rate: str) -> Path:
    """An HCA on a PCIe switch of its own (no GPU beside it): a frontend or storage port."""
    from tests.fabric_tree import _endpoint, _link, _write

    hca = _endpoint(root, numa, switch, 0, 0xE0 + switch)
    ib = root / "sys" / "class" / "infiniband" / name
    _link(ib / "device", hca)
    port = ib / "ports" / "1"
    _write(port / "state", "4: ACTIVE")
    _write(port / "phys_state", "5: LinkUp")
    _write(port / "rate", rate)
    _write(port / "link_layer", layer)
    return port


def test_a_dgx_frontend_and_storage_ports_are_not_held_to_the_rails(node: Path) -> None:
    """Issue #30 §3: a DGX H100's frontend RoCE port at 200 G and the uncabled second port of its
    storage HCA failed a healthy node, and a frontend port filled the count of a vanished rail."""
    _frontend(node, "mlx5_8", numa=0, switch=12, layer="Ethernet", rate="200 Gb/sec (4X HDR)")
    uncabled = _frontend(
        node, "mlx5_9", numa=1, switch=13, layer="InfiniBand", rate="10 Gb/sec (4X SDR)"
    )
    (uncabled / "state").write_text("1: DOWN\n")
    (uncabled / "phys_state").write_text("3: Disabled\n")
    healthy = fabric.run(_context(NodeExpectation(nics=8, nic_rate_gbps=400)))
    assert healthy.status is Status.PASS, healthy.message
    assert healthy.details["rails"] == [f"mlx5_{i}:1" for i in range(8)]
    assert healthy.details["other_ports"] == ["mlx5_8:1", "mlx5_9:1"]
    assert healthy.details["rails_told_by"] == "on a GPU's PCIe switch"
    import shutil

    shutil.rmtree(node / "sys" / "class" / "infiniband" / "mlx5_3")  # a rail gone from the bus
    (uncabled / "state").write_text("4: ACTIVE\n")
    (uncabled / "phys_state").write_text("5: LinkUp\n")
    missing = fabric.run(_context(NodeExpectation(nics=8)))
    assert missing.status is Status.FAIL
    assert (
        "7 ACTIVE InfiniBand/RoCE rail port(s), 8 expected (--expect-nics or the node "
        "profile's nics)" in missing.message
    )


def test_azures_frontend_ethernet_port_beside_the_ib_rails_is_not_a_rail(tmp_path: Path) -> None:
    """ND H200 v5: eight 400 G InfiniBand rails and mlx5_an0, 100 G Ethernet (aznhc's conf
    checks it at 100, the rails at 400); a VM shows no PCIe switches."""
    from gpuaccept.probe.fabric import NodeInventory

    ports = [_port(f"mlx5_ib{i}", place=None) for i in range(8)]
    ports.append(_port("mlx5_an0", link_layer="Ethernet", rate_gbps=100.0, pkeys=(), place=None))
    findings = Findings("fabric", "FABRIC")
    roles = fabric.judge_ports(
        NodeInventory(ports=ports), findings, expect_nics=8, nic_rate_gbps=400.0
    )
    assert (findings.failures, findings.warnings) == ([], [])
    assert [p.name for p in roles.others] == ["mlx5_an0:1"]
    assert roles.how == "InfiniBand beside Ethernet"


def test_rails_named_by_the_node_profile_are_the_ones_judged_and_a_missing_one_fails() -> None:
    from gpuaccept.probe.fabric import NodeInventory

    ports = [_port("mlx5_ib0"), _port("mlx5_ib1"), _port("mlx5_an0", rate_gbps=100.0)]
    findings = Findings("fabric", "FABRIC")
    roles = fabric.judge_ports(
        NodeInventory(ports=ports),
        findings,
        nic_rate_gbps=400.0,
        rails=["mlx5_ib0", "mlx5_ib1:1", "mlx5_ib2"],
    )
    assert [p.name for p in roles.rails] == ["mlx5_ib0:1", "mlx5_ib1:1"]
    assert [p.name for p in roles.others] == ["mlx5_an0:1"]
    assert roles.how == "named by the node profile"
    assert findings.failures == ["rail mlx5_ib2 (node profile) is not on this node"]
    earlier = Findings("fabric", "FABRIC")
    earlier.failures.append("an earlier finding")
    fabric.judge_ports(NodeInventory(ports=ports), earlier, rails=["mlx5_ib9"])
    assert earlier.failures == [
        "an earlier finding",
        "rail mlx5_ib9 (node profile) is not on this node",
    ]


def test_ports_nothing_tells_apart_are_all_rails() -> None:
    from gpuaccept.probe.fabric import NodeInventory

    roles = fabric.port_roles(NodeInventory(ports=[_port("mlx5_0"), _port("mlx5_1")]))
    assert ([p.name for p in roles.rails], roles.others) == (["mlx5_0:1", "mlx5_1:1"], [])
    assert roles.how == "every port (nothing tells rails apart)"


def test_the_profiles_rails_reach_the_check(node: Path) -> None:
    result = fabric.run(_context(NodeExpectation(rails=["mlx5_0", "mlx5_1:1"])))
    assert result.details["rails"] == ["mlx5_0:1", "mlx5_1:1"]
    assert result.details["rails_told_by"] == "named by the node profile"
    assert "6 other port(s) (frontend, storage) not held to the rails'" in result.message


@pytest.mark.parametrize(
    ("was", "now", "grew", "reset"),
    [
        (2**31, 0, 2**31, False),  # the upper half of 32 bits, read lower: wrapped round
        (2**30, 5, 5, True),  # the lower half, read lower: reset, judged on what it counted since
        (2**31 + 7, 2**31 + 7, None, False),  # unchanged: no growth at all
        (100, 1, 1, True),  # reset, then one more
        (100, 0, None, True),  # reset, nothing since
    ],
)
def test_a_q_counter_read_lower_is_a_wrap_or_a_reset_at_the_exact_bounds(
    was: int, now: int, grew: int | None, reset: bool
) -> None:
    findings = Findings("fabric-errors", "FABRIC")
    growth = fabric.judge_counter_growth(
        {"mlx5_0:1": {"out_of_sequence": was}}, {"mlx5_0:1": {"out_of_sequence": now}}, findings
    )
    assert growth == ([{"port": "mlx5_0:1", "grew": {"out_of_sequence": grew}}] if grew else [])
    said = [w for w in findings.warnings if "went back" in w]
    assert bool(said) is reset


def test_flaps_are_aged_against_the_now_given_at_the_exact_skew() -> None:
    from gpuaccept.probe.kernel_log import KernelLogScan, LinkFlap

    now = 1.9e9  # 2030: far from this machine's clock
    flaps = (
        LinkFlap("ib0", "x", at=now + fabric.FLAP_CLOCK_SKEW_SECONDS),  # at the skew: recent
        LinkFlap("ib0", "x", at=now - 3600),
        LinkFlap("ib2", "x"),
        LinkFlap("ib2", "x"),
    )
    findings = Findings("fabric", "FABRIC")
    assert fabric.judge_link_flaps(KernelLogScan(True, "syslog", flaps=flaps), findings, now) == {
        "ib0": 2
    }
    assert findings.warnings[-1].startswith("ib2: 2 lost-carrier line(s) in syslog with no time")


@pytest.mark.parametrize(
    ("answer", "warned"),
    [
        (True, None),  # dma-buf on every GPU: GPUDirect RDMA has its route without the module
        (False, "a GPU does not support dma-buf (the CUDA driver says so)"),
        (None, "dma-buf not checked"),  # no driver to ask (this machine), or no answer
    ],
)
def test_gpudirect_without_peermem_is_judged_by_the_drivers_dma_buf_answer(
    node: Path, monkeypatch: pytest.MonkeyPatch, answer: bool | None, warned: str | None
) -> None:
    """The p5 shape's warning (issue #30): EFA reaches GPU memory through dma-buf, without
    nvidia_peermem. NCCL asks the driver's CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED (probe/dmabuf.py);
    so does the check, and warns only when neither route is there or it could not ask."""
    from gpuaccept.probe import dmabuf

    asked: list[bool] = []

    def driver_says(seconds: float = 0.0) -> bool | None:
        asked.append(True)
        return answer

    monkeypatch.setattr(dmabuf, "dmabuf_supported", driver_says)
    (node / "sys" / "module" / "nvidia_peermem").rmdir()
    result = fabric.run(_context())
    assert asked == [True]
    assert result.details["gpudirect"] == {"nvidia_peermem": False, "dmabuf": answer}
    if warned is None:
        assert result.status is Status.PASS, result.message
        assert "GPUDirect" not in result.message
    else:
        assert result.status is Status.WARN
        assert result.message == (
            f"GPUDirect RDMA: the nvidia_peermem module is not loaded ({warned}): NCCL may stage "
            "GPU data through host memory"
        )
    # with the module loaded, the driver is not asked: the route is there
    (node / "sys" / "module" / "nvidia_peermem").mkdir()
    asked.clear()
    loaded = fabric.run(_context())
    assert asked == []
    assert loaded.details["gpudirect"] == {"nvidia_peermem": True, "dmabuf": None}
    assert "GPUDirect" not in loaded.message


def test_every_rail_failure_names_the_port_down_cause_and_its_tables_action() -> None:
    """A missing rail, a rail down, one below its rate and too few rails are each the
    `port-down` cause (data/actions.toml: drain, 'a fabric port down or at a lower rate'), not
    the check's own fallback, which would drain too but say nothing of the port."""
    found = _judge_ports(
        [_port("mlx5_0", state="DOWN", phys_state="Disabled"), _port("mlx5_1", rate_gbps=200.0)],
        expect_nics=2,
        nic_rate_gbps=400.0,
        rails=["mlx5_0", "mlx5_1", "mlx5_9"],
    )
    assert len(found.failures) == 4  # mlx5_9 missing, mlx5_0 down, mlx5_1 slow, 1 of 2 active
    _recommended(found, "a fabric port down or at a lower rate")


def _recommended(findings: Findings, source: str) -> None:
    """Each failure of `findings` is drained by its cause's row of data/actions.toml (whose
    source starts `source`), not by the check's fallback, which drains too and names no cause."""
    from gpuaccept.actions import Action, plan_actions

    failing = [
        r for r in plan_actions([findings.conclude("")]).recommendations if r.status is Status.FAIL
    ]
    assert [r.finding for r in failing] == list(findings.failures)
    for recommendation in failing:
        assert recommendation.action is Action.DRAIN
        assert recommendation.cause.startswith(source), recommendation


def test_a_port_gone_by_the_end_of_the_run_is_the_port_down_cause() -> None:
    findings = Findings("fabric-errors", "FABRIC")
    fabric.judge_counter_growth({"mlx5_3:1": {"link_downed": 0}}, {}, findings)
    assert findings.failures == ["mlx5_3:1 was read at the start but not at the end (gone?)"]
    _recommended(findings, "a fabric port down or at a lower rate")


def test_an_unreadable_counter_is_not_a_clean_one(node: Path) -> None:
    """Issue #50 §7: one port's link_downed unreadable ("N/A (no PMA)", or the file gone) among
    readable ones was skipped, and the node passed as "no error counter grew". Its growth is
    unknown: said by port and counter, a warning (the reader's trouble, never a hardware
    verdict: probe/sysfs.py), while what could be read is still judged."""
    start = read_port_counters(node)
    (port_dir(node, 3) / "counters" / "link_downed").write_text("N/A (no PMA)\n")
    (port_dir(node, 5) / "counters" / "symbol_error").unlink()
    result = fabric.run_errors(_context(start_fabric_counters=start))
    assert result.status is Status.WARN, result.message
    assert result.message == (
        "mlx5_3:1: 1 error counter(s) unreadable at the start or the end of the run "
        "(link_downed): their growth is unknown, not judged; mlx5_5:1: 1 error counter(s) "
        "unreadable at the start or the end of the run (symbol_error): their growth is unknown, "
        "not judged"
    )
    (port_dir(node, 1) / "counters" / "link_downed").write_text("1\n")  # still judged beside
    assert fabric.run_errors(_context(start_fabric_counters=start)).status is Status.FAIL
    # ports with no counter at all (EFA: no PMA) are said once, together
    blind = Findings("fabric-errors", "FABRIC")
    none = dict.fromkeys(("symbol_error", "link_downed"))
    fabric.judge_counter_growth(
        {f"rdmap{i}s0:1": none for i in range(32)},
        {f"rdmap{i}s0:1": none for i in range(32)},
        blind,
    )
    assert blind.warnings == [
        "32 port(s) without a readable error counter (no PMA), their errors not judged: "
        "rdmap0s0:1, rdmap10s0:1, rdmap11s0:1, rdmap12s0:1 and 28 more"
    ]
    # unreadable at the start alone is the same unknown
    findings = Findings("fabric-errors", "FABRIC")
    fabric.judge_counter_growth(
        {"p:1": {"link_downed": None}}, {"p:1": {"link_downed": 0}}, findings
    )
    assert findings.warnings == [
        "p:1: 1 error counter(s) unreadable at the start or the end of the run (link_downed): "
        "their growth is unknown, not judged"
    ]


@pytest.mark.parametrize(
    ("name", "bits"), [("out_of_sequence", 32), ("symbol_error", 16), ("link_downed", 8)]
)
def test_a_counter_at_its_maximum_is_said_whatever_its_width(name: str, bits: int) -> None:
    """Issue #50 §7: a RoCE Q counter held at 2**32 - 1 passed in silence where a PortCounter at
    its top warned. Whether mlx5 wraps its 32-bit Q counters or holds them is not published
    (mlx4 held its own: drivers/infiniband/hw/mlx4/mad.c ASSIGN_32BIT_COUNTER), so a counter at
    the top at both ends is said, whatever its width; one read lower at the end wrapped."""
    top = (1 << bits) - 1
    findings = Findings("fabric-errors", "FABRIC")
    fabric.judge_counter_growth({"p:1": {name: top}}, {"p:1": {name: top}}, findings)
    assert findings.failures == []
    [said] = findings.warnings
    assert said.startswith(f"p:1 {name} is at its maximum ({top}")
    # reaching the top in the run: the growth is a floor, said so, and still judged
    reached = Findings("fabric-errors", "FABRIC")
    fabric.judge_counter_growth({"p:1": {name: top - 3}}, {"p:1": {name: top}}, reached)
    assert reached.warnings[0] == (
        f"p:1 {name} reached its maximum ({top}) in the run: it grew by at least 3 and may no "
        "longer count"
    )
    assert f"p:1 {name} grew by 3 in the run" in [*reached.failures, *reached.warnings]
    if name in Q_COUNTERS:  # read lower at the end: it wrapped, and is not at its top
        wrapped = Findings("fabric-errors", "FABRIC")
        fabric.judge_counter_growth({"p:1": {name: top}}, {"p:1": {name: 4}}, wrapped)
        assert wrapped.warnings == [f"p:1 {name} grew by 5 in the run"]
    else:  # read lower at the end: reset (what its maximum's warning advises), and grown since
        reset = Findings("fabric-errors", "FABRIC")
        fabric.judge_counter_growth({"p:1": {name: top}}, {"p:1": {name: 2}}, reset)
        assert reset.warnings[0] == (
            f"p:1 {name} went back from {top} to 2: its counters were reset during the run, "
            "what they counted before the reset is unknown"
        )
        assert f"p:1 {name} grew by 2 in the run" in [*reset.failures, *reset.warnings]


def test_rails_slotted_on_the_other_socket_are_a_topology_warning_not_missing_rails(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue #50 §7: eight HCAs ACTIVE at 400 Gb/s, four of them in slots of the other socket,
    away from their GPUs, failed (and drained) as "4 ACTIVE ... rail port(s), 8 expected". They
    are rails of the rails' kind in the wrong place: counted, and warned about."""
    root = hgx_tree(tmp_path / "node", off_socket=4)
    monkeypatch.setenv("GPUACCEPT_SYSFS_ROOT", str(root))
    (tmp_path / "quiet.log").write_text("")
    monkeypatch.setenv("GPUACCEPT_KERNEL_LOG", str(tmp_path / "quiet.log"))
    result = fabric.run(_context())
    assert result.status is Status.WARN, result.message
    assert result.details["rails"] == [f"mlx5_{i}:1" for i in range(8)]
    assert result.details["rails_told_by"] == "on a GPU's PCIe switch, or of the rails' kind off it"
    assert result.message.split("; ")[:5] == [
        f"mlx5_{i}:1 is cabled as a rail (InfiniBand, 400 Gb/s) but shares no GPU's PCIe switch: "
        "counted as a rail, its GPU's traffic crosses the PCIe root or the socket link (a card "
        "in the wrong slot?)"
        for i in range(4)
    ] + ["GPU 0000:18:00.0 (NUMA node 0) has no RDMA port on its PCIe switch or NUMA node"]
    assert "expected" not in result.message
    # one of them down is still a rail down, by name; one of the others gone is still missing
    (port_dir(root, 2) / "state").write_text("1: DOWN\n")
    down = fabric.run(_context())
    assert down.status is Status.FAIL
    assert "mlx5_2:1 is DOWN (LinkUp), expected ACTIVE (LinkUp)" in down.message
    assert "7 ACTIVE InfiniBand/RoCE rail port(s), 8 expected" in down.message
    # without an expected count nothing is filled in: the switch's rails stand alone
    assert fabric.port_roles(read_inventory(root)).how == "on a GPU's PCIe switch"


def test_a_node_without_numa_is_not_faulted_for_it(node: Path) -> None:
    """Issue #50 §7: on a single-socket node the kernel writes numa_node -1 for every device
    (no proximity domain from the firmware), and every GPU warned that no RDMA port was near.
    One memory node: every port is local. With several NUMA nodes, -1 is said as unknown."""
    import shutil

    for path in node.rglob("numa_node"):
        path.write_text("-1\n")
    shutil.rmtree(node / "sys" / "devices" / "system" / "node" / "node1")
    inventory = read_inventory(node)
    far = inventory.ports[0]
    off_switch = dataclasses.replace(far, place=dataclasses.replace(far.place, bridges=()))
    lonely = dataclasses.replace(inventory, ports=[off_switch], gpus=inventory.gpus[:2])
    findings = Findings("fabric", "FABRIC")
    rows = fabric.judge_topology(lonely, findings)
    assert findings.warnings == []
    assert [row["via"] for row in rows] == ["the node's one NUMA node"] * 2
    assert rows[0]["nics"] == ["mlx5_0:1"]
    two_sockets = dataclasses.replace(lonely, numa_cpus={0: "0-55", 1: "56-111"})
    unknown = Findings("fabric", "FABRIC")
    fabric.judge_topology(two_sockets, unknown)
    assert unknown.warnings[0] == (
        "GPU 0000:18:00.0 has no RDMA port on its PCIe switch, and its NUMA node is unknown "
        "(numa_node -1 on a node of 2 NUMA nodes)"
    )
    assert fabric.run(_context()).status is Status.PASS  # the whole HGX tree, NUMA-less
    # the ports say node 0, the GPUs -1: on one memory node, nothing is far
    on_zero = dataclasses.replace(
        off_switch, place=dataclasses.replace(off_switch.place, numa_node=0)
    )
    mixed = Findings("fabric", "FABRIC")
    fabric.judge_topology(dataclasses.replace(lonely, ports=[on_zero]), mixed)
    assert mixed.warnings == []


@pytest.mark.parametrize(("ports", "tail"), [(4, ""), (5, " and 1 more")])
def test_blind_ports_are_named_up_to_four_then_counted(ports: int, tail: str) -> None:
    none = dict.fromkeys(("symbol_error", "link_downed"))
    blind = {f"efa{i}:1": none for i in range(ports)}
    findings = Findings("fabric-errors", "FABRIC")
    # a blind port sorts first: the ports after it are still judged
    fabric.judge_counter_growth(
        {**blind, "mlx5_9:1": {"link_downed": 0}},
        {**blind, "mlx5_9:1": {"link_downed": 1}},
        findings,
    )
    assert findings.warnings[0] == (
        f"{ports} port(s) without a readable error counter (no PMA), their errors not judged: "
        "efa0:1, efa1:1, efa2:1, efa3:1" + tail
    )
    assert findings.failures == ["mlx5_9:1 link_downed grew by 1 in the run"]


def test_unreadable_counters_are_listed_and_one_exposed_at_one_end_only_is_unread() -> None:
    findings = Findings("fabric-errors", "FABRIC")
    fabric.judge_counter_growth(
        {"p:1": {"link_downed": None, "symbol_error": None, "port_rcv_errors": 0}},
        {"p:1": {"link_downed": 0, "symbol_error": 0, "port_rcv_errors": 0, "out_of_sequence": 9}},
        findings,
    )
    assert findings.warnings == [
        "p:1: 3 error counter(s) unreadable at the start or the end of the run (symbol_error, "
        "link_downed, out_of_sequence): their growth is unknown, not judged"
    ]


def test_a_q_counter_at_its_maximum_says_its_width() -> None:
    findings = Findings("fabric-errors", "FABRIC")
    top = (1 << 32) - 1
    fabric.judge_counter_growth(
        {"p:1": {"out_of_sequence": top}}, {"p:1": {"out_of_sequence": top}}, findings
    )
    [said] = findings.warnings
    assert "(4294967295, 32 bits)" in said
