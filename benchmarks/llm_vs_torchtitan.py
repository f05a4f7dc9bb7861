"""The LLM workload against a reference run on the same device, in one command.

On a GPU: `gpuaccept train llm` (FSDP2, bf16 compute, fp32 reductions) for each configuration
given, each a process of its own with its report, and beside it a plain single-process loop of the
same model, batch and sequence (no FSDP; torch.autocast bf16): the ratio of their tokens/s is what
FSDP and our harness cost or gain on one GPU. torchtitan itself runs only where it is importable
(`pip install torchtitan`, where its pins allow this torch); where it is not, the record says so
and no figure stands in for it.

On the CPU: the tiny twin on 2 gloo ranks against the plain loop on one process.

Run:  python benchmarks/llm_vs_torchtitan.py [--device cuda|cpu] [--runs SPEC;SPEC] [--out PATH]
      a SPEC is the `train llm` flags of one run, e.g. "--preset 1b" or "--preset 8b --layers 8"
Writes OUT.json and OUT.md (default docs/results/DATE-<device>-llm).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import shlex
import statistics
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F

from gpuaccept.llm.flops import flops_per_token
from gpuaccept.llm.model import Decoder, init_weights
from gpuaccept.llm.plans import Overrides, llm_spec
from gpuaccept.llm.tokens import build_chain

DEFAULT_RUNS = {"cuda": ["--preset 1b", "--preset 1b --compile"], "cpu": ["--preset tiny"]}


def plain_loop(preset: str, device: torch.device, overrides: Overrides) -> dict[str, Any]:
    """The same model and batch in one process, no FSDP: the reference."""
    bf16 = device.type == "cuda"
    spec = llm_spec(preset, "bf16" if bf16 else "fp32", overrides)
    model = Decoder(spec.shape).to(device)
    init_weights(model, 0)
    optimizer = torch.optim.AdamW(model.parameters(), lr=spec.learning_rate, betas=(0.9, 0.95))
    chain = build_chain(spec.chain)
    tokens = chain.sample(spec.steps * spec.local_batch, spec.shape.seq_len + 1, 1, device)
    batches = tokens.view(spec.steps, spec.local_batch, -1)
    times, losses = [], []
    for step in range(spec.steps):
        started = time.perf_counter()
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=bf16):
            logits = model(batches[step][:, :-1])
        loss = F.cross_entropy(logits.flatten(0, 1).float(), batches[step][:, 1:].flatten())
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        losses.append(loss.item())
        times.append(time.perf_counter() - started)
    timed = times[spec.warmup_steps :]
    rate = spec.local_batch * spec.shape.seq_len * len(timed) / sum(timed)
    return {
        "tokens_per_second": rate,
        "tflops": rate * flops_per_token(spec.shape) / 1e12,
        "median_step_seconds": statistics.median(timed),
        "final_loss": statistics.fmean(losses[-max(1, len(losses) // 10) :]),
        "peak_memory_gib": torch.cuda.max_memory_allocated(device) / 1024**3 if bf16 else None,
    }


def _overrides(flags: list[str]) -> tuple[str, Overrides]:
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("--preset", default="auto")
    for name in ("--layers", "--dim", "--seq-len", "--batch", "--steps"):
        parser.add_argument(name, type=int)
    parser.add_argument("--lr", type=float)
    known, _ = parser.parse_known_args(flags)
    return known.preset, Overrides(
        known.layers, known.dim, known.seq_len, known.batch, known.steps, known.lr
    )


def run_ours(flags: list[str], device: str, work: Path, limit: float) -> dict[str, Any]:
    reports = work / f"run-{len(list(work.glob('run-*')))}"
    command = [sys.executable, "-m", "gpuaccept", "train", "llm", *flags, "--device", device]
    command += ["--no-history", "--report-dir", str(reports)]
    started = time.perf_counter()
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=limit, check=False)
        output, code = done.stdout + done.stderr, done.returncode
    except subprocess.TimeoutExpired:
        output, code = "timed out", None
    record: dict[str, Any] = {
        "flags": " ".join(flags),
        "exit_code": code,
        "seconds": time.perf_counter() - started,
        "output_tail": output[-3000:],
    }
    found = sorted(reports.glob("*.json")) if reports.is_dir() else []
    if found:
        report = json.loads(found[-1].read_text())
        check = report["checks"][0]
        record["status"] = check["status"]
        record["message"] = check.get("message")
        record["figures"] = {m["name"]: m["value"] for m in check["measurements"]}
        record["details"] = {k: v for k, v in check["details"].items() if k != "losses"}
        record["losses"] = check["details"].get("losses")
        record["predicted_peak_gib"] = _predicted_peak_gib(flags, device, record["details"])
    return record


def _predicted_peak_gib(flags: list[str], device: str, details: dict[str, Any]) -> float | None:
    """The memory model's per-GPU peak for the run that was made (gpuaccept/llm/memory.py),
    beside the measured one: what the next GPU session checks it against."""
    from gpuaccept.llm.memory import estimate_memory
    from gpuaccept.llm.model import model_shape

    if device != "cuda" or "layers" not in details:
        return None
    preset, overrides = _overrides(flags)
    shape = model_shape(
        "1b" if preset == "auto" else preset, overrides.layers, overrides.dim, overrides.seq_len
    )
    estimate = estimate_memory(
        shape, int(details["local_batch"]), details["checkpointing"], int(details["ranks"])
    )
    return estimate.peak_gib


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--runs", help="';'-separated `train llm` flag sets")
    parser.add_argument("--plain", default="1", help="1: the plain-loop reference beside each run")
    parser.add_argument("--limit", type=float, default=600.0, help="seconds per run")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    device = torch.device(args.device)
    runs = args.runs.split(";") if args.runs else DEFAULT_RUNS[device.type]
    work = Path(os.environ.get("TMPDIR", "/tmp")) / f"gpuaccept-llm-{os.getpid()}"
    work.mkdir(parents=True, exist_ok=True)
    day = datetime.now(UTC).strftime("%Y-%m-%d")
    out = args.out or Path("docs/results") / f"{day}-{device.type}-llm"
    record: dict[str, Any] = {
        "date": day,
        "device": torch.cuda.get_device_name() if device.type == "cuda" else "cpu",
        "torch": torch.__version__,
        "torchtitan": "importable"
        if importlib.util.find_spec("torchtitan")
        else "not importable here: no torchtitan figure was measured",
        "runs": [],
    }
    for flags_text in runs:
        flags = shlex.split(flags_text)
        print(f"[LLM] train llm {flags_text}", flush=True)
        ours = run_ours(flags, args.device, work, args.limit)
        print(f"[LLM]   exit {ours['exit_code']} in {ours['seconds']:.0f} s: {ours.get('message')}")
        entry: dict[str, Any] = {"ours": ours}
        fitted = "did not fit" not in str(ours.get("message"))
        if (
            args.plain == "1"
            and "--compile" not in flags
            and ours.get("exit_code") in (0, 1)
            and fitted
        ):
            preset, overrides = _overrides(flags)
            preset = preset if preset != "auto" else ("tiny" if device.type == "cpu" else "1b")
            try:
                plain = plain_loop(preset, device, overrides)
                entry["plain"] = plain
                rate = ours.get("figures", {}).get(f"llm_{preset}_tokens_per_second_per_gpu") or (
                    ours.get("figures", {}).get("llm_custom_tokens_per_second_per_gpu")
                )
                if rate:
                    entry["ours_over_plain"] = rate / plain["tokens_per_second"]
                print(f"[LLM]   plain loop {plain['tokens_per_second']:,.0f} tokens/s", flush=True)
            except torch.OutOfMemoryError as error:
                entry["plain"] = {"error": f"out of memory: {str(error)[:200]}"}
            finally:
                if device.type == "cuda":
                    torch.cuda.empty_cache()
        record["runs"].append(entry)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.with_suffix(".json").write_text(json.dumps(record, indent=2, default=str) + "\n")
    lines = [
        f"# LLM workload, {day}: {record['device']}",
        "",
        "Written by `python benchmarks/llm_vs_torchtitan.py`; every figure measured in this run.",
        f"torch {record['torch']}; torchtitan: {record['torchtitan']}.",
        "",
        "| run | status | tokens/s/GPU | TFLOPS/GPU | MFU | goodput | peak GiB | predicted GiB "
        "| loss | plain loop tokens/s | ours / plain |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for entry in record["runs"]:
        ours, figures = entry["ours"], entry["ours"].get("figures", {})

        def pick(suffix: str, figures: dict[str, Any] = figures) -> Any:
            return next((v for k, v in figures.items() if k.endswith(suffix)), None)

        def fmt(value: Any, spec: str) -> str:
            return "-" if value is None else format(value, spec)

        plain = entry.get("plain", {})
        lines.append(
            f"| `{ours['flags']}` | {ours.get('status', ours['exit_code'])} | "
            f"{fmt(pick('tokens_per_second_per_gpu'), ',.0f')} | "
            f"{fmt(pick('tflops_per_gpu'), '.1f')} | {fmt(pick('_mfu'), '.1%')} | "
            f"{fmt(figures.get('llm_goodput'), '.2f')} | "
            f"{fmt(pick('peak_memory_gib'), '.1f')} | {fmt(ours.get('predicted_peak_gib'), '.1f')} "
            f"| {fmt(figures.get('llm_final_loss'), '.3f')} "
            f"| {fmt(plain.get('tokens_per_second'), ',.0f')} | "
            f"{fmt(entry.get('ours_over_plain'), '.2f')} |"
        )
    out.with_suffix(".md").write_text("\n".join(lines) + "\n")
    print(f"[LLM] wrote {out.with_suffix('.md')} and {out.with_suffix('.json')}")


if __name__ == "__main__":
    main()
