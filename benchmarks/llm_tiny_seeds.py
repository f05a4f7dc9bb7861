"""How far the tiny preset's convergence is from its limit, seed by seed: the margin behind
accept's workload verdict on a healthy node (issue #32; the one-GPU failure of #30's kind).

Run: python benchmarks/llm_tiny_seeds.py [--device cpu|cuda] [--ranks N] [--seeds 0-7]

For each seed, the tiny preset as accept runs it (bf16 on GPUs, fp32 on the CPU) on N ranks
(default: every GPU, 1 on the CPU): its final loss against the convergence limit, and the step
where the 10-step mean of the loss first fell below the limit, against the run's steps. A
healthy node must pass on every seed with room to spare.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import time
from pathlib import Path


def _seeds(text: str) -> list[int]:
    if "-" in text:
        low, high = text.split("-", 1)
        return list(range(int(low), int(high) + 1))
    return [int(s) for s in text.split(",")]


def crossing(losses: list[float], limit: float, window: int = 10) -> int | None:
    for step in range(len(losses) - window + 1):
        if statistics.fmean(losses[step : step + window]) < limit:
            return step
    return None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    parser.add_argument("--ranks", type=int)
    parser.add_argument("--seeds", default="0-7")
    parser.add_argument("--json", type=Path)
    parser.add_argument(
        "--steps",
        type=int,
        help="steps of each run (default: the preset's 500; accept's CPU standard runs 150)",
    )
    parser.add_argument(
        "--last-token-only",
        action="store_true",
        help="every token attends to itself alone: a model that ignores its context, which the "
        "limit must fail",
    )
    args = parser.parse_args()

    import torch

    from gpuaccept.distributed.local_ranks import run_ranks
    from gpuaccept.llm.figures import compute_figures
    from gpuaccept.llm.plans import llm_spec
    from gpuaccept.llm.train import train_rank

    gpu = args.device == "cuda"
    ranks = args.ranks or (torch.cuda.device_count() if gpu else 1)
    backend = "nccl" if gpu else "gloo"
    rows = []
    for seed in _seeds(args.seeds):
        spec = llm_spec("tiny", "bf16" if gpu else "fp32", seed=seed)
        if args.steps:
            spec = dataclasses.replace(spec, steps=args.steps)
        if args.last_token_only:
            spec = dataclasses.replace(spec, self_attention_only=True)
        started = time.perf_counter()
        records = run_ranks(train_rank, ranks, spec, 900, backend)
        figures = compute_figures(spec, records, peak_tflops=None)
        row = {
            "seed": seed,
            "ranks": ranks,
            "local_batch": records[0].spec.local_batch,
            "final_loss": round(figures.final_loss, 4),
            "first_order_entropy": round(figures.first_order_entropy, 4),
            "limit": round(figures.convergence_limit, 4),
            "crossed_at_step": crossing(figures.losses, figures.convergence_limit),
            "steps": spec.steps,
            "last_token_only": args.last_token_only,
            "seconds": round(time.perf_counter() - started, 1),
        }
        rows.append(row)
        print(json.dumps(row), flush=True)
    passed = sum(1 for r in rows if r["final_loss"] < r["limit"])
    latest = max((r["crossed_at_step"] or spec.steps for r in rows), default=None)
    print(
        f"tiny on {ranks} {backend} rank(s): {passed} of {len(rows)} seeds below the limit; "
        f"latest crossing at step {latest} of {spec.steps}"
    )
    if args.json:
        args.json.write_text(json.dumps({"device": args.device, "rows": rows}, indent=1) + "\n")


if __name__ == "__main__":
    main()
