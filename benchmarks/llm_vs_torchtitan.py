"""The LLM workload against a reference run on the same device, in one command.

With --torchtitan-venv DIR (issue #52 §3): gpuaccept and torchtitan 0.3.0 side by side on the
same shapes, batch per rank, sequence, precision, checkpointing, ranks and tokens: torchtitan in
a venv of its own (made in DIR when DIR does not exist, the pip commands printed first), run by
its torchrun through benchmarks/titan_launch.py; gpuaccept as `gpuaccept train llm`. Prints and
writes both sides' tokens/s, TFLOPS, MFU, peak memory and final loss with their ratio, then the
runs that price what cannot be made equal (--variants). On the CPU: 2 gloo ranks, one thread
each, fp32, the tiny preset (MFU against this CPU's one-thread fp32 matmul peak, measured first).
--gpu: every GPU, bf16, the 1b preset; written for a lent GPU and NOT run here: no figure of it
exists until it runs on one.

Without --torchtitan-venv (as gpu_session.py calls it): `gpuaccept train llm` (FSDP2, bf16
compute, fp32 reductions) for each configuration given, each a process of its own with its
report, and beside it a plain single-process loop of the same model, batch and sequence (no
FSDP; torch.autocast bf16): the ratio of their tokens/s is what FSDP and our harness cost or
gain on one GPU. On the CPU: the tiny twin on 2 gloo ranks against the plain loop on one process.

Run:  python benchmarks/llm_vs_torchtitan.py --torchtitan-venv DIR [--gpu] [--steps N] [--out PATH]
      python benchmarks/llm_vs_torchtitan.py [--device cuda|cpu] [--runs SPEC;SPEC] [--out PATH]
      a SPEC is the `train llm` flags of one run, e.g. "--preset 1b" or "--preset 8b --layers 8"
Writes OUT.json and OUT.md (default docs/results/DATE-<device>-llm, with torchtitan
DATE-<device>-llm-vs-torchtitan and OUT-env.json, `gpuaccept env --json`).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import shlex
import shutil
import statistics
import subprocess
import sys
import time
from dataclasses import asdict, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F

from gpuaccept.errors import InputError
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


def cpu_peak_tflops(threads: int) -> float:
    """This CPU's fp32 matmul peak on `threads` threads, measured by gpuaccept's own matmul
    timing (measure/matmul.py measure_matmul_tflops, the best repeat of each square size): a CPU
    has no dense peak in references.toml, so MFU on the CPU is against what one rank's threads
    reach on a matmul alone, not a datasheet figure."""
    from gpuaccept.measure.matmul import measure_matmul_tflops

    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        return max(
            measure_matmul_tflops(torch.device("cpu"), "fp32", n, n, n, 2, 5).best_tflops
            for n in (256, 512, 1024)
        )
    finally:
        torch.set_num_threads(before)


def _side_plan(args: argparse.Namespace, flags: list[str], gpu: bool) -> tuple[Any, list[str], Any]:
    """(the run's spec for each rank, the variants, the checkpointing asked) or a refusal."""
    import titan_side as ts

    from gpuaccept.llm.train import for_world

    default = "loss,attention,logging" if gpu else "loss,logging"
    variants = [v for v in (default if args.variants is None else args.variants).split(",") if v]
    unknown = sorted(set(variants) - {"loss", "attention", "logging", "compile"})
    if unknown:
        raise ts.SideBySideError(
            f"--variants takes loss, attention, logging, compile (got {unknown[0]!r})"
        )
    if args.repeat < 1:
        raise ts.SideBySideError(f"--repeat must be at least 1 (got {args.repeat})")
    if gpu and not torch.cuda.is_available():
        raise ts.SideBySideError("--gpu needs a CUDA GPU and torch can use none here")
    if "attention" in variants and not gpu:
        raise ts.SideBySideError(
            "--variants attention runs torchtitan's FlexAttention, which has no backward on the "
            "CPU (torch 2.13): on a GPU only"
        )
    preset, overrides = _overrides(flags)
    preset = preset if preset != "auto" else ("1b" if gpu else "tiny")
    checkpointing = next(
        (flags[i + 1] for i, flag in enumerate(flags[:-1]) if flag == "--checkpointing"), None
    )
    if checkpointing is not None:
        from gpuaccept.errors import InputError
        from gpuaccept.llm.checkpointing import policy_name

        try:
            checkpointing = policy_name(checkpointing)
        except InputError as error:
            raise ts.SideBySideError(str(error)) from None
    if checkpointing not in (None, "none", "full", "selective-op"):
        raise ts.SideBySideError(
            f"--checkpointing {checkpointing}: torchtitan 0.3.0 has none, full and per-op "
            "selective (SelectiveAC, the policy selective-op copies); every Nth block whole is "
            "gpuaccept's alone"
        )
    spec = for_world(
        llm_spec(preset, "bf16" if gpu else "fp32", replace(overrides, checkpointing=None)),
        torch.cuda.device_count() if gpu else 2,
    )
    if checkpointing:
        spec = replace(spec, checkpointing=checkpointing)
    return spec, variants, checkpointing


def _rates(rates: list[float]) -> str:
    return ", ".join(f"{rate:,.0f}" for rate in rates)


def _median_run(runs: list[tuple[Any, dict[str, Any]]]) -> tuple[Any, dict[str, Any]]:
    """Of a configuration's repeats, the run of the median tokens/s (the lower middle of an
    even count), with every repeat's tokens/s ("spread") and load beside it."""
    ordered = sorted(runs, key=lambda run: run[0].tokens_per_second)
    figures, meta = ordered[(len(ordered) - 1) // 2]
    rates = [run[0].tokens_per_second for run in runs]
    return figures, meta | {"spread": rates, "loads": [run[1]["load"] for run in runs]}


def _check_out(out: Path) -> None:
    """Refuse, before any run, an --out that could not be written after the runs."""
    import titan_side as ts

    parent = out.parent.absolute()
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    if not parent.is_dir() or not os.access(parent, os.W_OK | os.X_OK):
        raise ts.SideBySideError(f"--out {out}: {parent} is not a directory this user may write")


def side_by_side(args: argparse.Namespace) -> int:
    """gpuaccept beside torchtitan (the module docstring); the exit code."""
    import titan_side as ts

    gpu = bool(args.gpu)
    day = datetime.now(UTC).strftime("%Y-%m-%d")
    out = args.out or Path("docs/results") / f"{day}-{'gpu' if gpu else 'cpu'}-llm-vs-torchtitan"
    flags = shlex.split(args.flags or ("--preset 1b" if gpu else "--preset tiny"))
    if args.steps:
        flags += ["--steps", str(args.steps)]
    try:
        spec, variants, checkpointing = _side_plan(args, flags, gpu)
        _check_out(out)
    except (ts.SideBySideError, InputError) as error:
        print(f"llm_vs_torchtitan: {error}", file=sys.stderr)
        return 2
    ranks = torch.cuda.device_count() if gpu else 2
    preset = _overrides(flags)[0].replace("auto", "1b" if gpu else "tiny")
    shape = spec.shape
    run = ts.RunShape(
        dim=shape.dim, vocab=shape.vocab, layers=shape.layers, heads=shape.heads,
        kv_heads=shape.kv_heads, ffn_dim=shape.ffn_dim, seq_len=shape.seq_len,
        rope_theta=shape.rope_theta, steps=spec.steps, warmup=spec.warmup_steps,
        local_batch=spec.local_batch, learning_rate=spec.learning_rate,
        precision=spec.precision, checkpointing=spec.checkpointing, seed=spec.seed, ranks=ranks,
    )  # fmt: skip
    # every rank one thread on the CPU (torchrun's own default for several ranks a node); the
    # same for gpuaccept's ranks, which would otherwise each take every core
    threads = 1 if not gpu else max(1, (os.cpu_count() or 1) // ranks)
    work = Path(os.environ.get("TMPDIR", "/tmp")) / f"gpuaccept-titan-{os.getpid()}"
    work.mkdir(parents=True, exist_ok=True)
    try:
        versions = ts.ensure_venv(Path(args.torchtitan_venv), torch.__version__, gpu)
        python = Path(args.torchtitan_venv) / "bin" / "python"
        if versions.get("torch", "").split("+")[0] != torch.__version__.split("+")[0]:
            print(
                f"[TITAN] note: torchtitan's venv has torch {versions.get('torch')}, gpuaccept "
                f"{torch.__version__}"
            )
        peak = None if gpu else cpu_peak_tflops(threads)
        if peak:
            print(f"[TITAN] CPU fp32 matmul peak on {threads} thread(s): {peak:.4f} TFLOPS")
        per_token = flops_per_token(shape)
        print(
            f"[TITAN] {preset}: {shape.layers} layers, dim {shape.dim}, {shape.heads} heads "
            f"({shape.kv_heads} kv), FFN {shape.ffn_dim}, vocab {shape.vocab}, seq "
            f"{shape.seq_len}, batch {spec.local_batch} per rank, {ranks} rank(s), "
            f"{spec.steps} steps ({spec.warmup_steps} warm-up), {spec.precision}, "
            f"checkpointing {spec.checkpointing}",
            flush=True,
        )
        base_flags = [*flags, "--batch", str(spec.local_batch)]
        if checkpointing is None:
            base_flags += ["--checkpointing", spec.checkpointing]
        limit = args.limit
        attention = "flex" if gpu else "sdpa"

        def ours(name: str, extra: list[str]) -> tuple[Any, dict[str, Any]]:
            print(f"[TITAN] gpuaccept train llm {' '.join(base_flags + extra)}", flush=True)
            check, seconds, rss = ts.run_gpuaccept(
                base_flags + extra, gpu=gpu, threads=threads, work=work, limit=limit, name=name
            )
            peak_here = peak if not gpu else None
            figures = ts.gpuaccept_figures(check, peak_here, None if gpu else rss)
            if gpu and figures.mfu:
                nonlocal gpu_peak
                gpu_peak = figures.tflops / figures.mfu
            rate = figures.tokens_per_second
            print(f"[TITAN]   {rate:,.0f} tokens/s per rank in {seconds:.0f} s", flush=True)
            return figures, {"seconds": seconds, "status": check["status"],
                             "message": check.get("message"), "rss_gib": rss}  # fmt: skip

        def theirs(
            loss: str, attn: str, compiled: bool = False, log_freq: int = 1
        ) -> tuple[Any, dict[str, Any]]:
            print(
                f"[TITAN] torchtitan: loss {loss}, attention {attn}, compile {compiled}, "
                f"a metrics line every {log_freq} step(s)",
                flush=True,
            )
            text, seconds, rss, teardown = ts.run_titan(
                python, run, gpu=gpu, loss=loss, attention=attn,
                peak_flops=peak * 1e12 if peak else None, threads=threads, work=work,
                limit=limit, compiled=compiled, log_freq=log_freq,
            )  # fmt: skip
            figures = ts.titan_figures(
                ts.parse_titan_log(text), run.warmup, per_token, peak, log_freq
            )
            if gpu:
                figures.peak_memory_gib = ts.titan_active_peak_gib(text)
            else:
                figures.memory_note = f"its own line: {figures.peak_memory_gib:.2f} GiB"
                figures.peak_memory_gib = rss
            rate = figures.tokens_per_second
            print(f"[TITAN]   {rate:,.0f} tokens/s per rank in {seconds:.0f} s", flush=True)
            if teardown:
                print(f"[TITAN]   note: {teardown}", flush=True)
            return figures, {"seconds": seconds, "rss_gib": rss, "log_tail": text[-2000:],
                             "teardown": teardown}  # fmt: skip

        gpu_peak: float | None = None
        # each configuration `--repeat` times, round-robin so a shared machine's load falls on
        # all of them alike; torchtitan first, so a venv that cannot train stops it at once
        jobs: dict[str, Any] = {"titan": lambda: theirs("plain", attention)}
        jobs["ours"] = lambda: ours("eager", [])
        if "loss" in variants:
            jobs["titan chunked"] = lambda: theirs("chunked", attention)
        if "attention" in variants:
            jobs["titan sdpa"] = lambda: theirs("plain", "sdpa")
        if "logging" in variants:
            jobs["titan log10"] = lambda: theirs("plain", attention, log_freq=10)
        if "compile" in variants:
            jobs["ours compiled"] = lambda: ours("compiled", ["--compile"])
            jobs["titan compiled"] = lambda: theirs("plain", attention, compiled=True)
        results: dict[str, list[tuple[Any, dict[str, Any]]]] = {name: [] for name in jobs}
        for _ in range(args.repeat):
            for name, job in jobs.items():
                load = os.getloadavg()[0]
                figures, meta = job()
                # the machine's 1-minute load before and after: other work on shared cores
                # moves these figures more than anything compared here
                results[name].append((figures, meta | {"load": [load, os.getloadavg()[0]]}))
        chosen = {name: _median_run(runs) for name, runs in results.items()}
        titan_main, titan_meta = chosen["titan"]
        ours_main, ours_meta = chosen["ours"]
        if gpu_peak:
            # on a GPU the peak is gpuaccept's (references.toml's dense bf16, read back from its
            # MFU), so both sides' MFU share it; torchtitan's own is kept as own_mfu
            titan_main.mfu = titan_main.tflops / gpu_peak
        priced: list[dict[str, Any]] = []

        def price(what: str, a_name: str, b_name: str, a_label: str, b_label: str) -> None:
            a, b = chosen[a_name][0], chosen[b_name][0]
            priced.append({
                "difference": what, "a": a_label, "b": b_label,
                "tokens_per_second_a": a.tokens_per_second,
                "tokens_per_second_b": b.tokens_per_second,
                "spread_a": chosen[a_name][1]["spread"], "spread_b": chosen[b_name][1]["spread"],
                "b_over_a": ts.ratio(b.tokens_per_second, a.tokens_per_second),
                "final_loss_a": a.final_loss, "final_loss_b": b.final_loss,
            })  # fmt: skip

        if "loss" in variants:
            price("the loss: torchtitan's ChunkedLossWrapper (its shipped configs) against one "
                  "cross_entropy over the logits (gpuaccept's)", "titan", "titan chunked",
                  "torchtitan, plain loss", "torchtitan, chunked loss")  # fmt: skip
        if "attention" in variants:
            price("the attention kernel: torchtitan's FlexAttention (block-causal mask built "
                  "each step) against SDPA is_causal (gpuaccept's)", "titan sdpa", "titan",
                  "torchtitan, SDPA", "torchtitan, FlexAttention")  # fmt: skip
        if "logging" in variants:
            price("torchtitan's metrics every step (the loss averaged and maxed over the ranks, "
                  "the token count summed: collectives and a host sync each step) against "
                  "every 10th", "titan", "titan log10", "torchtitan, every step",
                  "torchtitan, every 10th step")  # fmt: skip
        if "compile" in variants:
            price("torch.compile per block, gpuaccept", "ours", "ours compiled",
                  "gpuaccept eager", "gpuaccept --compile")  # fmt: skip
            price("torch.compile per block and loss, torchtitan", "titan", "titan compiled",
                  "torchtitan eager", "torchtitan compiled")  # fmt: skip
    except ts.SideBySideError as error:
        print(f"llm_vs_torchtitan: {error}", file=sys.stderr)
        return error.exit_code
    environment = subprocess.run(
        [sys.executable, "-m", "gpuaccept", "env", "--json"],
        capture_output=True, text=True, check=False,
    ).stdout  # fmt: skip
    command = "python benchmarks/llm_vs_torchtitan.py " + " ".join(
        shlex.quote(a) for a in sys.argv[1:]
    )
    record: dict[str, Any] = {
        "date": day,
        "command": command,
        "device": torch.cuda.get_device_name() if gpu else "cpu",
        "torch": torch.__version__,
        "torchtitan_venv": versions,
        "run": asdict(run),
        "threads_per_rank": threads,
        "peak_tflops_per_rank": peak if peak else gpu_peak,
        "flops_per_token": per_token,
        "attention": {"gpuaccept": "SDPA is_causal", "torchtitan": attention},
        "gpuaccept": asdict(ours_main) | ours_meta,
        "torchtitan": asdict(titan_main) | titan_meta,
        "ratios": {
            name: ts.ratio(getattr(ours_main, name), getattr(titan_main, name))
            for _, name, _ in ts.ROWS
        },
        "priced": priced,
    }
    rows = ts.table(ours_main, titan_main)
    spread = (
        f"tokens/s per rank of each of the {args.repeat} repeats (the table holds the median "
        f"run's figures): gpuaccept {_rates(ours_meta['spread'])}, torchtitan "
        f"{_rates(titan_meta['spread'])}"
    )
    rows += ["", spread]
    print("\n".join(rows))
    for entry in priced:
        print(f"[TITAN] {entry['b']} / {entry['a']}: {entry['b_over_a']:.3f} of the tokens/s")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.with_suffix(".json").write_text(json.dumps(record, indent=2, default=str) + "\n")
    Path(f"{out}-env.json").write_text(environment)
    lines = [
        f"# gpuaccept beside torchtitan, {day}: {record['device']}",
        "",
        f"Written by `{command}`; every figure measured in this run. torch {torch.__version__}; "
        f"torchtitan's venv: {versions}. Environment: `{out.name}-env.json` "
        "(`gpuaccept env --json`).",
        "",
        f"Both: {json.dumps(asdict(run))}; {threads} thread(s) per rank; attention gpuaccept "
        f"SDPA is_causal, torchtitan {attention}; FLOPs per token {per_token:,} (gpuaccept's "
        "count, for both sides).",
        "",
        *rows,
        "",
    ]
    if priced:
        lines += ["| what differs | a | b | a tokens/s (repeats) | b tokens/s (repeats) | b / a "
                  "| a loss | b loss |", "|---|---|---|---|---|---|---|---|"]  # fmt: skip
        for e in priced:
            lines.append(
                f"| {e['difference']} | {e['a']} | {e['b']} | {e['tokens_per_second_a']:,.0f} "
                f"({_rates(e['spread_a'])}) | {e['tokens_per_second_b']:,.0f} "
                f"({_rates(e['spread_b'])}) | {e['b_over_a']:.3f} | "
                f"{e['final_loss_a']:.3f} | {e['final_loss_b']:.3f} |"
            )
    out.with_suffix(".md").write_text("\n".join(lines) + "\n")
    print(f"[TITAN] wrote {out.with_suffix('.md')}, {out.with_suffix('.json')}, {out}-env.json")
    # the logs stay only where a side failed (its message names the log)
    shutil.rmtree(work, ignore_errors=True)
    return 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--torchtitan-venv",
        help="gpuaccept beside torchtitan 0.3.0 from this venv (made here if DIR does not exist)",
    )
    parser.add_argument(
        "--gpu",
        action="store_true",
        help="with --torchtitan-venv: every GPU, bf16, 1b (for a lent GPU; never run on this "
        "project's CPU machines, so no GPU figure of it exists yet)",
    )
    parser.add_argument("--flags", help="with --torchtitan-venv: the `train llm` flags of the run")
    parser.add_argument("--steps", type=int, help="with --torchtitan-venv: optimizer steps")
    parser.add_argument(
        "--repeat",
        type=int,
        default=1,
        help="with --torchtitan-venv: run every configuration this many times, round-robin, and "
        "report the median run (a shared machine's load moves single runs)",
    )
    parser.add_argument(
        "--variants",
        help="with --torchtitan-venv: the differences to price, of loss, attention (GPU only), "
        "logging, compile (default: loss,logging on the CPU, loss,attention,logging on GPUs)",
    )
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--runs", help="';'-separated `train llm` flag sets")
    parser.add_argument("--plain", default="1", help="1: the plain-loop reference beside each run")
    parser.add_argument("--limit", type=float, default=600.0, help="seconds per run")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    if args.torchtitan_venv:
        sys.path.insert(0, str(Path(__file__).parent))
        raise SystemExit(side_by_side(args))
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
