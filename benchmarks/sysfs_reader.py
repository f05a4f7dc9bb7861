"""The bounded sysfs reader against a plain read, on a node of many ports (issue #50 §7).

`probe.sysfs` reads every attribute under bounds (a regular file, a page, READ_SECONDS). It used
to start a thread per read (about 14 us each: 1.4 s for the 100,140 reads of 20,008 ports); a
probe now reads in one watched thread, each read a plain read stamped with its path and start
(`probe.sysfs.watched`). This script builds a sysfs tree of --ports InfiniBand ports (each
with its PortCounters and four Q counters, GPUs and NUMA nodes beside them, as
tests/fabric_tree.py lays one HCA out) in a temporary directory, then times what the fabric
checks read, `read_inventory` and `read_port_counters`, three ways in the same run, interleaved:

- plain: every attribute read with os.open/os.read/os.close, no bound, no thread (the floor);
- bounded: the reader as shipped (one watched thread per probe);
- thread per read: the reader as it was before (each read in a thread of its own).

Prints the best of --repeats of each, on the process's CPU time (every thread's; other work on
shared cores does not count against it) and on wall time, and the ratios against plain. The
tree lives in the page cache (tmpfs or a warm disk), where a read costs the least, so the
reader's overhead is at its largest share here: on a real /sys, each attribute's show()
function adds its own cost (a PortCounter is a MAD query to the HCA's firmware).

Run:  python benchmarks/sysfs_reader.py [--ports 512] [--repeats 7]
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from unittest import mock

from gpuaccept.probe import fabric, sysfs


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text + "\n")


def build_tree(root: Path, ports: int) -> None:
    """`ports` single-port HCAs, one GPU per eight of them, on two NUMA nodes."""
    for index in range(ports):
        numa = index * 2 // ports
        bus = f"{index // 256:04x}:{index % 256:02x}"
        switch = root / "sys" / "devices" / f"pci{bus[:4]}:00" / f"{bus[:4]}:00:01.0"
        hca = switch / f"{bus}:00.1"
        _write(hca / "numa_node", str(numa))
        _write(hca / "vendor", "0x15b3")
        _write(hca / "class", "0x020700")
        if index % 8 == 0:
            gpu = switch / f"{bus}:00.0"
            _write(gpu / "numa_node", str(numa))
            _write(gpu / "vendor", "0x10de")
            _write(gpu / "class", "0x030200")
            (root / "sys" / "bus" / "pci" / "devices").mkdir(parents=True, exist_ok=True)
            (root / "sys" / "bus" / "pci" / "devices" / gpu.name).symlink_to(gpu)
        ib = root / "sys" / "class" / "infiniband" / f"mlx5_{index}"
        ib.mkdir(parents=True)
        (ib / "device").symlink_to(hca)
        _write(ib / "fw_ver", "28.39.1002")
        port = ib / "ports" / "1"
        _write(port / "state", "4: ACTIVE")
        _write(port / "phys_state", "5: LinkUp")
        _write(port / "rate", "400 Gb/sec (4X NDR)")
        _write(port / "link_layer", "InfiniBand")
        _write(port / "pkeys" / "0", "0xffff")
        _write(port / "gid_attrs" / "ndevs" / "0", f"ib{index}")
        for counter in fabric.ERROR_COUNTERS:
            _write(port / "counters" / counter, "0")
        for counter in list(fabric.Q_COUNTERS)[:4]:
            _write(port / "hw_counters" / counter, "0")
    for node in range(2):
        _write(root / "sys" / "devices" / "system" / "node" / f"node{node}" / "cpulist", "0-63")


def _plain_read(path: Path) -> str | None:
    """A read and nothing else: no bound on size, time or file type."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        return os.read(fd, 65536).decode(errors="replace").strip()
    except OSError:
        return None
    finally:
        os.close(fd)


@contextmanager
def _mode(mode: str) -> Iterator[None]:
    if mode == "bounded":
        yield
        return
    if mode == "plain":
        patches = [
            mock.patch.object(sysfs, "read_attribute", _plain_read),
            mock.patch.object(fabric, "read_attribute", _plain_read),
            mock.patch.object(fabric, "watched", lambda fn: fn()),
        ]
    else:  # a thread per read: the reader before the watched probe
        patches = [mock.patch.object(fabric, "watched", lambda fn: fn())]
    for patch in patches:
        patch.start()
    try:
        yield
    finally:
        for patch in patches:
            patch.stop()


def _probe(root: Path) -> int:
    inventory = fabric.read_inventory(root)
    counters = fabric.read_port_counters(root)
    return len(inventory.ports) + len(counters)


def _timed(fn: Callable[[], int]) -> tuple[float, float, int]:
    cpu, wall = time.process_time(), time.perf_counter()
    found = fn()
    return time.process_time() - cpu, time.perf_counter() - wall, found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--ports", type=int, default=512)
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    modes = ("plain", "bounded", "thread per read")
    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch)
        build_tree(root, args.ports)
        reads = 0
        with _mode("plain"), mock.patch.object(fabric, "read_attribute") as counted:
            counted.side_effect = _plain_read
            with mock.patch.object(sysfs, "read_attribute", counted):
                _probe(root)
            reads = counted.call_count
        best: dict[str, tuple[float, float]] = {m: (float("inf"), float("inf")) for m in modes}
        for _ in range(args.repeats):
            for mode in modes:
                with _mode(mode):
                    cpu, wall, found = _timed(lambda: _probe(root))
                assert found == 2 * args.ports, (mode, found)
                best[mode] = (min(best[mode][0], cpu), min(best[mode][1], wall))
        print(f"{args.ports} ports, {reads} attribute reads per probe pair, best of {args.repeats}")
        plain_cpu, plain_wall = best["plain"]
        for mode in modes:
            cpu, wall = best[mode]
            print(
                f"  {mode:16s} cpu {cpu * 1e3:8.2f} ms ({cpu / plain_cpu:5.3f} x plain)   "
                f"wall {wall * 1e3:8.2f} ms ({wall / plain_wall:5.3f} x plain)   "
                f"{wall / reads * 1e6:6.2f} us/read"
            )


if __name__ == "__main__":
    main()
