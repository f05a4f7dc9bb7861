"""scripts/capture_node_shape.py, the tool that adds a real node to the shape corpus: what it
captures rebuilds a tree the fabric reader reads as the original, and a hostile tree (a FIFO, a
link to /dev/zero, a symlink loop) is captured in bounded time with each oddity said."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from gpuaccept.probe.fabric import read_inventory
from tests.fabric_tree import hgx_tree, port_dir
from tests.node_shapes import Tree, captured

SCRIPT = Path(__file__).parents[1] / "scripts" / "capture_node_shape.py"


def _capture(sys_dir: Path, out: Path, *more: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            sys.executable,
            str(SCRIPT),
            "--name",
            "t",
            "--out",
            str(out),
            "--sys",
            str(sys_dir),
            *more,
        ],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONPATH": ""},
    )


def test_a_captured_tree_rebuilds_into_the_node_the_reader_saw(tmp_path: Path) -> None:
    original = hgx_tree(tmp_path / "node")
    done = _capture(original / "sys", tmp_path / "shape.json")
    assert done.returncode == 0, done.stderr
    build, nvml = captured(tmp_path / "shape.json")
    rebuilt = Tree(tmp_path / "again")
    build(rebuilt)
    seen, again = read_inventory(original), read_inventory(rebuilt.root)
    assert again.ports == seen.ports  # state, rate, layer, PKeys, firmware, PCI place
    assert again.gpus == seen.gpus
    assert again.numa_cpus == seen.numa_cpus
    assert [(i.name, i.speed_mbps, i.place) for i in again.interfaces] == [
        (i.name, i.speed_mbps, i.place) for i in seen.interfaces
    ]
    assert nvml() == {"gpus": []}  # no NVML here: said in the file, no GPU invented


def test_a_hostile_tree_is_captured_with_every_oddity_said(tmp_path: Path) -> None:
    root = hgx_tree(tmp_path / "node")
    fifo = port_dir(root, 0) / "rate"
    fifo.unlink()
    os.mkfifo(fifo)
    zero = port_dir(root, 1) / "state"
    zero.unlink()
    zero.symlink_to("/dev/zero")
    loop = root / "sys" / "class" / "infiniband" / "mlx5_loop"
    loop.symlink_to("mlx5_loop")
    done = _capture(root / "sys", tmp_path / "shape.json", "--budget", "20")
    assert done.returncode == 0, done.stderr
    shape = json.loads((tmp_path / "shape.json").read_text())
    unread = shape["unread"]
    assert unread["sys/class/infiniband/mlx5_0/ports/1/rate"] == "not a regular file"
    assert unread["sys/class/infiniband/mlx5_1/ports/1/state"] == "not a regular file"
    assert unread["sys/class/infiniband/mlx5_loop"] == "does not resolve"
    assert "sys/class/infiniband/mlx5_2/ports/1/rate" in shape["files"]


def test_a_directory_that_is_not_sysfs_is_refused_in_one_line(tmp_path: Path) -> None:
    done = _capture(tmp_path, tmp_path / "shape.json")
    assert done.returncode == 2
    assert "not a sysfs tree" in done.stderr.strip().splitlines()[-1]
    assert not (tmp_path / "shape.json").exists()
