#!/usr/bin/env python3
"""A small made-up fleet for the fleet page's screenshot (docs/images/fleet-first-screen.png):
48 nodes of 8 GPUs, a run a day for 14 days, the last 4 on an upgraded stack; one node each to
replace, drain, reset and rerun, one whose GPU lags its model, one slower than before, one back
to passing, and the page's first screen shot in headless Chromium. The figures are invented
(CPU-made reports of the kind the tests use), not measured on any GPU.

Usage: benchmarks/fleet_page_demo.py OUT_DIR   (writes OUT_DIR/history.sqlite, OUT_DIR/fleet.html
        and its pages, OUT_DIR/fleet-first-screen.png)
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

OLD = {
    "torch": {"version": "2.12.0+cu128"},
    "cuda": {"runtime": "12.8", "driver_version": "570.86.15"},
}
NEW = {
    "torch": {"version": "2.13.0+cu128"},
    "cuda": {"runtime": "12.8", "driver_version": "580.65.06"},
}
FAILING = {  # node -> (cause code, finding) of its newest accept
    "gpu-a007": ("remap-failure", "gpu5: row remapping failed (8 banks spent)"),
    "gpu-a013": ("ecc-uncorrectable", "gpu2: volatile double-bit ECC errors: 3"),
    "gpu-a021": ("remap-pending", "gpu0: row remapping pending (reset the GPU)"),
    "gpu-a034": ("below-floor", "gpu6 matmul_bf16_tflops 590 TFLOPS below floor 640"),
}


def _report(node: str, day: int, environment: dict[str, Any], **shape: Any) -> Any:
    from tests.run_reports import gpu_report, rejudged

    from gpuaccept.results import CheckResult, Status

    values = [790.0 + (sum(map(ord, node)) * 7 + i * 13) % 20 for i in range(8)]
    if shape.get("lag"):
        values[3] = 612.0
    report = gpu_report(node, values, hours=24.0 * day)
    checks = list(report.checks)
    if shape.get("fail"):
        code, finding = shape["fail"]
        checks.append(
            CheckResult(
                name="health",
                area="HEALTH",
                status=Status.FAIL,
                message=finding,
                details={
                    "findings": [{"status": "fail", "text": finding, "kind": "cause", "code": code}]
                },
            )
        )
    if shape.get("slower"):
        checks.append(
            CheckResult(
                name="history",
                area="HISTORY",
                status=Status.WARN,
                message="compute/matmul_bf16_tflops 11.8% below this node's median of 5 runs",
            )
        )
    return rejudged(report, checks=checks, environment={**report.environment, **environment})


def main() -> int:
    out = Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    history = out / "history.sqlite"
    history.unlink(missing_ok=True)
    from gpuaccept.store.history import History

    nodes = [f"gpu-a{i:03d}" for i in range(1, 49)]
    runs = []
    for day in range(14):
        stack = NEW if day >= 10 else OLD
        for node in nodes:
            newest = day == 13
            shape: dict[str, Any] = {}
            if newest and node in FAILING:
                shape["fail"] = FAILING[node]
            if node == "gpu-a003" and day == 12:  # failed yesterday, passes today
                shape["fail"] = ("ecc-uncorrectable", "gpu1: volatile double-bit ECC errors: 1")
            if node == "gpu-a042" and day >= 12:
                shape["lag"] = True
            if node == "gpu-a040" and newest:
                shape["slower"] = True
            if node == "gpu-a029" and day == 11:  # an upgrade day that failed
                shape["fail"] = (
                    "below-floor",
                    "gpu4 matmul_bf16_tflops 601 TFLOPS below floor 640",
                )
            runs.append((_report(node, day, stack, **shape), "demo"))
    with History.open(history) as store:
        store.append(runs)
    page = out / "fleet.html"
    from gpuaccept.commands.output import Collected
    from gpuaccept.commands.report import ReportRequest, run

    # `gpuaccept report --fleet --history H --html PAGE --since 30h`, called as the CLI does
    run(
        ReportRequest(source=None, html=page, history=str(history), fleet=True, since="30h"),
        Collected(),
    )
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        print("no chromium: the page is written, not shot")
        return 0
    shot = out / "fleet-first-screen.png"
    subprocess.run(
        [
            chromium,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--hide-scrollbars",
            "--virtual-time-budget=5000",
            "--window-size=1280,1100",
            f"--screenshot={shot}",
            page.as_uri(),
        ],
        check=True,
        capture_output=True,
    )
    print(f"{shot}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
