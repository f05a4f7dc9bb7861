"""Capture this node's shape for the test corpus (tests/shapes/): the sysfs attributes gpuaccept's
fabric, network, host and health readers look at, and what NVML answers to the calls
tests/fake_nvml.py stands in for, as one JSON file.

    python3 scripts/capture_node_shape.py --name azure-nd-h200-v5 --out shape.json

No addresses, serial numbers or host names are kept (GUIDs, MACs, UUIDs are replaced by stable
stand-ins), so a capture can be shared. Reads are bounded: regular files only, one page each,
and the whole capture stops after --budget seconds, saying so in the file.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import stat
import sys
import time
from pathlib import Path
from typing import Any

PAGE = 4096
# The attributes gpuaccept's readers look at (probe/fabric.py ERROR_COUNTERS, Q_COUNTERS), named
# again here: the script runs on the node to capture, where gpuaccept need not be installed.
IB_PORT_ATTRS = ("state", "phys_state", "rate", "link_layer")
IB_COUNTERS = (
    "symbol_error",
    "link_error_recovery",
    "link_downed",
    "port_rcv_errors",
    "port_rcv_remote_physical_errors",
    "port_xmit_discards",
    "local_link_integrity_errors",
    "excessive_buffer_overrun_errors",
)
IB_Q_COUNTERS = (
    "out_of_buffer",
    "out_of_sequence",
    "packet_seq_err",
    "implied_nak_seq_err",
    "local_ack_timeout_err",
    "rnr_nak_retry_err",
    "req_transport_retries_exceeded",
)
PCI_ATTRS = ("vendor", "device", "class", "numa_node", "local_cpulist")
NET_ATTRS = ("operstate", "speed", "type")
CPU_FREQ = ("scaling_max_freq", "cpuinfo_max_freq", "scaling_governor")


class Capture:
    def __init__(self, budget: float, base: Path = Path("/")) -> None:
        # paths are kept relative to the directory holding sys/ ("sys/class/..."), read from
        # any tree: a real /sys or a test's
        self.bases = (base, base.resolve())
        self.files: dict[str, str] = {}
        self.links: dict[str, str] = {}
        self.dirs: set[str] = set()
        self.unread: dict[str, str] = {}
        self.deadline = time.monotonic() + budget
        self.cut = False

    def _rel(self, path: Path) -> str:
        for base in self.bases:
            if path.is_relative_to(base):
                return str(path.relative_to(base))
        return str(path).lstrip("/")

    def file(self, path: Path) -> None:
        if time.monotonic() > self.deadline:
            self.cut = True
            return
        try:
            info = os.lstat(path)
        except OSError:
            return
        if not stat.S_ISREG(info.st_mode):
            self.unread[self._rel(path)] = "not a regular file"
            return
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
            try:
                data = os.read(fd, PAGE)
            finally:
                os.close(fd)
        except OSError as exc:
            self.unread[self._rel(path)] = exc.strerror or type(exc).__name__
            return
        self.files[self._rel(path)] = data.decode("utf-8", "replace").rstrip("\n")

    def link(self, path: Path) -> Path | None:
        """Record a symlink as it is written; return what it resolves to."""
        if path.is_symlink():
            self.links[self._rel(path)] = os.readlink(path)
        try:
            return path.resolve(strict=True)
        except (OSError, RuntimeError):  # RuntimeError: a symlink loop (Python 3.11)
            self.unread[self._rel(path)] = "does not resolve"
            return None

    def directory(self, path: Path) -> None:
        self.dirs.add(self._rel(path))

    def pci_chain(self, device: Path) -> None:
        """The device and the PCI functions above it (their numa_node and class)."""
        node = device
        while re.fullmatch(r"[0-9a-f]{4,8}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]", node.name):
            for attr in PCI_ATTRS:
                self.file(node / attr)
            node = node.parent
        self.directory(node)


def _entries(path: Path) -> list[Path]:
    try:
        return sorted(path.iterdir())
    except OSError:
        return []


def capture_sysfs(cap: Capture, sys_root: Path) -> None:
    for dev in _entries(sys_root / "class" / "infiniband"):
        real = cap.link(dev)
        if real is None:
            continue
        pci = cap.link(dev / "device")
        if pci is not None:
            cap.pci_chain(pci)
        cap.file(dev / "fw_ver")
        cap.file(dev / "node_type")
        for port in _entries(dev / "ports"):
            cap.directory(port)
            for attr in IB_PORT_ATTRS:
                cap.file(port / attr)
            for name in IB_COUNTERS:
                cap.file(port / "counters" / name)
            for name in IB_Q_COUNTERS:
                cap.file(port / "hw_counters" / name)
            for index in range(4):
                cap.file(port / "pkeys" / str(index))
            cap.file(port / "gid_attrs" / "ndevs" / "0")
    for dev in _entries(sys_root / "class" / "net"):
        if cap.link(dev) is None:
            continue
        cap.directory(dev)
        for attr in NET_ATTRS:
            cap.file(dev / attr)
        pci = cap.link(dev / "device") if (dev / "device").exists() else None
        if pci is not None:
            cap.pci_chain(pci)
    for dev in _entries(sys_root / "class" / "nvme"):
        if cap.link(dev) is None:
            continue
        cap.file(dev / "model")
        pci = cap.link(dev / "device") if (dev / "device").exists() else None
        if pci is not None:
            cap.pci_chain(pci)
    for dev in _entries(sys_root / "bus" / "pci" / "devices"):
        real = cap.link(dev)
        if real is not None:
            cap.pci_chain(real)
    for node in _entries(sys_root / "devices" / "system" / "node"):
        if re.fullmatch(r"node\d+", node.name):
            cap.file(node / "cpulist")
    for cpu in _entries(sys_root / "devices" / "system" / "cpu"):
        if re.fullmatch(r"cpu\d+", cpu.name):
            for name in CPU_FREQ:
                cap.file(cpu / "cpufreq" / name)
    for module in ("nvidia_peermem", "nvidia_fs", "ib_core", "mlx5_core", "efa"):
        if (sys_root / "module" / module).is_dir():
            cap.directory(sys_root / "module" / module)


def _anonymise(shape: dict[str, Any]) -> None:
    """GUIDs, MACs and UUIDs out: a stable stand-in per distinct value."""
    seen: dict[str, str] = {}
    pattern = re.compile(
        r"GPU-[0-9a-f-]{36}|[0-9a-f]{4}(?::[0-9a-f]{4}){3}|(?:[0-9a-f]{2}:){5}[0-9a-f]{2}", re.I
    )

    def swap(match: re.Match[str]) -> str:
        return seen.setdefault(match.group(0), f"<id{len(seen)}>")

    for key, value in list(shape["files"].items()):
        shape["files"][key] = pattern.sub(swap, value)


def capture_nvml() -> dict[str, Any]:
    """NVML's answers to the calls tests/fake_nvml.py models, in its scenario format."""
    try:
        import pynvml
    except ImportError as exc:
        return {"unavailable": f"pynvml: {exc}"}
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError as exc:
        return {"unavailable": f"nvmlInit: {exc}"}

    def ask(call: Any, *args: Any) -> Any:
        try:
            return call(*args)
        except pynvml.NVMLError as exc:
            return {"nvml_error": str(exc)}

    scenario: dict[str, Any] = {
        "init": "ok",
        "driver": ask(pynvml.nvmlSystemGetDriverVersion),
        "cuda_driver": ask(pynvml.nvmlSystemGetCudaDriverVersion),
        "gpus": [],
    }
    for index in range(pynvml.nvmlDeviceGetCount()):
        handle = pynvml.nvmlDeviceGetHandleByIndex(index)
        pci = ask(pynvml.nvmlDeviceGetPciInfo, handle)
        gpu: dict[str, Any] = {
            "uuid": f"GPU-{index:08d}-0000-0000-0000-000000000000",
            "name": ask(pynvml.nvmlDeviceGetName, handle),
            "pci_bus_id": getattr(pci, "busId", None),
            "pci_device_id": getattr(pci, "pciDeviceId", None),
            "persistence": ask(pynvml.nvmlDeviceGetPersistenceMode, handle),
            "compute_mode": ask(pynvml.nvmlDeviceGetComputeMode, handle),
            "mig_mode": ask(pynvml.nvmlDeviceGetMigMode, handle),
            "memory_bytes": getattr(ask(pynvml.nvmlDeviceGetMemoryInfo, handle), "total", None),
            "power_limit_mw": ask(pynvml.nvmlDeviceGetEnforcedPowerLimit, handle),
            "sm_clock_max_mhz": ask(pynvml.nvmlDeviceGetMaxClockInfo, handle, 1),
            "pcie": {
                "gen": ask(pynvml.nvmlDeviceGetCurrPcieLinkGeneration, handle),
                "gen_max_gpu": ask(pynvml.nvmlDeviceGetGpuMaxPcieLinkGeneration, handle),
                "gen_max_system": ask(pynvml.nvmlDeviceGetMaxPcieLinkGeneration, handle),
                "width": ask(pynvml.nvmlDeviceGetCurrPcieLinkWidth, handle),
                "width_max": ask(pynvml.nvmlDeviceGetMaxPcieLinkWidth, handle),
            },
            "remapped_rows": ask(pynvml.nvmlDeviceGetRemappedRows, handle),
            "nvlink": [],
        }
        for link in range(18):
            state = ask(pynvml.nvmlDeviceGetNvLinkState, handle, link)
            entry: dict[str, Any] = {"state": state}
            if state == 1:
                entry["version"] = ask(pynvml.nvmlDeviceGetNvLinkVersion, handle, link)
                entry["crc"] = ask(pynvml.nvmlDeviceGetNvLinkErrorCounter, handle, link, 2)
                entry["replay"] = ask(pynvml.nvmlDeviceGetNvLinkErrorCounter, handle, link, 0)
                entry["recovery"] = ask(pynvml.nvmlDeviceGetNvLinkErrorCounter, handle, link, 1)
            gpu["nvlink"].append(entry)
        try:
            info = pynvml.c_nvmlGpuFabricInfo_t()
            pynvml.nvmlDeviceGetGpuFabricInfo(handle, pynvml.byref(info))
            gpu["fabric"] = {"state": int(info.state), "status": int(info.status)}
        except (pynvml.NVMLError, AttributeError) as exc:
            gpu["fabric"] = {"error": str(exc)}
        scenario["gpus"].append(gpu)
    pynvml.nvmlShutdown()
    return scenario


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--name", required=True, help="the shape's name, e.g. azure-nd-h200-v5")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--sys", type=Path, default=Path("/sys"), help="sysfs to read")
    parser.add_argument("--budget", type=float, default=60.0, help="seconds for the sysfs walk")
    args = parser.parse_args()
    if not (args.sys / "class").is_dir():
        parser.error(f"--sys {args.sys}: not a sysfs tree (no class/ directory)")
    cap = Capture(args.budget, args.sys.parent)
    capture_sysfs(cap, args.sys)
    shape: dict[str, Any] = {
        "name": args.name,
        "captured": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "cut_by_budget": cap.cut,
        "files": dict(sorted(cap.files.items())),
        "links": dict(sorted(cap.links.items())),
        "dirs": sorted(cap.dirs),
        "unread": cap.unread,
        "cpu_count": os.cpu_count(),
        "nvml": capture_nvml(),
    }
    _anonymise(shape)
    args.out.write_text(json.dumps(shape, indent=1, default=str) + "\n")
    print(
        f"{args.out}: {len(cap.files)} attributes, {len(cap.links)} links"
        + (" (cut by --budget)" if cap.cut else ""),
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
