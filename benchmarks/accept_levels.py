"""Time `gpuaccept accept` per level and split the wall time into the checks' own work and ours.

Targets (issue #13): on one H100, --level quick <= 15 s and standard <= 60 s; on the 2-core CPU
machine, --level quick --device cpu <= 12 s. References measured in the same run:
- a bare start-up: a fresh Python that imports torch (and, on a GPU, makes a CUDA context), the
  floor any tool that runs PyTorch pays once;
- the checks' own time, summed from the report (each check's duration as the suite measured it).
Wall time minus the checks' time is the harness: start-up, worker boot, environment capture.

Run: python benchmarks/accept_levels.py [--device cpu|cuda] [--levels quick,standard]
     [--repeats 3] [--out docs/results/NAME]   (writes NAME.json and NAME.md)
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

TARGETS_SECONDS = {("cuda", "quick"): 15.0, ("cuda", "standard"): 60.0, ("cpu", "quick"): 12.0}


def bare_startup_seconds(device: str, repeats: int) -> float:
    code = "import torch\n"
    if device == "cuda":
        code += "torch.empty(1, device='cuda').add_(1); torch.cuda.synchronize()\n"
    samples = []
    for _ in range(repeats):
        started = time.perf_counter()
        subprocess.run([sys.executable, "-c", code], check=True, capture_output=True)
        samples.append(time.perf_counter() - started)
    return statistics.median(samples)


def one_accept(device: str, level: str) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as scratch:
        command = [sys.executable, "-m", "gpuaccept", "accept", "--level", level]
        command += ["--device", device, "--no-history", "--report-dir", scratch]
        started = time.perf_counter()
        done = subprocess.run(command, capture_output=True, text=True, check=False)
        wall = time.perf_counter() - started
        reports = list(Path(scratch).glob("*.json"))
        if done.returncode != 0 or len(reports) != 1:
            sys.exit(
                f"accept --level {level} exited {done.returncode}:\n{done.stdout}{done.stderr}"
            )
        report = json.loads(reports[0].read_text())
    checks = {c["name"]: c["duration_seconds"] for c in report["checks"]}
    return {"wall_seconds": wall, "checks_seconds": sum(checks.values()), "per_check": checks}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    parser.add_argument("--levels", default="quick,standard")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", type=Path, help="write OUT.json and OUT.md")
    args = parser.parse_args()

    bare = bare_startup_seconds(args.device, args.repeats)
    context = " + CUDA context" if args.device == "cuda" else ""
    print(f"bare start-up (python + import torch{context}): median {bare:.2f} s")
    rows = []
    for level in args.levels.split(","):
        runs = [one_accept(args.device, level) for _ in range(args.repeats)]
        wall = statistics.median(r["wall_seconds"] for r in runs)
        work = statistics.median(r["checks_seconds"] for r in runs)
        target = TARGETS_SECONDS.get((args.device, level))
        verdict = (
            "" if target is None else ("within" if wall <= target else "OVER") + f" {target:g} s"
        )
        row = {
            "level": level,
            "device": args.device,
            "wall_seconds_median": wall,
            "wall_seconds": [r["wall_seconds"] for r in runs],
            "checks_seconds_median": work,
            "harness_seconds_median": wall - work,
            "bare_startup_seconds": bare,
            "target_seconds": target,
            "per_check_seconds_last_run": runs[-1]["per_check"],
        }
        rows.append(row)
        each = ", ".join(f"{seconds:.2f}" for seconds in row["wall_seconds"])
        harness = wall - work
        print(
            f"accept --level {level:<8} --device {args.device}: wall median {wall:6.2f} s "
            f"(runs {each}); checks {work:6.2f} s, harness {harness:5.2f} s = "
            f"{harness / bare:4.1f}x a bare start-up  {verdict}"
        )
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.with_suffix(".json").write_text(json.dumps(rows, indent=2) + "\n")
        lines = [
            f"# accept levels, --device {args.device}",
            "",
            f"Bare start-up (fresh Python importing torch{context}): {bare:.2f} s "
            f"(median of {args.repeats}).",
            "",
            "| level | wall median (s) | runs (s) | checks (s) | harness (s) | target (s) |",
            "|---|---|---|---|---|---|",
        ]
        for row in rows:
            lines.append(
                f"| {row['level']} | {row['wall_seconds_median']:.2f} | "
                f"{', '.join(f'{w:.2f}' for w in row['wall_seconds'])} | "
                f"{row['checks_seconds_median']:.2f} | {row['harness_seconds_median']:.2f} | "
                f"{row['target_seconds'] if row['target_seconds'] is not None else '-'} |"
            )
        args.out.with_suffix(".md").write_text("\n".join(lines) + "\n")
        print(f"wrote {args.out.with_suffix('.json')} and {args.out.with_suffix('.md')}")


if __name__ == "__main__":
    main()
