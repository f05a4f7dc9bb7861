"""The corpus of node shapes the field publishes (issue #30 §9): each a sysfs tree and a fake-NVML
scenario, the node profile an operator of that SKU would write, and broken variants that must
fail. tests/test_node_shapes.py runs every fabric, health, host and burn-in judge over all of
them: a new judge is not done until healthy shapes pass and broken ones fail.

Where a shape's facts come from (read, not remembered):
- Azure's per-SKU confs, Azure/azurehpc-health-checks at 0e0a1ac: conf/nd96isr_h100_v5.conf
  (check_hw_cpuinfo 2 96 96 line 16; check_hw_ib 400 mlx5_ib0:1 ... mlx5_ib7:1 lines 19-26;
  check_gpu_count 8 line 46), conf/nd96isr_h200_v5.conf (check_hw_ib 100 mlx5_an0:1 line 19 beside
  the eight 400 G rails lines 20-27), conf/nd96asr_v4.conf (A100: check_hw_ib 200 mlx5_ib0-7
  lines 25-32), conf/nc40ads_h100_v5.conf (one socket of 40 cores line 22, check_gpu_count 1 line
  33, no check_hw_ib: no RDMA port).
- AWS EFA, torvalds/linux drivers/infiniband/hw/efa/efa_verbs.c at 031616c4 (read 2026-11-27
  through the code index, functions named, lines not counted): efa_query_port sets the state
  IB_PORT_ACTIVE, IB_PORT_PHYS_STATE_LINK_UP, IB_SPEED_EDR and IB_WIDTH_4X whatever the link (so
  sysfs prints "100 Gb/sec (4X EDR)" on every EFA port), and efa_port_link_layer (the file's last
  function) returns IB_LINK_LAYER_UNSPECIFIED, which
  drivers/infiniband/core/sysfs.c link_layer_show prints as "Unknown" (its default case, read at
  0147ebcf through the code index). A p5 has 32 EFA devices:
  "P5 and P5e instances support up to 32 network cards and can provide up to 3,200 Gbps of network
  bandwidth", one EFA per card
  (docs.aws.amazon.com/AWSEC2/latest/UserGuide/efa-acc-inst-types.html). EFA has no PMA: no
  counters/ directory.
- The one-GPU H200 and H100 slices are not modelled: tests/shapes/h200-one-gpu-slice.json and
  h100-one-gpu-slice.json were captured on real cloud VMs on 2026-11-26
  (scripts/capture_node_shape.py): virtio devices, numa_node -1, no cpufreq, NVML answering "Not
  Supported" for all 18 NVLinks and the fabric.
- The DGX H100 is tests/fabric_tree.py's HGX tree with a frontend RoCE HCA and a storage HCA
  whose second port is uncabled, each on a PCIe switch without a GPU.

What is modelled rather than read: the PCI layout of VMs (each passed-through device alone on a
PCI domain of its own, without the host's switches), the device names of EFA and RoCE ports, the
NVML answers of the VMs' GPUs (a healthy board of the model, as tests/checks/conftest.py plays
it; only the slice's were captured), and the GCP shapes' ports (A3 Mega: GPUDirect-TCPXO over
gVNIC, no RDMA device; A3 Ultra: eight 400 G RoCE ports), which no source here lays out in sysfs.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpuaccept.node_profile import NodeExpectation
from gpuaccept.probe.fabric import ERROR_COUNTERS
from tests.checks.conftest import h100_sxm
from tests.fabric_tree import _link, _write

SHAPES_DIR = Path(__file__).parent / "shapes"
NDR, HDR, EDR = "400 Gb/sec (4X NDR)", "200 Gb/sec (4X HDR)", "100 Gb/sec (4X EDR)"


class Tree:
    """A sysfs tree under `root`, built device by device."""

    def __init__(self, root: Path) -> None:
        self.root = root
        (root / "sys" / "class" / "infiniband").mkdir(parents=True, exist_ok=True)

    def vm_device(self, domain: int, numa: int) -> Path:
        """A passed-through PCI function alone on PCI domain `domain` (a VM's view)."""
        device = self.root / "sys" / "devices" / f"pci{domain:04x}:00" / f"{domain:04x}:00:00.0"
        _write(device / "numa_node", str(numa))
        _link(self.root / "sys" / "bus" / "pci" / "devices" / device.name, device)
        return device

    def gpu(self, device: Path) -> None:
        _write(device / "vendor", "0x10de")
        _write(device / "class", "0x030200")

    def hca(
        self,
        name: str,
        device: Path,
        *,
        layer: str,
        rate: str,
        ports: int = 1,
        netdev: str | None = None,
        counters: bool = True,
    ) -> None:
        _write(device / "vendor", "0x15b3" if counters else "0x1d0f")
        _write(device / "class", "0x020700")
        ib = self.root / "sys" / "class" / "infiniband" / name
        _link(ib / "device", device)
        _write(ib / "fw_ver", "28.39.1002")
        for number in range(1, ports + 1):
            port = ib / "ports" / str(number)
            _write(port / "state", "4: ACTIVE")
            _write(port / "phys_state", "5: LinkUp")
            _write(port / "rate", rate)
            _write(port / "link_layer", layer)
            if layer == "InfiniBand":
                _write(port / "pkeys" / "0", "0xffff")
            if counters:
                for counter in ERROR_COUNTERS:
                    _write(port / "counters" / counter, "0")
            if netdev:
                _write(port / "gid_attrs" / "ndevs" / "0", netdev)

    def net(self, name: str, device: Path | None, speed_mbps: int, state: str = "up") -> None:
        net = self.root / "sys" / "class" / "net" / name
        if device is not None:
            _link(net / "device", device)
        _write(net / "operstate", state)
        _write(net / "speed", str(speed_mbps))

    def numa(self, cpulists: list[str]) -> None:
        for node, cpus in enumerate(cpulists):
            _write(
                self.root / "sys" / "devices" / "system" / "node" / f"node{node}" / "cpulist", cpus
            )

    def cpufreq(self, cpus: int, max_khz: int) -> None:
        for cpu in range(cpus):
            base = self.root / "sys" / "devices" / "system" / "cpu" / f"cpu{cpu}" / "cpufreq"
            _write(base / "scaling_max_freq", str(max_khz))

    def module(self, name: str) -> None:
        (self.root / "sys" / "module" / name).mkdir(parents=True, exist_ok=True)

    def port(self, name: str, number: int = 1) -> Path:
        return self.root / "sys" / "class" / "infiniband" / name / "ports" / str(number)


def _gpu_scenario(count: int, **facts: Any) -> dict[str, Any]:
    return {"gpus": [h100_sxm(i, **facts) for i in range(count)]}


def _h200(count: int) -> dict[str, Any]:
    return _gpu_scenario(count, name="NVIDIA H200", pci_device_id=0x233510DE)


def _a100(count: int) -> dict[str, Any]:
    links = [{"active": True, "version": 3} for _ in range(12)]
    return _gpu_scenario(
        count, name="NVIDIA A100-SXM4-80GB", pci_device_id=0x20B210DE, nvlink=links
    )


Breaker = Callable[[Tree, dict[str, Any]], None]


@dataclass(frozen=True)
class Variant:
    """A fault on a shape: what breaks it, the judge that must see it and what that judge says
    (`says` in its failures; None: the judge must still pass, the fault is not the node's)."""

    name: str
    breaks: Breaker
    judge: str
    says: str | None
    verdict: str = "fail"  # "warn" where the judge cannot be sure (a lone GPU below its floor)


@dataclass(frozen=True)
class Shape:
    name: str
    build: Callable[[Tree], None]
    nvml: Callable[[], dict[str, Any]]
    profile: NodeExpectation
    cpus: int  # logical CPUs the SKU has (os.cpu_count there)
    # the healthy verdict of each judge: "pass", "skip" (nothing to judge) or "warn" (something
    # the judge could not confirm, said), never "fail"
    healthy: dict[str, str]
    variants: list[Variant] = field(default_factory=list)

    def gpus(self) -> int:
        return len(self.nvml()["gpus"])


# --- builders -------------------------------------------------------------------------------


def _azure_nd(rate: str, frontend: bool) -> Callable[[Tree], None]:
    def build(tree: Tree) -> None:
        for i in range(8):
            tree.gpu(tree.vm_device(0x0100 + i, i // 4))
            tree.hca(
                f"mlx5_ib{i}", tree.vm_device(0x0200 + i, i // 4), layer="InfiniBand", rate=rate
            )
            tree.net(f"ib{i}", None, -1)
        tree.net("eth0", None, 40000)
        if frontend:  # mlx5_an0: the accelerated-networking VF, 100 G Ethernet
            an0 = tree.vm_device(0x0300, 0)
            tree.hca("mlx5_an0", an0, layer="Ethernet", rate=EDR, netdev="eth1")
            tree.net("eth1", an0, 100000)
        tree.numa(["0-47", "48-95"])
        tree.module("nvidia_peermem")

    return build


def _nc40ads(tree: Tree) -> None:
    tree.gpu(tree.vm_device(0x0100, 0))
    tree.net("eth0", None, 40000)
    tree.numa(["0-39"])


def _aws_p5(tree: Tree) -> None:
    for i in range(8):
        tree.gpu(tree.vm_device(0x0100 + i, i // 4))
    for j in range(32):
        device = tree.vm_device(0x0200 + j, j // 16)
        tree.hca(f"rdmap{0x10 + j}s0", device, layer="Unknown", rate=EDR, counters=False)
    tree.net("ens32", tree.vm_device(0x0400, 0), 100000)
    tree.numa(["0-47,96-143", "48-95,144-191"])


def _gcp_a3_mega(tree: Tree) -> None:
    for i in range(8):
        tree.gpu(tree.vm_device(0x0100 + i, i // 4))
        tree.net(f"eth{i + 1}", tree.vm_device(0x0200 + i, i // 4), 200000)  # TCPXO gVNIC
    tree.net("eth0", tree.vm_device(0x0300, 0), 100000)
    tree.numa(["0-51,104-155", "52-103,156-207"])


def _gcp_a3_ultra(tree: Tree) -> None:
    for i in range(8):
        tree.gpu(tree.vm_device(0x0100 + i, i // 4))
        device = tree.vm_device(0x0200 + i, i // 4)
        tree.hca(f"mlx5_{i}", device, layer="Ethernet", rate=NDR, netdev=f"gpu{i}rdma0")
        tree.net(f"gpu{i}rdma0", device, 400000)
    tree.net("eth0", tree.vm_device(0x0300, 0), 200000)
    tree.numa(["0-55,112-167", "56-111,168-223"])
    tree.module("nvidia_peermem")


def _dgx_h100(tree: Tree) -> None:
    from tests.fabric_tree import _endpoint, hgx_tree

    hgx_tree(tree.root)
    for name, numa, switch, layer, rate, ports in (
        ("mlx5_8", 0, 12, "Ethernet", HDR, 1),  # frontend RoCE
        ("mlx5_9", 1, 13, "InfiniBand", NDR, 2),  # storage, its second port uncabled
    ):
        tree.hca(
            name,
            _endpoint(tree.root, numa, switch, 0, 0xE0 + switch),
            layer=layer,
            rate=rate,
            ports=ports,
        )
    uncabled = tree.port("mlx5_9", 2)
    _write(uncabled / "state", "1: DOWN")
    _write(uncabled / "phys_state", "3: Disabled")
    _write(uncabled / "rate", "10 Gb/sec (4X SDR)")
    tree.cpufreq(224, 3_800_000)


def _single_socket(tree: Tree) -> None:
    """One socket, two GPUs and one HCA behind the root ports (a workstation-class node)."""
    from tests.fabric_tree import _endpoint

    for i in range(2):
        tree.gpu(_endpoint(tree.root, 0, i, 0, 0x18 + i * 0x10))
    tree.hca("mlx5_0", _endpoint(tree.root, 0, 2, 0, 0x40), layer="InfiniBand", rate=NDR)
    tree.numa(["0-63"])
    tree.cpufreq(64, 3_100_000)
    tree.module("nvidia_peermem")


def _hgx_rails_off_socket(tree: Tree) -> None:
    """tests/fabric_tree.py's HGX node with the HCAs of GPUs 0-3 in CPU-attached slots of the
    other socket: cabled and ACTIVE at 400 G, slotted wrong (issue #50 §7)."""
    from tests.fabric_tree import hgx_tree

    hgx_tree(tree.root, off_socket=4)


def _single_socket_without_numa(tree: Tree) -> None:
    """The single-socket node as its firmware often leaves it: no proximity domain, so the
    kernel writes numa_node -1 for every device (Documentation/ABI/testing/sysfs-bus-pci)."""
    _single_socket(tree)
    for path in tree.root.rglob("numa_node"):
        path.write_text("-1\n")


def captured(path: Path) -> tuple[Callable[[Tree], None], Callable[[], dict[str, Any]]]:
    """A shape captured on a real node (scripts/capture_node_shape.py): the tree's builder and
    its NVML scenario."""
    data = json.loads(path.read_text())

    def build(tree: Tree) -> None:
        for rel in data["dirs"]:
            (tree.root / rel).mkdir(parents=True, exist_ok=True)
        # links first, shallowest first, each target made a directory: a file written through
        # a class link lands in the device's directory, as in a real /sys
        for rel, target in sorted(data["links"].items(), key=lambda item: item[0].count("/")):
            link = tree.root / rel
            (link.parent / target).resolve().mkdir(parents=True, exist_ok=True)
            if not link.is_symlink():
                if link.is_dir():
                    shutil.rmtree(link)
                link.parent.mkdir(parents=True, exist_ok=True)
                link.symlink_to(target)
        for rel, text in data["files"].items():
            _write(tree.root / rel, text)

    def nvml() -> dict[str, Any]:
        scenario: dict[str, Any] = {"gpus": []}
        for gpu in data["nvml"].get("gpus", []):
            played = h100_sxm(0, name=gpu["name"], pci_device_id=gpu["pci_device_id"])
            # NVML answered "Not Supported" for every link and the fabric: the fake raises it
            played["nvlink"] = [
                {"state": e["state"]} for e in gpu["nvlink"] if isinstance(e["state"], int)
            ]
            played["fabric"] = {"state": gpu["fabric"]["state"], "status": gpu["fabric"]["status"]}
            played["pcie"] = gpu["pcie"]
            scenario["gpus"].append(played)
        return scenario

    return build, nvml


# --- faults ---------------------------------------------------------------------------------


def port_down(name: str, number: int = 1) -> Breaker:
    def breaks(tree: Tree, _: dict[str, Any]) -> None:
        _write(tree.port(name, number) / "state", "1: DOWN")
        _write(tree.port(name, number) / "phys_state", "3: Disabled")

    return breaks


def hca_gone(name: str) -> Breaker:
    """The HCA gone from the bus: its class entry is no more."""

    def breaks(tree: Tree, _: dict[str, Any]) -> None:
        entry = tree.root / "sys" / "class" / "infiniband" / name
        entry.unlink() if entry.is_symlink() else shutil.rmtree(entry)

    return breaks


def rate(name: str, text: str) -> Breaker:
    def breaks(tree: Tree, _: dict[str, Any]) -> None:
        _write(tree.port(name) / "rate", text)

    return breaks


def nvlink_down(gpu: int, link: int) -> Breaker:
    def breaks(_: Tree, scenario: dict[str, Any]) -> None:
        scenario["gpus"][gpu]["nvlink"][link] = {"active": False, "version": 4}

    return breaks


def uncorrectable_ecc(gpu: int) -> Breaker:
    def breaks(_: Tree, scenario: dict[str, Any]) -> None:
        scenario["gpus"][gpu]["ecc"]["volatile"]["uncorrected"]["sram"] = 1

    return breaks


def fabric_not_registered(gpu: int) -> Breaker:
    def breaks(_: Tree, scenario: dict[str, Any]) -> None:
        scenario["gpus"][gpu]["fabric"] = {"state": 2, "status": 0}

    return breaks


def cpu_capped(cpu: int, khz: int) -> Breaker:
    def breaks(tree: Tree, _: dict[str, Any]) -> None:
        base = tree.root / "sys" / "devices" / "system" / "cpu" / f"cpu{cpu}" / "cpufreq"
        _write(base / "scaling_max_freq", str(khz))

    return breaks


def slow_gpu(gpu: int) -> Breaker:
    """The burn-in's figures: `gpu` at 60% of its peers' throughput (marked in the scenario)."""

    def breaks(_: Tree, scenario: dict[str, Any]) -> None:
        scenario["burnin_slow"] = gpu

    return breaks


def _hgx_faults(rail: str, vanished: str) -> list[Variant]:
    return [
        Variant("a rail down", port_down(rail), "fabric", f"{rail}:1"),
        Variant("a rail gone from the bus", hca_gone(vanished), "fabric", "7 ACTIVE"),
        Variant("a rail at half rate", rate(rail, HDR), "fabric", f"{rail}:1"),
        Variant("an NVLink down", nvlink_down(3, 7), "health", "17 of 18 NVLinks active"),
        Variant(
            "an uncorrectable SRAM ECC error", uncorrectable_ecc(5), "health", "uncorrectable SRAM"
        ),
        Variant("one GPU 40% slow in the burn-in", slow_gpu(6), "burnin", "gpu6"),
    ]


def _captured_slice(name: str) -> Shape:
    """A one-GPU cloud VM read by scripts/capture_node_shape.py: no fabric to judge, and its
    one GPU cannot be a straggler against itself, only below its reference floor (a warning)."""
    build, nvml = captured(SHAPES_DIR / f"{name}.json")
    return Shape(
        name,
        build,
        nvml,
        NodeExpectation(cpus=16),
        16,
        {"fabric": "skip", "health": "pass", "host": "pass", "burnin": "pass"},
        [
            Variant(
                "an uncorrectable SRAM ECC error",
                uncorrectable_ecc(0),
                "health",
                "uncorrectable SRAM",
            ),
            Variant("its GPU 40% slow in the burn-in", slow_gpu(0), "burnin", "below", "warn"),
        ],
    )


SHAPES: list[Shape] = [
    Shape(
        "azure-nd-h100-v5",
        _azure_nd(NDR, frontend=False),
        lambda: _gpu_scenario(8),
        NodeExpectation(nics=8, nic_rate_gbps=400, cpus=96),
        96,
        {"fabric": "pass", "health": "pass", "host": "pass", "burnin": "pass"},
        _hgx_faults("mlx5_ib2", "mlx5_ib5"),
    ),
    Shape(
        "azure-nd-h200-v5",
        _azure_nd(NDR, frontend=True),
        lambda: _h200(8),
        NodeExpectation(nics=8, nic_rate_gbps=400, cpus=96),
        96,
        {"fabric": "pass", "health": "pass", "host": "pass", "burnin": "pass"},
        [
            *_hgx_faults("mlx5_ib4", "mlx5_ib3"),
            # the frontend port is not a rail: down, it is the VM's networking, not the fabric's
            Variant("the frontend port down", port_down("mlx5_an0"), "fabric", None),
            Variant("a fabric not registered", fabric_not_registered(2), "health", "in progress"),
        ],
    ),
    Shape(
        "azure-nd-a100-v4",
        _azure_nd(HDR, frontend=False),
        lambda: _a100(8),
        NodeExpectation(nics=8, nic_rate_gbps=200, cpus=96),
        96,
        {"fabric": "pass", "health": "pass", "host": "pass", "burnin": "pass"},
        [
            Variant("a rail down", port_down("mlx5_ib0"), "fabric", "mlx5_ib0:1"),
            Variant("a rail at EDR", rate("mlx5_ib7", EDR), "fabric", "mlx5_ib7:1"),
            Variant("an NVLink down", nvlink_down(0, 11), "health", "11 of 12 NVLinks active"),
        ],
    ),
    Shape(
        "azure-nc40ads-h100-v5",
        _nc40ads,
        lambda: _gpu_scenario(
            1,
            name="NVIDIA H100 NVL",
            pci_device_id=0x232110DE,
            nvlink=[{"active": False, "version": 4} for _ in range(18)],
            fabric={"state": 0},
        ),
        NodeExpectation(nics=0, cpus=40),
        40,
        {"fabric": "pass", "health": "pass", "host": "pass", "burnin": "pass"},
        [
            Variant(
                "an uncorrectable SRAM ECC error",
                uncorrectable_ecc(0),
                "health",
                "uncorrectable SRAM",
            ),
            Variant("its GPU 40% slow in the burn-in", slow_gpu(0), "burnin", "below", "warn"),
        ],
    ),
    Shape(
        "aws-p5",
        _aws_p5,
        lambda: _gpu_scenario(8),
        NodeExpectation(nics=32, nic_rate_gbps=100, cpus=192),
        192,
        # EFA reaches GPU memory through dma-buf, which the check asks the CUDA driver about; the
        # CPU tests have no driver to ask (tests/conftest.py), so it warns that GPUDirect RDMA was
        # not confirmed (nvidia_peermem not loaded, dma-buf not checked); it does not fail
        {"fabric": "warn", "health": "pass", "host": "pass", "burnin": "pass"},
        [
            Variant("an EFA device gone", hca_gone("rdmap21s0"), "fabric", "31 ACTIVE"),
            Variant("an NVLink down", nvlink_down(1, 0), "health", "17 of 18 NVLinks active"),
            Variant("one GPU 40% slow in the burn-in", slow_gpu(0), "burnin", "gpu0"),
        ],
    ),
    Shape(
        "gcp-a3-mega",
        _gcp_a3_mega,
        lambda: _gpu_scenario(8),
        NodeExpectation(cpus=208),
        208,
        {"fabric": "skip", "health": "pass", "host": "pass", "burnin": "pass"},
        [Variant("an NVLink down", nvlink_down(7, 17), "health", "17 of 18 NVLinks active")],
    ),
    Shape(
        "gcp-a3-ultra",
        _gcp_a3_ultra,
        lambda: _h200(8),
        NodeExpectation(nics=8, nic_rate_gbps=400, cpus=224),
        224,
        {"fabric": "pass", "health": "pass", "host": "pass", "burnin": "pass"},
        [
            Variant("a RoCE rail down", port_down("mlx5_6"), "fabric", "mlx5_6:1"),
            Variant("a RoCE rail gone", hca_gone("mlx5_1"), "fabric", "7 ACTIVE"),
        ],
    ),
    Shape(
        "dgx-h100",
        _dgx_h100,
        lambda: _gpu_scenario(8),
        NodeExpectation(nics=8, nic_rate_gbps=400, nvme=2, cpus=224, min_cpu_mhz=3000),
        224,
        {"fabric": "pass", "health": "pass", "host": "pass", "burnin": "pass"},
        [
            Variant("a rail gone from the bus", hca_gone("mlx5_3"), "fabric", "7 ACTIVE"),
            Variant("the storage HCA's port down", port_down("mlx5_9", 1), "fabric", None),
            Variant("the frontend at 100 G", rate("mlx5_8", EDR), "fabric", None),
            Variant("a CPU capped at 800 MHz", cpu_capped(17, 800_000), "host", "cpu17"),
            Variant("a fabric not registered", fabric_not_registered(4), "health", "in progress"),
        ],
    ),
    Shape(
        "single-socket-2gpu",
        _single_socket,
        lambda: _gpu_scenario(2),
        NodeExpectation(nics=1, nic_rate_gbps=400, cpus=64, min_cpu_mhz=3000),
        64,
        {"fabric": "pass", "health": "pass", "host": "pass", "burnin": "pass"},
        [
            Variant("its one rail down", port_down("mlx5_0"), "fabric", "mlx5_0:1"),
            Variant("one GPU 40% slow in the burn-in", slow_gpu(1), "burnin", "gpu1"),
        ],
    ),
    # issue #50 §7: rails in the wrong slots are a topology warning, not missing rails
    Shape(
        "hgx-h100-four-rails-off-socket",
        _hgx_rails_off_socket,
        lambda: _gpu_scenario(8),
        NodeExpectation(nics=8, nic_rate_gbps=400, nvme=2, cpus=224),
        224,
        {"fabric": "warn", "health": "pass", "host": "pass", "burnin": "pass"},
        [
            Variant("an off-socket rail down", port_down("mlx5_1"), "fabric", "mlx5_1:1"),
            Variant("a rail gone from the bus", hca_gone("mlx5_6"), "fabric", "7 ACTIVE"),
            Variant("an off-socket rail at half rate", rate("mlx5_3", HDR), "fabric", "7 ACTIVE"),
        ],
    ),
    # issue #50 §7: a node without NUMA is not faulted for it
    Shape(
        "single-socket-2gpu-numa-unknown",
        _single_socket_without_numa,
        lambda: _gpu_scenario(2),
        NodeExpectation(nics=1, nic_rate_gbps=400, cpus=64, min_cpu_mhz=3000),
        64,
        {"fabric": "pass", "health": "pass", "host": "pass", "burnin": "pass"},
        [Variant("its one rail down", port_down("mlx5_0"), "fabric", "mlx5_0:1")],
    ),
    # Gen5 cards in a Gen4 server, as NVIDIA's own MLPerf system of 8 H100 PCIe on EPYC 7742s
    # (mlcommons/inference_results_v3.1 closed/NVIDIA/systems/H100-PCIe-80GBx8_TRT.json: "PCIe
    # Gen4 x16"): built so, not broken; health says the slot limits the card, nothing fails
    Shape(
        "gen4-server-2x-h100-pcie",
        _single_socket,
        lambda: _gpu_scenario(
            2,
            name="NVIDIA H100 PCIe",
            pci_device_id=0x233110DE,
            nvlink=[],
            fabric={"state": 0},
            pcie={"gen": 4, "gen_max_gpu": 5, "gen_max_system": 4, "width": 16, "width_max": 16},
        ),
        NodeExpectation(nics=1, nic_rate_gbps=400, cpus=64, min_cpu_mhz=3000),
        64,
        {"fabric": "pass", "health": "warn", "host": "pass", "burnin": "pass"},
        [
            Variant("an uncorrectable SRAM ECC error", uncorrectable_ecc(1), "health", "gpu1"),
        ],
    ),
    _captured_slice("h200-one-gpu-slice"),
    _captured_slice("h100-one-gpu-slice"),
]
