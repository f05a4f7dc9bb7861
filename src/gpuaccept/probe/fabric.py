"""What the node's fabric and host look like in sysfs (issue #24): every InfiniBand/RoCE port,
network interface, NVMe controller and GPU with its PCIe path and NUMA node, and the error
counters of each port.

Read, never judged here (`checks.fabric` judges). Everything is read under a root
(`GPUACCEPT_SYSFS_ROOT`, default `/`), so the tests drive the same code over fixture trees laid
out as the kernel documents them:

- Documentation/ABI/stable/sysfs-class-infiniband (torvalds/linux 031616c): per device `fw_ver`;
  per port `state` ("4: ACTIVE"), `phys_state` ("5: LinkUp"), `rate` ("400 Gb/sec (4X NDR)"),
  `link_layer` (InfiniBand or Ethernet), `counters/*`, `pkeys/<n>`, `gid_attrs/ndevs/<n>`.
  drivers/infiniband/core/sysfs.c prints those formats; a counter without a PMA reads
  "N/A (no PMA)" (show_pma_counter, when get_perf_mad fails; read at 0147ebcf through the code
  index), and the PortCounters are 4 to 16 bits wide and stop at their maximum.
- Documentation/ABI/testing/sysfs-bus-pci: `numa_node`, `local_cpulist`, `vendor`, `class`.
- /sys/class/net/<if>/{operstate,speed}, /sys/class/nvme/<ctrl>/model,
  /sys/devices/system/node/node<N>/cpulist, and /sys/module/<name> for loaded modules.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from gpuaccept.probe.sysfs import (
    is_directory,
    list_directory,
    read_attribute,
    read_int,
    sysfs_root,
    watched,
)

# The PortCounters the run judges (Documentation/ABI/stable/sysfs-class-infiniband), with their
# width in bits (drivers/infiniband/core/sysfs.c PORT_PMA_ATTR): a counter at its maximum has
# stopped counting and cannot show growth.
ERROR_COUNTERS = {
    "symbol_error": 16,
    "link_error_recovery": 8,
    "link_downed": 8,
    "port_rcv_errors": 16,
    "port_rcv_remote_physical_errors": 16,
    "port_xmit_discards": 16,
    "local_link_integrity_errors": 4,
    "excessive_buffer_overrun_errors": 4,
}
# The driver's queue (Q) counters, in each port's hw_counters directory (the ABI's hw_counters
# section): retransmissions and drops that the PortCounters do not tell apart, read on every
# port that has them, InfiniBand as well as RoCE (mlx5 keeps them per port whatever its link
# layer). Names from drivers/infiniband/hw/mlx5/counters.c (basic_q_cnts, out_of_seq_q_cnts,
# retrans_q_cnts, extended_err_cnts); meanings from the commits that added them (0ad17a8 "Add
# port protocol stats", b339e0a "Add Qcounters req_transport_retries_exceeded"). They are 32
# bits wide and wrap: mlx5_ib_query_q_counters copies each as `(u64)be32_to_cpu(val)` (the same
# file at torvalds/linux 10d4de4), where the PortCounters stop at their maximum.
Q_COUNTERS = {
    "out_of_buffer": 32,
    "out_of_sequence": 32,
    "packet_seq_err": 32,
    "implied_nak_seq_err": 32,
    "local_ack_timeout_err": 32,
    "rnr_nak_retry_err": 32,
    "req_transport_retries_exceeded": 32,
}
NVIDIA_VENDOR = "0x10de"
_RATE = re.compile(r"\s*(\d+(?:\.\d+)?)\s*Gb/sec")


def _after_colon(text: str | None) -> str | None:
    """'4: ACTIVE' -> 'ACTIVE' (the kernel's state and phys_state format)."""
    if text is None:
        return None
    return text.split(":", 1)[1].strip() if ":" in text else text


# sysfs prints a port's rate per lane as drivers/infiniband/core/sysfs.c rate_show has it: the
# signalling rate for SDR, DDR and QDR (2.5, 5, 10; 8b/10b coded, so 80% of it is data) and 14
# for FDR (14.0625 Gbaud, 64b/66b: 13.64 Gb/s of data); FDR10, EDR, HDR, NDR and XDR print their
# data rate (10, 25, 50, 100, 200). A bandwidth floor is a fraction of the data rate: QDR's "40
# Gb/sec" carries 32.
_DATA_FRACTION = {"SDR": 0.8, "DDR": 0.8, "QDR": 0.8, "FDR": 14.0625 * 64 / 66 / 14}
_SPEED = re.compile(r"\(\s*\d+X\s*([A-Z0-9]+)\s*\)")


def data_rate_gbps(text: str | None) -> float | None:
    """The data rate behind a rate attribute: '40 Gb/sec (4X QDR)' -> 32.0."""
    rate = parse_rate_gbps(text)
    if rate is None:
        return None
    speed = _SPEED.search(text or "")
    return rate * _DATA_FRACTION.get(speed.group(1), 1.0) if speed else rate


def parse_rate_gbps(text: str | None) -> float | None:
    """'400 Gb/sec (4X NDR)' -> 400.0; '2.5 Gb/sec (1X SDR)' -> 2.5; None when unreadable."""
    match = _RATE.match(text or "")
    return float(match.group(1)) if match else None


@dataclass(frozen=True)
class PciPlace:
    """Where a PCI device sits: its address, NUMA node and the bridges above it (root first)."""

    address: str
    numa_node: int | None
    bridges: tuple[str, ...]


def pci_place(device_link: Path) -> PciPlace | None:
    """The PCI place of a class device's `device` link (None when it has no PCI device)."""
    try:
        resolved = device_link.resolve(strict=True)
    except (OSError, RuntimeError):  # RuntimeError: a symlink loop (Python 3.11)
        return None
    parts = [
        p
        for p in resolved.parts
        if re.fullmatch(r"[0-9a-f]{4,8}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]", p)
    ]
    if not parts:
        return None
    numa = read_int(resolved / "numa_node")
    return PciPlace(parts[-1], numa if numa is not None and numa >= 0 else None, tuple(parts[:-1]))


@dataclass(frozen=True)
class IbPort:
    device: str  # mlx5_0
    port: int
    state: str | None  # ACTIVE, DOWN, INIT, ARMED
    phys_state: str | None  # LinkUp, Polling, Disabled
    rate_gbps: float | None
    link_layer: str | None  # InfiniBand or Ethernet (RoCE)
    firmware: str | None
    netdev: str | None  # the RoCE port's interface (gid_attrs/ndevs/0)
    pkeys: tuple[str, ...]
    place: PciPlace | None
    data_rate_gbps: float | None = None  # the rate less its line coding (`data_rate_gbps`)

    @property
    def name(self) -> str:
        return f"{self.device}:{self.port}"

    @property
    def roce(self) -> bool:
        return self.link_layer == "Ethernet"


@dataclass(frozen=True)
class NetInterface:
    name: str
    operstate: str | None
    speed_mbps: int | None  # -1 (unknown) read as None
    place: PciPlace | None


@dataclass(frozen=True)
class NvmeController:
    name: str
    model: str | None
    place: PciPlace | None


@dataclass(frozen=True)
class PciGpu:
    address: str
    place: PciPlace


@dataclass(frozen=True)
class NodeInventory:
    ports: list[IbPort] = field(default_factory=list)
    interfaces: list[NetInterface] = field(default_factory=list)
    nvme: list[NvmeController] = field(default_factory=list)
    gpus: list[PciGpu] = field(default_factory=list)
    numa_cpus: dict[int, str] = field(default_factory=dict)  # node -> cpulist
    peermem_loaded: bool = False


def _pkeys(port_dir: Path) -> tuple[str, ...]:
    """The port's PKey table, without empty entries (0x0000), in index order."""
    names = [p for p in list_directory(port_dir / "pkeys") if p.name.isdigit()]
    keys = (read_int(p, 16) for p in sorted(names, key=lambda p: int(p.name)))
    return tuple(f"0x{k:04x}" for k in keys if k is not None and k & 0x7FFF)


def read_ib_ports(root: Path) -> list[IbPort]:
    base = root / "sys" / "class" / "infiniband"
    ports = []
    for device_dir in list_directory(base):
        place = pci_place(device_dir / "device")
        firmware = read_attribute(device_dir / "fw_ver")
        ports_dir = device_dir / "ports"
        numbers = sorted(int(p.name) for p in list_directory(ports_dir) if p.name.isdigit())
        for number in numbers:
            port_dir = ports_dir / str(number)
            rate = read_attribute(port_dir / "rate")
            ports.append(
                IbPort(
                    device=device_dir.name,
                    port=number,
                    state=_after_colon(read_attribute(port_dir / "state")),
                    phys_state=_after_colon(read_attribute(port_dir / "phys_state")),
                    rate_gbps=parse_rate_gbps(rate),
                    link_layer=read_attribute(port_dir / "link_layer"),
                    firmware=firmware,
                    netdev=read_attribute(port_dir / "gid_attrs" / "ndevs" / "0") or None,
                    pkeys=_pkeys(port_dir),
                    place=place,
                    data_rate_gbps=data_rate_gbps(rate),
                )
            )
    return ports


def read_port_counters(root: Path | None = None) -> dict[str, dict[str, int | None]]:
    """Every port's error counters now ('mlx5_0:1' -> counter -> value; None: not readable):
    the PortCounters, and the Q counters of its hw_counters where the driver exposes them."""
    return watched(lambda: _read_port_counters(root or sysfs_root()))


def _read_port_counters(root: Path) -> dict[str, dict[str, int | None]]:
    base = root / "sys" / "class" / "infiniband"
    found: dict[str, dict[str, int | None]] = {}
    for device_dir in list_directory(base):
        for port_dir in list_directory(device_dir / "ports"):
            counters = {name: read_int(port_dir / "counters" / name) for name in ERROR_COUNTERS}
            if is_directory(port_dir / "hw_counters"):
                counters |= {
                    name: value
                    for name in Q_COUNTERS
                    if (value := read_int(port_dir / "hw_counters" / name)) is not None
                }
            found[f"{device_dir.name}:{port_dir.name}"] = counters
    return found


def read_inventory(root: Path | None = None) -> NodeInventory:
    """The node as sysfs describes it under `root` (default: `sysfs_root()`), read as one
    bounded probe (`probe.sysfs.watched`)."""
    return watched(lambda: _read_inventory(root or sysfs_root()))


def _read_inventory(root: Path) -> NodeInventory:
    net_base = root / "sys" / "class" / "net"
    interfaces = []
    for if_dir in list_directory(net_base):
        speed = read_int(if_dir / "speed")
        interfaces.append(
            NetInterface(
                if_dir.name,
                read_attribute(if_dir / "operstate"),
                speed if speed is not None and speed > 0 else None,
                pci_place(if_dir / "device"),
            )
        )
    nvme_base = root / "sys" / "class" / "nvme"
    nvme = [
        NvmeController(d.name, read_attribute(d / "model"), pci_place(d / "device"))
        for d in list_directory(nvme_base)
    ]
    gpus = []
    pci_base = root / "sys" / "bus" / "pci" / "devices"
    for dev in list_directory(pci_base):
        klass = read_attribute(dev / "class") or ""
        vendor = read_attribute(dev / "vendor")
        if vendor == NVIDIA_VENDOR and klass.startswith(("0x0300", "0x0302")):
            place = pci_place(dev)
            if place is not None:
                gpus.append(PciGpu(place.address, place))
    node_base = root / "sys" / "devices" / "system" / "node"
    numa = {}
    for node in list_directory(node_base):
        number = re.fullmatch(r"node(\d{1,6})", node.name)  # not node9x, not nodeXYZ
        cpus = read_attribute(node / "cpulist") if number else None
        if number and cpus is not None:
            numa[int(number.group(1))] = cpus
    return NodeInventory(
        ports=read_ib_ports(root),
        interfaces=interfaces,
        nvme=nvme,
        gpus=gpus,
        numa_cpus=numa,
        peermem_loaded=is_directory(root / "sys" / "module" / "nvidia_peermem"),
    )
