"""The next GPU run, in one command: every GPU-only check and benchmark, written to docs/results.

Runs, each as its own process with its own time limit (a hung step is killed and recorded, the
session goes on):
  env         the environment capture (`gpuaccept env`)
  pytest-gpu  `pytest -m gpu`: the real CUDA, NVML, NCCL, CUDA-graph and Triton paths
  levels      benchmarks/accept_levels.py: accept quick and standard, wall time vs targets
  mnist       benchmarks/mnist_vs_reference.py: time to 99.0% and images/s vs the seed's loop
  bench-*     every `gpuaccept bench` default (matmul, membw, transfer, collectives, nbody),
              each timed against the 60 s target
  nbody       the fused kernel's measured % of fp32 peak next to the ceiling its compiled
              inner loop allows (`bench nbody --explain`, sm_<capability>)
  full        `gpuaccept accept --level full` (DCGM -r 3 when dcgmi is installed)
and writes OUT.md and OUT.json (default docs/results/DATE-GPU-session) with every step's exit
status, seconds, the figures it printed and the environment capture. Budget: about 25 minutes on
one H100 (the `full` level and DCGM dominate).

Targets it reports against (issue #13): accept quick <= 15 s, standard <= 60 s; MNIST 99.0% in
<= 1.5 s and >= 400k images/s (lenet >= 150k); n-body >= 40% of fp32 peak; each default bench
< 60 s. A target not met is printed as OVER; nothing here changes a verdict.

Run on a GPU node:  python benchmarks/gpu_session.py [--data MNIST_data.tar.gz] [--out PATH]
Its CPU twin (tests/test_gpu_session.py): --device cpu --only env,bench-matmul --out DIR/x
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

BENCHES = ("matmul", "membw", "transfer", "collectives", "nbody")
BENCH_TARGET_SECONDS = 60.0
NBODY_TARGET_FRACTION = 0.40
STEPS = ("env", "pytest-gpu", "levels", "mnist", *(f"bench-{b}" for b in BENCHES), "nbody", "full")


@dataclass
class Step:
    name: str
    command: list[str]
    limit_seconds: float
    exit_code: int | None = None
    seconds: float = 0.0
    timed_out: bool = False
    output_tail: str = ""
    figures: dict[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.exit_code == 0 and not self.timed_out


def run_step(step: Step, env: dict[str, str]) -> Step:
    print(f"[SESSION] {step.name}: {' '.join(step.command)}", flush=True)
    started = time.perf_counter()
    try:
        done = subprocess.run(
            step.command,
            capture_output=True,
            text=True,
            errors="replace",
            timeout=step.limit_seconds,
            env=env,
            check=False,
        )
        step.exit_code = done.returncode
        output = done.stdout + done.stderr
    except subprocess.TimeoutExpired as expired:
        step.timed_out = True
        raw = (expired.stdout or b"") + (expired.stderr or b"")
        output = raw.decode(errors="replace") if isinstance(raw, bytes) else str(raw)
    step.seconds = time.perf_counter() - started
    step.output_tail = output[-4000:]
    state = "timed out" if step.timed_out else f"exit {step.exit_code}"
    print(f"[SESSION] {step.name}: {state} in {step.seconds:.1f} s", flush=True)
    return step


def _gpu_slug(environment: dict[str, Any]) -> str:
    gpus = environment.get("gpus") or []
    name = str(gpus[0].get("name")) if gpus and isinstance(gpus[0], dict) else "cpu"
    return re.sub(r"[^A-Za-z0-9]+", "-", name).strip("-").lower() or "gpu"


def _report_figures(path: Path) -> dict[str, Any]:
    """Every measurement of a JSON report, by check/name/device, and its verdict."""
    if not path.is_file():
        return {}
    report = json.loads(path.read_text())
    figures: dict[str, Any] = {"verdict": report.get("verdict", {}).get("outcome")}
    for check in report.get("checks", []):
        for m in check.get("measurements", []):
            device = "cpu" if m.get("device_index") is None else f"gpu{m['device_index']}"
            figures[f"{check['name']}/{m['name']}/{device}"] = [m["value"], m["unit"]]
    return figures


def _nbody_comparison(bench: Path, explain: str, capability: int | None) -> dict[str, Any]:
    """The measured fp32 % of peak next to the compiled ceiling for this GPU's target."""
    measured = None
    if bench.is_file():
        report = json.loads(bench.read_text())
        for check in report.get("checks", []):
            for row in check.get("details", {}).get("rows", []):
                if row.get("dtype") == "fp32" and row.get("percent_of_peak") is not None:
                    measured = max(measured or 0.0, float(row["percent_of_peak"]))
    target = {80: "sm_80", 90: "sm_90", 100: "sm_100"}.get(capability or 0)
    ceilings = [
        float(match[1])
        for line in explain.splitlines()
        if target and line.split()[:2] == [target, "fp32"]
        for match in [re.search(r"(\d+)%\s*$", line)]
        if match
    ]
    return {
        "measured_percent_of_fp32_peak": measured,
        "target": target,
        "predicted_ceiling_percent": max(ceilings) if ceilings else None,
        "target_percent": NBODY_TARGET_FRACTION * 100,
    }


def plan(args: argparse.Namespace, out: Path) -> list[Step]:
    python = sys.executable
    cli = [python, "-m", "gpuaccept"]
    device = ["--device", args.device]
    steps = {
        "env": Step("env", [*cli, "env", "--output", str(out / "env.json")], 120),
        "pytest-gpu": Step(
            "pytest-gpu", [python, "-m", "pytest", "-m", "gpu", "-q", "-n", "0"], 600
        ),
        "levels": Step(
            "levels",
            [
                python,
                "benchmarks/accept_levels.py",
                *device,
                "--levels",
                "quick,standard",
                "--repeats",
                "1",
                "--out",
                str(out / "accept-levels"),
            ],
            400,
        ),
        "mnist": Step(
            "mnist",
            [
                python,
                "benchmarks/mnist_vs_reference.py",
                *device,
                "--json",
                str(out / "mnist.json"),
                *(["--data", str(args.data)] if args.data else []),
            ],
            600,
        ),
        "nbody": Step("nbody", [*cli, "bench", "nbody", "--explain"], 300),
        "full": Step(
            "full",
            [
                *cli,
                "accept",
                "--level",
                "full",
                *device,
                "--no-history",
                "--report-dir",
                str(out / "full"),
            ],
            1500,
        ),
    }
    for bench in BENCHES:
        steps[f"bench-{bench}"] = Step(
            f"bench-{bench}",
            [
                *cli,
                "bench",
                bench,
                *device,
                "--no-history",
                "--json",
                str(out / f"bench-{bench}.json"),
            ],
            300,
        )
    chosen = args.only.split(",") if args.only else list(STEPS)
    unknown = [name for name in chosen if name not in steps]
    if unknown:
        raise SystemExit(f"--only: unknown step(s) {', '.join(unknown)}; known: {', '.join(STEPS)}")
    return [steps[name] for name in STEPS if name in chosen]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    parser.add_argument("--data", type=Path, help="real MNIST for the mnist step")
    parser.add_argument("--only", help=f"comma-separated steps of: {', '.join(STEPS)}")
    parser.add_argument("--out", type=Path, help="OUT.md/OUT.json (default docs/results/...)")
    args = parser.parse_args()

    day = datetime.now(UTC).strftime("%Y-%m-%d")
    work = Path(os.environ.get("TMPDIR", "/tmp")) / f"gpuaccept-session-{os.getpid()}"
    work.mkdir(parents=True, exist_ok=True)
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, ["src", os.environ.get("PYTHONPATH")])),
    }
    steps = [run_step(step, env) for step in plan(args, work)]
    environment = (
        json.loads((work / "env.json").read_text()) if (work / "env.json").is_file() else {}
    )
    capability = None
    for gpu in environment.get("gpus") or []:
        found = re.fullmatch(r"(\d+)\.(\d+)", str(gpu.get("compute_capability", "")))
        if found:  # "9.0" -> 90, the target `bench nbody --explain` names sm_90
            capability = int(found[1]) * 10 + int(found[2])
            break
    for step in steps:
        if step.name.startswith("bench-"):
            step.figures = _report_figures(work / f"{step.name}.json")
            step.figures["within_60_s"] = step.seconds < BENCH_TARGET_SECONDS
        elif step.name == "full":
            reports = sorted((work / "full").glob("*.json")) if (work / "full").is_dir() else []
            step.figures = _report_figures(reports[-1]) if reports else {}
        elif step.name == "nbody":
            step.figures = _nbody_comparison(
                work / "bench-nbody.json", step.output_tail, capability
            )
        elif step.name == "levels" and (work / "accept-levels.json").is_file():
            step.figures = {"levels": json.loads((work / "accept-levels.json").read_text())}
        elif step.name == "mnist" and (work / "mnist.json").is_file():
            step.figures = json.loads((work / "mnist.json").read_text())
    out = args.out or Path("docs/results") / f"{day}-{_gpu_slug(environment)}-session"
    out.parent.mkdir(parents=True, exist_ok=True)
    record = {
        "date": day,
        "device": args.device,
        "steps": [asdict(step) for step in steps],
        "environment": environment,
    }
    out.with_suffix(".json").write_text(json.dumps(record, indent=2, default=str) + "\n")
    lines = [
        f"# GPU session, {day}: {_gpu_slug(environment)} ({args.device})",
        "",
        "Written by `python benchmarks/gpu_session.py`; every figure below was measured in this "
        "run. The environment capture is in the JSON beside this file.",
        "",
        "| step | result | seconds | figures |",
        "|---|---|---|---|",
    ]
    for step in steps:
        state = "timed out" if step.timed_out else ("ok" if step.ok else f"exit {step.exit_code}")
        shown = json.dumps(step.figures, default=str)
        lines.append(
            f"| {step.name} | {state} | {step.seconds:.1f} | {shown[:400].replace('|', '/')} |"
        )
    out.with_suffix(".md").write_text("\n".join(lines) + "\n")
    print(f"[SESSION] wrote {out.with_suffix('.md')} and {out.with_suffix('.json')}")


if __name__ == "__main__":
    main()
