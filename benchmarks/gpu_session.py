"""The next GPU run, in one command: every GPU-only check and benchmark, written to docs/results.

Runs, each as its own process with its own time limit (a hung step is killed and recorded, the
session goes on):
  env         the environment capture (`gpuaccept env`)
  pytest-gpu  `pytest -m gpu`: the real CUDA, NVML, NCCL, CUDA-graph and Triton paths
  levels      benchmarks/accept_levels.py: accept quick and standard, wall time vs targets
  mnist       benchmarks/mnist_vs_reference.py: time to 99.0% and images/s vs the seed's loop
  llm         benchmarks/llm_vs_torchtitan.py: `train llm` 1b, with and without compile, beside
              a plain single-process loop (tokens/s, MFU, goodput, convergence, determinism)
  bench-*     every `gpuaccept bench` default (matmul, membw, transfer, collectives, nbody),
              each timed against the 60 s target
  nbody       the fused kernel's measured % of fp32 peak next to the ceiling its compiled
              inner loop allows (`bench nbody --explain`, sm_<capability>)
  full        `gpuaccept accept --level full` (DCGM -r 3 when dcgmi is installed)
  llm-floor   `gpuaccept train llm` at its GPU default (standard's configuration): the tokens/s
              and MFU a floor for this GPU at that configuration is set from (issue #52 §6;
              tests/test_reference_fractions.py's policy), and the report's configuration
  preflight   `gpuaccept preflight`: its wall time against the 30 s default budget (issue #54 §2)
  watch       `gpuaccept watch --once` on the real NVML: one poll's wall time (issue #54 §1)
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
MIN_STEP_SECONDS = 5.0
STEPS = (
    "env",
    "pytest-gpu",
    "levels",
    "mnist",
    "llm",
    *(f"bench-{b}" for b in BENCHES),
    "nbody",
    "full",
    "llm-floor",
    "preflight",
    "watch",
)
PREFLIGHT_TARGET_SECONDS = 30.0


@dataclass
class Step:
    name: str
    command: list[str]
    limit_seconds: float
    exit_code: int | None = None
    seconds: float = 0.0
    timed_out: bool = False
    not_run: str = ""
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
            # a figure with no device index is the node's (a bench over all its GPUs), not the CPU's
            device = "node" if m.get("device_index") is None else f"gpu{m['device_index']}"
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


def gpu_test_files(root: Path = Path("tests")) -> list[str]:
    """The test modules that hold `gpu` tests. Collecting only them keeps the modules that import
    the CPU-side validators (htcondor2, kubernetes_validate, jsonschema), which a GPU image lacks,
    from failing the step with collection errors of tests it would not run."""
    return sorted(
        str(path)
        for path in root.rglob("test_*.py")
        if "mark.gpu" in path.read_text(encoding="utf-8", errors="replace")
    )


def plan(args: argparse.Namespace, out: Path) -> list[Step]:
    python = sys.executable
    cli = [python, "-m", "gpuaccept"]
    device = ["--device", args.device]
    steps = {
        "env": Step("env", [*cli, "env", "--output", str(out / "env.json")], 120),
        # only the modules with GPU tests are collected (gpu_test_files); one that still fails
        # to import must not stop the others' GPU tests
        "pytest-gpu": Step(
            "pytest-gpu",
            [
                python,
                "-m",
                "pytest",
                "-m",
                "gpu",
                "-q",
                "-n",
                "0",
                "--continue-on-collection-errors",
                *(gpu_test_files() or ["tests"]),
            ],
            600,
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
        "llm": Step(
            "llm",
            [python, "benchmarks/llm_vs_torchtitan.py", *device, "--out", str(out / "llm")],
            900,
        ),
        "llm-floor": Step(
            "llm-floor",
            [*cli, "train", "llm", *device, "--no-history", "--report-dir", str(out / "llm-floor")],
            900,
        ),
        "preflight": Step(
            "preflight",
            [*cli, "preflight", *device, "--act", "report", "--report-dir", str(out / "preflight")],
            120,
        ),
        "watch": Step(
            "watch",
            [*cli, "watch", "--once", "--no-history", "--act", "report", "--metrics-port", "0"],
            120,
        ),
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
    # in the order given: a short lease runs what matters most first
    return [steps[name] for name in dict.fromkeys(chosen)]


def _capability(environment: dict[str, Any]) -> int | None:
    for gpu in environment.get("gpus") or []:
        found = re.fullmatch(r"(\d+)\.(\d+)", str(gpu.get("compute_capability", "")))
        if found:  # "9.0" -> 90, the target `bench nbody --explain` names sm_90
            return int(found[1]) * 10 + int(found[2])
    return None


def _figures(step: Step, work: Path, environment: dict[str, Any]) -> dict[str, Any]:
    if step.not_run:
        return {}
    if step.name.startswith("bench-"):
        figures = _report_figures(work / f"{step.name}.json")
        figures["within_60_s"] = step.seconds < BENCH_TARGET_SECONDS
        return figures
    if step.name in ("full", "llm-floor", "preflight"):
        folder = work / step.name
        reports = sorted(folder.glob("*.json")) if folder.is_dir() else []
        figures = _report_figures(reports[-1]) if reports else {}
        if step.name == "preflight":
            figures["within_30_s"] = step.seconds < PREFLIGHT_TARGET_SECONDS
        return figures
    if step.name == "watch":
        return {"one_poll_seconds": round(step.seconds, 2)}
    if step.name == "nbody":
        return _nbody_comparison(
            work / "bench-nbody.json", step.output_tail, _capability(environment)
        )
    if step.name == "pytest-gpu":
        return _pytest_counts(step.output_tail)
    if step.name == "levels" and (work / "accept-levels.json").is_file():
        return {"levels": json.loads((work / "accept-levels.json").read_text())}
    if step.name == "llm" and (work / "llm.json").is_file():
        return dict(json.loads((work / "llm.json").read_text()))
    if step.name == "mnist" and (work / "mnist.json").is_file():
        return dict(json.loads((work / "mnist.json").read_text()))
    return {}


def _pytest_counts(output: str) -> dict[str, Any]:
    """pytest's closing counts ("9 passed, 1175 deselected, 4 errors"): on a GPU image that lacks
    the CPU-side validators, collection errors are told apart from GPU tests that failed."""
    summary = output.strip().splitlines()[-1] if output.strip() else ""
    counts = {word: int(number) for number, word in re.findall(r"(\d+) (\w+)", summary)}
    return {
        "passed": counts.get("passed", 0),
        "failed": counts.get("failed", 0),
        "skipped": counts.get("skipped", 0),
        "errors": counts.get("errors", counts.get("error", 0)),
    }


def _write_record(out: Path, device: str, steps: list[Step], environment: dict[str, Any]) -> None:
    day = datetime.now(UTC).strftime("%Y-%m-%d")
    out.parent.mkdir(parents=True, exist_ok=True)
    record = {
        "date": day,
        "device": device,
        "steps": [asdict(step) for step in steps],
        "environment": environment,
    }
    out.with_suffix(".json").write_text(json.dumps(record, indent=2, default=str) + "\n")
    lines = [
        f"# GPU session, {day}: {_gpu_slug(environment)} ({device})",
        "",
        "Written by `python benchmarks/gpu_session.py`; every figure below was measured in this "
        "run. The environment capture is in the JSON beside this file.",
        "",
        "| step | result | seconds | figures |",
        "|---|---|---|---|",
    ]
    for step in steps:
        if step.not_run:
            state = step.not_run
        elif step.timed_out:
            state = "timed out"
        else:
            state = "ok" if step.ok else f"exit {step.exit_code}"
        shown = json.dumps(step.figures, default=str)
        lines.append(
            f"| {step.name} | {state} | {step.seconds:.1f} | {shown[:400].replace('|', '/')} |"
        )
    out.with_suffix(".md").write_text("\n".join(lines) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    parser.add_argument("--data", type=Path, help="real MNIST for the mnist step")
    parser.add_argument(
        "--only", help=f"comma-separated steps, run in that order, of: {', '.join(STEPS)}"
    )
    parser.add_argument("--out", type=Path, help="OUT.md/OUT.json (default docs/results/...)")
    parser.add_argument(
        "--budget",
        type=float,
        help="seconds for the whole session: each step's limit is cut to what is left, and a "
        "step with less than 5 s left is recorded as not run",
    )
    args = parser.parse_args()

    work = Path(os.environ.get("TMPDIR", "/tmp")) / f"gpuaccept-session-{os.getpid()}"
    work.mkdir(parents=True, exist_ok=True)
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, ["src", os.environ.get("PYTHONPATH")])),
    }
    out = args.out
    environment: dict[str, Any] = {}
    started = time.perf_counter()
    steps: list[Step] = []
    for step in plan(args, work):
        left = args.budget - (time.perf_counter() - started) if args.budget else None
        if left is not None and left < MIN_STEP_SECONDS:
            step.not_run = f"not run: {args.budget:.0f} s --budget spent"
            print(f"[SESSION] {step.name}: {step.not_run}", flush=True)
        else:
            if left is not None:
                step.limit_seconds = min(step.limit_seconds, left)
            run_step(step, env)
        steps.append(step)
        if step.name == "env" and (work / "env.json").is_file():
            environment = json.loads((work / "env.json").read_text())
        step.figures = _figures(step, work, environment)
        if out is None:
            day = datetime.now(UTC).strftime("%Y-%m-%d")
            out = Path("docs/results") / f"{day}-{_gpu_slug(environment)}-session"
        # after every step, so that a session stopped from outside still leaves what it measured
        _write_record(out, args.device, steps, environment)
    if out is not None:
        print(f"[SESSION] wrote {out.with_suffix('.md')} and {out.with_suffix('.json')}")


if __name__ == "__main__":
    main()
