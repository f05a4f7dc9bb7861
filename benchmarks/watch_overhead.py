"""What `gpuaccept watch` costs a node (issue #54 §1: under 1% of a core at a 10 s interval, under
100 MB), measured on the project's stand-ins.

Each configuration runs `python -m gpuaccept watch` as a process of its own against fake NVML
(tests/fake_nvml.py playing --gpus healthy H100 SXM boards with 18 NVLinks each) and a saved
kernel log of --log-lines lines (a few XIDs among them, as a node that has seen some), recording
into a temporary SQLite history, with its metrics scraped every 15 s as a Prometheus server
would. After a warm-up of two polls, it reads the process's CPU time (/proc/PID/stat, user +
system, every thread's) over --seconds and its resident memory (VmRSS now, VmHWM its peak). The
configurations run at the same time: CPU time is the process's own, whatever else the cores do.
The node's sysfs is tests/fabric_tree.py's HGX H100 tree (eight InfiniBand HCAs, each port's
error counters read at every poll), or none with --hcas 0.

NVML's event watcher is measured on and off: the real nvmlEventSetWait blocks in the driver,
while the stand-in's wait is a Python loop that wakes every 20 ms, so "events on" here is an upper
bound of what the real watcher costs.

Run:  python benchmarks/watch_overhead.py [--seconds 180] [--intervals 10 1] [--gpus 8] [--hcas 8]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.checks.conftest import h100_sxm  # noqa: E402
from tests.fabric_tree import hgx_tree  # noqa: E402

TICKS = os.sysconf("SC_CLK_TCK")


@dataclass
class Watch:
    name: str
    interval: float
    process: subprocess.Popen[str]
    url: str = ""
    cpu_start: float = 0.0
    wall_start: float = 0.0


def kernel_log(lines: int) -> str:
    now = time.time()
    out = []
    for number in range(lines):
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(now - 86400 + number))
        if number % 1000 == 999:  # an XID 13 now and then: a warning-level row of the table
            out.append(f"{stamp},000000+00:00 NVRM: Xid (PCI:0000:18:00): 13, pid=1, Graphics")
        else:
            out.append(f"{stamp},000000+00:00 usb 1-1: new high-speed USB device number {number}")
    return "\n".join(out) + "\n"


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS  # utime, stime


def memory_mb(pid: int) -> tuple[float, float]:
    found = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            found[key] = int(value.split()[0]) / 1024
    return found["VmRSS"], found["VmHWM"]


def start(name: str, interval: float, events: bool, work: Path) -> Watch:
    env = {
        **os.environ,
        "GPUACCEPT_SYSFS_ROOT": str(work / "sysfs"),
        "GPUACCEPT_NVML_MODULE": "tests.fake_nvml",
        "FAKE_NVML_SCENARIO": str(work / "scenario.json"),
        "GPUACCEPT_KERNEL_LOG": str(work / "kern.log"),
        "GPUACCEPT_ACT_STATE": str(work / f"{name}-act.json"),
        "PYTHONPATH": str(REPO),
    }
    command = [sys.executable, "-m", "gpuaccept", "watch", "--interval", str(interval)]
    command += ["--metrics-port", "0", "--history", str(work / f"{name}.sqlite")]
    command += ["--nvml-events" if events else "--no-nvml-events"]
    process = subprocess.Popen(
        command, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True
    )
    return Watch(name, interval, process)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=180.0)
    parser.add_argument("--intervals", type=float, nargs="+", default=[10.0, 1.0])
    parser.add_argument("--gpus", type=int, default=8)
    parser.add_argument("--log-lines", type=int, default=5000)
    parser.add_argument("--hcas", type=int, choices=(0, 8), default=8)
    options = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        work = Path(scratch)
        scenario = {"gpus": [h100_sxm(i) for i in range(options.gpus)]}
        (work / "scenario.json").write_text(json.dumps(scenario))
        (work / "kern.log").write_text(kernel_log(options.log_lines))
        if options.hcas:
            hgx_tree(work / "sysfs")
        else:
            (work / "sysfs" / "sys").mkdir(parents=True)
        watches = [
            start(f"{interval:g}s-events-{'on' if events else 'off'}", interval, events, work)
            for interval in options.intervals
            for events in (False, True)
        ]
        try:
            for watch in watches:
                assert watch.process.stdout is not None
                line = watch.process.stdout.readline()
                watch.url = line.split("metrics on ", 1)[1].strip()
            time.sleep(max(2 * max(options.intervals), 5.0))  # imports done, two polls made
            for watch in watches:
                watch.cpu_start = cpu_seconds(watch.process.pid)
                watch.wall_start = time.monotonic()
            end = time.monotonic() + options.seconds
            while time.monotonic() < end:
                for watch in watches:
                    urllib.request.urlopen(watch.url, timeout=10).read()
                time.sleep(min(15.0, max(0.0, end - time.monotonic())))
            print(
                f"{options.gpus} fake GPUs, {options.hcas} InfiniBand HCAs, "
                f"{options.log_lines} kernel-log lines, "
                f"{options.seconds:g} s measured after the warm-up, scraped every 15 s"
            )
            print(f"{'configuration':<22} {'CPU % of a core':>16} {'RSS MB':>8} {'peak MB':>8}")
            for watch in watches:
                pid = watch.process.pid
                used = cpu_seconds(pid) - watch.cpu_start
                wall = time.monotonic() - watch.wall_start
                rss, peak = memory_mb(pid)
                print(f"{watch.name:<22} {100 * used / wall:>16.3f} {rss:>8.1f} {peak:>8.1f}")
        finally:
            for watch in watches:
                watch.process.terminate()
                watch.process.wait(timeout=30)


if __name__ == "__main__":
    main()
