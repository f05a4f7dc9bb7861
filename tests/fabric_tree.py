"""A sysfs tree of an HGX H100 node, laid out as the kernel documents it, for the fabric checks:
two NUMA nodes, eight GPUs each behind a PCIe switch shared with one InfiniBand HCA (NDR,
400 Gb/s), two Ethernet NICs, two NVMe drives, nvidia_peermem loaded.

Documentation/ABI/stable/sysfs-class-infiniband (state "4: ACTIVE", phys_state "5: LinkUp",
rate "400 Gb/sec (4X NDR)", link_layer, counters/*, pkeys/<n>), Documentation/ABI/testing/
sysfs-bus-pci (numa_node, vendor, class), /sys/class/net, /sys/class/nvme,
/sys/devices/system/node. Class devices are symlinks to their PCI device, as in a real /sys.
"""

from __future__ import annotations

import os
from pathlib import Path

from gpuaccept.probe.fabric import ERROR_COUNTERS

GPUS = 8
NDR = "400 Gb/sec (4X NDR)"


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text + "\n")


def _link(link: Path, target: Path) -> None:
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(os.path.relpath(target, link.parent))


def _endpoint(root: Path, numa: int, switch: int, slot: int, bus: int) -> Path:
    """A PCI endpoint under root complex `numa`, behind PCIe switch `switch`."""
    complex_ = root / "sys" / "devices" / f"pci0000:{numa * 0x80:02x}"
    port = complex_ / f"0000:{numa * 0x80:02x}:{switch + 1:02x}.0"
    upstream = port / f"0000:{switch * 0x10 + 0x10:02x}:00.0"
    downstream = upstream / f"0000:{switch * 0x10 + 0x11:02x}:{slot:02x}.0"
    device = downstream / f"0000:{bus:02x}:00.0"
    _write(device / "numa_node", str(numa))
    return device


def _root_port_endpoint(root: Path, numa: int, port: int, bus: int) -> Path:
    """A PCI endpoint straight on root port `port` of root complex `numa` (a CPU-attached slot,
    no PCIe switch above it)."""
    complex_ = root / "sys" / "devices" / f"pci0000:{numa * 0x80:02x}"
    device = complex_ / f"0000:{numa * 0x80:02x}:{port:02x}.0" / f"0000:{bus:02x}:00.0"
    _write(device / "numa_node", str(numa))
    return device


def hgx_tree(root: Path, off_socket: int = 0) -> Path:
    """Build the node under `root`; returns `root` (GPUACCEPT_SYSFS_ROOT). The HCAs of the
    first `off_socket` GPUs sit in CPU-attached slots of the other socket instead of beside
    their GPUs (a node cabled right and slotted wrong)."""
    for gpu in range(GPUS):
        numa, switch = gpu // 4, gpu
        gpu_dev = _endpoint(root, numa, switch, 0, 0x18 + gpu * 0x10)
        _write(gpu_dev / "vendor", "0x10de")
        _write(gpu_dev / "class", "0x030200")
        _link(root / "sys" / "bus" / "pci" / "devices" / gpu_dev.name, gpu_dev)
        hca = (
            _root_port_endpoint(root, 1 - numa, 0x10 + gpu, 0xF4 + gpu)
            if gpu < off_socket
            else _endpoint(root, numa, switch, 1, 0x19 + gpu * 0x10)
        )
        _write(hca / "vendor", "0x15b3")
        _write(hca / "class", "0x020700")
        ib = root / "sys" / "class" / "infiniband" / f"mlx5_{gpu}"
        _link(ib / "device", hca)
        _write(ib / "fw_ver", "28.39.1002")
        port = ib / "ports" / "1"
        _write(port / "state", "4: ACTIVE")
        _write(port / "phys_state", "5: LinkUp")
        _write(port / "rate", NDR)
        _write(port / "link_layer", "InfiniBand")
        _write(port / "pkeys" / "0", "0xffff")
        _write(port / "pkeys" / "1", "0x8001")
        _write(port / "pkeys" / "2", "0x0000")
        for counter in ERROR_COUNTERS:
            _write(port / "counters" / counter, "0")
        _link(root / "sys" / "class" / "net" / f"ibp{gpu}s0" / "device", hca)
        _write(root / "sys" / "class" / "net" / f"ibp{gpu}s0" / "operstate", "up")
    for nic in range(2):
        eth = _endpoint(root, nic, 8 + nic, 0, 0xA0 + nic)
        net = root / "sys" / "class" / "net" / f"eth{nic}"
        _link(net / "device", eth)
        _write(net / "operstate", "up")
        _write(net / "speed", "100000")
    for drive in range(2):
        ssd = _endpoint(root, drive, 10 + drive, 0, 0xC0 + drive)
        _link(root / "sys" / "class" / "nvme" / f"nvme{drive}" / "device", ssd)
        _write(root / "sys" / "class" / "nvme" / f"nvme{drive}" / "model", "SAMSUNG MZWLO3T8HCLS")
    for node in range(2):
        _write(
            root / "sys" / "devices" / "system" / "node" / f"node{node}" / "cpulist",
            f"{node * 56}-{node * 56 + 55},{112 + node * 56}-{112 + node * 56 + 55}",
        )
    (root / "sys" / "module" / "nvidia_peermem").mkdir(parents=True)
    return root


def port_dir(root: Path, hca: int) -> Path:
    return root / "sys" / "class" / "infiniband" / f"mlx5_{hca}" / "ports" / "1"
