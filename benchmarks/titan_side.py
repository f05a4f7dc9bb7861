"""gpuaccept's LLM workload and torchtitan 0.3.0 side by side, on the same shapes, batch per rank,
sequence, precision, checkpointing, ranks and tokens (issue #52 §3): the parts of
`benchmarks/llm_vs_torchtitan.py --torchtitan-venv DIR` that tests can hold without torchtitan.

torchtitan runs in a venv of its own (`titan_launch.py` under its torchrun); gpuaccept runs as
`gpuaccept train llm`. Both read the same per-rank token streams (gpuaccept's Markov chain, the
same seeds). Each side's speed is its own figure: gpuaccept's report (timed steps after the
warm-up), torchtitan's metrics lines (`step: N  loss: ...  tps: ...`, components/metrics.py:
540-549 of the 0.3.0 wheel) over the same steps after the same warm-up.
"""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import statistics
import subprocess
import sys
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

TORCHTITAN = "torchtitan==0.3.0"
# torchtitan 0.3.0 imports triton whatever the device (distributed/minimal_async_ep/kernels.py:10,
# reached from models/common/__init__.py); a CPU torch does not bring it, a CUDA torch does (and
# pins its own version, which a second pin here could contradict)
TRITON_FOR_CPU = "triton==3.9.0"
LAUNCHER = Path(__file__).with_name("titan_launch.py")
REPO = Path(__file__).resolve().parents[1]


class SideBySideError(Exception):
    """One line for the operator; the benchmark exits non-zero and writes nothing."""

    def __init__(self, message: str, exit_code: int = 1) -> None:
        super().__init__(message)
        self.exit_code = exit_code


# ---------------------------------------------------------------------------------------------
# torchtitan's venv


def venv_commands(venv: Path, torch_version: str, gpu: bool) -> list[list[str]]:
    """The exact commands that make torchtitan's venv (printed before they run)."""
    python = str(venv / "bin" / "python")
    pip = [python, "-m", "pip", "--disable-pip-version-check", "install"]
    # the project's torch, by version only (a local tag such as +cpu is the index's choice);
    # on this machine's index that is a CPU build, and torch first so nothing pulls another
    torch_pin = f"torch=={torch_version.split('+')[0]}"
    titan = [TORCHTITAN] if gpu else [TORCHTITAN, TRITON_FOR_CPU]
    return [["python3", "-m", "venv", str(venv)], [*pip, torch_pin], [*pip, *titan]]


def venv_versions(venv: Path) -> dict[str, str] | None:
    """torch's and torchtitan's versions in the venv, or None where it cannot say them."""
    python = venv / "bin" / "python"
    if not python.exists():
        return None
    probe = (
        "import json, importlib.metadata as m; "
        "print(json.dumps({p: m.version(p) for p in ('torch', 'torchtitan')}))"
    )
    try:
        done = subprocess.run(
            [str(python), "-c", probe], capture_output=True, text=True, timeout=120, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    if done.returncode != 0:
        return None
    try:
        versions = json.loads(done.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return None
    return versions if isinstance(versions, dict) else None


def ensure_venv(venv: Path, torch_version: str, gpu: bool, say: Any = print) -> dict[str, str]:
    """torchtitan's venv as given, or made where nothing is: its versions. A directory that is
    there but holds no torchtitan 0.3.0 is refused and left as it is; one this call made and
    could not finish is removed."""
    wanted = TORCHTITAN.split("==")[1]
    if venv.exists():
        versions = venv_versions(venv)
        if versions is None or versions.get("torchtitan") != wanted:
            found = f"torchtitan {versions['torchtitan']}" if versions else "no torchtitan"
            raise SideBySideError(
                f"--torchtitan-venv {venv} exists but holds {found}, not {wanted} (left as it "
                "is): give a new directory to have one made, or an existing venv with it",
                2,
            )
        return versions
    parent = venv.parent
    if not parent.is_dir() or not os.access(parent, os.W_OK | os.X_OK):
        raise SideBySideError(
            f"--torchtitan-venv {venv}: cannot be made, {parent} is not a directory this user "
            "may write",
            2,
        )
    commands = venv_commands(venv, torch_version, gpu)
    say(f"[TITAN] making torchtitan's venv {venv}:")
    for command in commands:
        say("[TITAN]   " + " ".join(command))
    try:
        for command in commands:
            done = subprocess.run(command, capture_output=True, text=True, check=False)
            if done.returncode != 0:
                last = (done.stderr or done.stdout).strip().splitlines() or ["no output"]
                raise SideBySideError(
                    f"--torchtitan-venv {venv}: `{' '.join(command[-3:])}` failed (exit "
                    f"{done.returncode}): {last[-1][:300]}",
                    2,
                )
    except BaseException:
        shutil.rmtree(venv, ignore_errors=True)
        raise
    versions = venv_versions(venv)
    if versions is None or versions.get("torchtitan") != wanted:
        shutil.rmtree(venv, ignore_errors=True)
        raise SideBySideError(f"--torchtitan-venv {venv}: made, but torchtitan does not import", 2)
    return versions


def rank_tokens(seed: int, rank: int, world: int, steps: int, batch: int, seq_len: int) -> Any:
    """Every step's batch for one rank, as gpuaccept's rank draws it (llm/train.py `_batches`:
    the same chain, the same seed formula; tests/llm/test_vs_torchtitan.py holds the two
    equal): torchtitan's side trains on the very tokens gpuaccept's does. [steps, batch,
    seq_len + 1] int64 on the CPU."""
    import torch

    from gpuaccept.llm.tokens import ChainSpec, build_chain

    chain = build_chain(ChainSpec())
    seed_here = (seed * 7919 + rank) * 104729 + world
    tokens = chain.sample(steps * batch, seq_len + 1, seed=seed_here, device=torch.device("cpu"))
    return tokens.view(steps, batch, seq_len + 1)


# ---------------------------------------------------------------------------------------------
# torchtitan's log

_ANSI = re.compile(r"\x1b\[[0-9;]*m")
# components/metrics.py:540-549 (0.3.0): the line its logger prints at every log_freq step
_STEP = re.compile(
    r"step:\s*(?P<step>\d+)\s+loss:\s*(?P<loss>[-+0-9.eE]+|nan|inf)\s+"
    r"grad_norm:\s*(?P<grad_norm>[-+0-9.eE]+|nan|inf)\s+"
    r"memory:\s*(?P<memory>[0-9.]+)GiB\((?P<memory_pct>[0-9.]+)%\)\s+"
    r"tps:\s*(?P<tps>[0-9,]+)\s+tflops:\s*(?P<tflops>[0-9,.]+)\s+"
    r"mfu:\s*(?P<mfu>[0-9.]+%|N/A)"
)
# titan_launch.py's own line beside it on a GPU: the allocator's active and reserved peaks
_PEAK = re.compile(r"gpuaccept-peak: active (?P<active>[0-9.]+) GiB reserved (?P<reserved>[0-9.]+)")


@dataclass(frozen=True)
class TitanStep:
    step: int
    loss: float
    grad_norm: float
    memory_gib: float  # max reserved since the last line (on the CPU: the peak resident set)
    tps: float  # tokens/s per device over the time since the last line
    tflops: float  # printed with two decimals: read for a cross-check only
    mfu_percent: float | None  # against torchtitan's peak (the one the benchmark handed it)


def parse_titan_log(text: str) -> list[TitanStep]:
    """Every metrics line of one rank's log, in order (a line repeated by another rank's
    output is kept once per step: the first)."""
    steps: dict[int, TitanStep] = {}
    for raw in text.splitlines():
        found = _STEP.search(_ANSI.sub("", raw))
        if not found:
            continue
        step = int(found["step"])
        if step in steps:
            continue
        mfu = found["mfu"]
        steps[step] = TitanStep(
            step=step,
            loss=float(found["loss"]),
            grad_norm=float(found["grad_norm"]),
            memory_gib=float(found["memory"]),
            tps=float(found["tps"].replace(",", "")),
            tflops=float(found["tflops"].replace(",", "")),
            mfu_percent=None if mfu == "N/A" else float(mfu.rstrip("%")),
        )
    return [steps[key] for key in sorted(steps)]


def titan_active_peak_gib(text: str) -> float | None:
    """The largest allocator-active peak titan_launch.py logged (GPU only), else None."""
    peaks = [float(m["active"]) for m in _PEAK.finditer(text)]
    return max(peaks) if peaks else None


def titan_failure_line(text: str) -> str:
    """The line that says why torchtitan stopped: the last exception line of rank 0's output."""
    lines = [_ANSI.sub("", line).strip() for line in text.splitlines()]
    errors = [
        line
        for line in lines
        if re.search(r"(Error|Exception|error:)", line)
        and not line.startswith(("W1", "E1", "I1"))
        and "ChildFailedError" not in line
        and "Traceback" not in line
    ]
    return (errors[-1] if errors else (lines[-1] if lines else "no output"))[:300]


# ---------------------------------------------------------------------------------------------
# the figures


@dataclass
class SideFigures:
    """One side's figures over the timed steps (after the warm-up)."""

    tokens_per_second: float  # per rank (per GPU)
    tflops: float  # per rank, gpuaccept's FLOPs-per-token count for both sides
    mfu: float | None  # against the same peak for both sides, None where there is none
    peak_memory_gib: float | None
    final_loss: float  # mean of the last tenth of the steps
    losses: list[float] = field(default_factory=list)
    own_mfu: float | None = None  # torchtitan's own MFU line (its peak table), a cross-check
    memory_note: str = ""


def harmonic_rate(rates: list[float]) -> float:
    """Tokens/s over steps of equal tokens: the tokens over the summed time (as gpuaccept's
    `llm.figures.timed_rate` sums its step times), not the mean of the rates."""
    usable = [rate for rate in rates if rate > 0 and math.isfinite(rate)]
    return len(usable) / sum(1 / rate for rate in usable) if usable else math.nan


def tail_mean(losses: list[float]) -> float:
    """The mean of the last tenth of the steps (gpuaccept's final loss, llm/figures.py)."""
    return statistics.fmean(losses[-max(1, len(losses) // 10) :]) if losses else math.nan


def titan_figures(
    steps: list[TitanStep],
    warmup: int,
    flops_per_token: int,
    peak_tflops: float | None,
    log_freq: int = 1,
) -> SideFigures:
    """The timed lines are those whose window (the log_freq steps before each) starts after the
    warm-up: every window holds as many tokens, so their rates combine as `harmonic_rate`."""
    timed = [s for s in steps if s.step - log_freq >= warmup] or steps[-1:]
    if not timed:
        raise SideBySideError("torchtitan logged no step: no figure to compare")
    rate = harmonic_rate([s.tps for s in timed])
    tflops = rate * flops_per_token / 1e12
    own = [s.mfu_percent for s in timed if s.mfu_percent is not None]
    losses = [s.loss for s in steps]
    return SideFigures(
        tokens_per_second=rate,
        tflops=tflops,
        mfu=tflops / peak_tflops if peak_tflops else None,
        peak_memory_gib=max(s.memory_gib for s in steps),
        final_loss=tail_mean(losses),
        losses=losses,
        own_mfu=statistics.fmean(own) / 100 if own else None,
    )


def ratio(ours: float | None, theirs: float | None) -> float | None:
    """gpuaccept over torchtitan; None where either is missing, not finite, or theirs is 0."""
    if ours is None or theirs is None or not math.isfinite(ours) or not math.isfinite(theirs):
        return None
    return ours / theirs if theirs else None


ROWS = [
    ("tokens/s per rank", "tokens_per_second", ",.0f"),
    ("TFLOPS per rank", "tflops", ".4f"),
    ("MFU", "mfu", ".1%"),
    ("peak memory GiB", "peak_memory_gib", ".2f"),
    ("final loss", "final_loss", ".3f"),
]


def table(ours: SideFigures, theirs: SideFigures) -> list[str]:
    """The side-by-side table in Markdown: each figure, both sides and their ratio."""

    def fmt(value: float | None, spec: str) -> str:
        return "-" if value is None or not math.isfinite(value) else format(value, spec)

    lines = ["| figure | gpuaccept | torchtitan | gpuaccept / torchtitan |", "|---|---|---|---|"]
    for label, name, spec in ROWS:
        a, b = getattr(ours, name), getattr(theirs, name)
        lines.append(f"| {label} | {fmt(a, spec)} | {fmt(b, spec)} | {fmt(ratio(a, b), '.3f')} |")
    return lines


# ---------------------------------------------------------------------------------------------
# running a side, with its processes' resident peak


class TreePeak:
    """The largest peak resident set (VmHWM) of any process under `root`, read from /proc every
    0.2 s while it runs: a CPU has no allocator peak, and the ranks are grandchildren (torchrun's,
    gpuaccept's forkserver's) that a parent's rusage may never see."""

    def __init__(self, root: int) -> None:
        self.root = root
        self.peak_kib = 0
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)
        self._thread.start()

    def _children(self) -> dict[int, list[int]]:
        tree: dict[int, list[int]] = {}
        for entry in os.scandir("/proc"):
            if not entry.name.isdigit():
                continue
            try:
                stat = Path(entry.path, "stat").read_text()
            except OSError:
                continue
            parent = int(stat.rsplit(")", 1)[1].split()[1])
            tree.setdefault(parent, []).append(int(entry.name))
        return tree

    def _watch(self) -> None:
        while not self._done.is_set():
            tree = self._children()
            todo = [self.root]
            while todo:
                pid = todo.pop()
                todo.extend(tree.get(pid, []))
                try:
                    status = Path(f"/proc/{pid}/status").read_text()
                except OSError:
                    continue
                found = re.search(r"VmHWM:\s*(\d+)\s*kB", status)
                if found:
                    self.peak_kib = max(self.peak_kib, int(found[1]))
            self._done.wait(0.2)

    def stop(self) -> float:
        self._done.set()
        self._thread.join(timeout=5)
        return self.peak_kib / 1024**2


def run_logged(
    command: list[str], env: dict[str, str], log: Path, limit: float, cwd: Path = REPO
) -> tuple[int | None, float, float]:
    """(exit code or None when past the limit, seconds, the largest process's peak RSS GiB)."""
    started = time.perf_counter()
    with log.open("w") as out:
        process = subprocess.Popen(
            command,
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
            cwd=cwd,
            start_new_session=True,
        )
        peak = TreePeak(process.pid)
        try:
            code: int | None = process.wait(timeout=limit)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, 15)
            process.wait()
            code = None
        finally:
            rss = peak.stop()
    return code, time.perf_counter() - started, rss


@dataclass(frozen=True)
class RunShape:
    """What both sides run: the shapes, the batch per rank, and how."""

    dim: int
    vocab: int
    layers: int
    heads: int
    kv_heads: int
    ffn_dim: int
    seq_len: int
    rope_theta: float
    steps: int
    warmup: int
    local_batch: int
    learning_rate: float
    precision: str  # fp32 | bf16
    checkpointing: str  # none | full | selective-op (torchtitan's SelectiveAC on its side)
    seed: int
    ranks: int


def titan_spec(
    shape: RunShape, loss: str, attention: str, compiled: bool, log_freq: int = 1
) -> dict[str, Any]:
    """What titan_launch.py reads from GPUACCEPT_TT_SPEC."""
    spec = asdict(shape)
    spec.update(loss=loss, attention=attention, compile=compiled, log_freq=log_freq)
    return spec


def run_titan(
    python: Path,
    shape: RunShape,
    *,
    gpu: bool,
    loss: str,
    attention: str,
    peak_flops: float | None,
    threads: int,
    work: Path,
    limit: float,
    compiled: bool = False,
    log_freq: int = 1,
) -> tuple[str, float, float, str | None]:
    """torchtitan's rank-0 log, its seconds, the largest process's peak RSS (GiB), and what went
    wrong after its last step, if anything did (said in the record, not hidden)."""
    name = f"titan-{loss}-{attention}{'-compiled' if compiled else ''}-log{log_freq}"
    log = work / f"{name}.log"
    env = dict(os.environ)
    env.update(
        GPUACCEPT_TT_SPEC=json.dumps(titan_spec(shape, loss, attention, compiled, log_freq)),
        GPUACCEPT_TT_DEVICE="cuda" if gpu else "cpu",
        PYTHONPATH=os.pathsep.join([str(LAUNCHER.parent), str(REPO / "src")]),
        OMP_NUM_THREADS=str(threads),
    )
    if peak_flops:
        env["GPUACCEPT_TT_PEAK_FLOPS"] = repr(peak_flops)
    torchrun = python.parent / "torchrun"
    ranks = work / f"{name}-ranks"  # every rank's output (the console shows rank 0's)
    command = [
        str(torchrun), "--standalone", f"--nproc-per-node={shape.ranks}",
        "--local-ranks-filter=0", "--log-dir", str(ranks), "--tee", "3", str(LAUNCHER),
        "--module", "titan_launch", "--config", "gpuaccept_side",
        "--dump_folder", str(work / f"{name}-out"),
    ]  # fmt: skip
    code, seconds, rss = run_logged(command, env, log, limit)
    text = log.read_text(errors="replace")
    if code == 0:
        return text, seconds, rss, None
    why = "ran past --limit" if code is None else f"exit {code}"
    said = f"{titan_failure_line(text)}{_other_ranks_said(ranks)}"
    logged = parse_titan_log(text)
    if code is not None and logged and logged[-1].step >= shape.steps:
        # every step trained and logged; a rank died in the teardown after it (torchtitan's and
        # gloo's, on the CPU): the figures are the log's, and the record says what happened
        return text, seconds, rss, f"torchtitan {why} after its last step, in its teardown: {said}"
    raise SideBySideError(f"torchtitan failed ({why}): {said}; log {log}")


def _other_ranks_said(ranks: Path) -> str:
    """The last line of each other rank's error output, where torchrun kept it (--log-dir)."""
    said = []
    for stderr in sorted(ranks.glob("**/attempt_*/[1-9]*/stderr.log")):
        lines = [line for line in stderr.read_text(errors="replace").splitlines() if line.strip()]
        if lines:
            said.append(f"rank {stderr.parent.name}: {lines[-1].strip()[:200]}")
    return "".join(f"; {line}" for line in said)


def run_gpuaccept(
    flags: list[str], *, gpu: bool, threads: int, work: Path, limit: float, name: str
) -> tuple[dict[str, Any], float, float]:
    """`gpuaccept train llm FLAGS`: its report's check (as JSON), its seconds and the largest
    process's peak RSS (GiB)."""
    reports = work / f"gpuaccept-{name}"
    log = reports.with_suffix(".log")
    command = [
        sys.executable, "-m", "gpuaccept", "train", "llm", *flags,
        "--device", "cuda" if gpu else "cpu", "--log-every", "0",
        "--no-history", "--report-dir", str(reports),
    ]  # fmt: skip
    env = dict(os.environ, OMP_NUM_THREADS=str(threads))
    code, seconds, rss = run_logged(command, env, log, limit)
    found = sorted(reports.glob("*.json")) if reports.is_dir() else []
    if code not in (0, 1) or not found:
        tail = log.read_text(errors="replace").strip().splitlines() or ["no output"]
        why = "ran past --limit" if code is None else f"exit {code}"
        raise SideBySideError(f"gpuaccept train llm failed ({why}): {tail[-1][:300]}; log {log}")
    check: dict[str, Any] = json.loads(found[-1].read_text())["checks"][0]
    return check, seconds, rss


def gpuaccept_figures(
    check: dict[str, Any], peak_tflops: float | None, rss_gib: float | None
) -> SideFigures:
    """The report's figures (timed steps, mean over ranks) as a side of the table."""
    figures = {m["name"]: m["value"] for m in check["measurements"]}

    def pick(suffix: str) -> Any:
        return next((v for k, v in figures.items() if k.endswith(suffix)), None)

    rate, tflops = pick("tokens_per_second_per_gpu"), pick("tflops_per_gpu")
    if rate is None or tflops is None:
        raise SideBySideError(f"gpuaccept's run measured no speed: {check.get('message')}")
    allocated = figures.get("llm_peak_memory_gib")
    losses = list(check["details"].get("losses") or [])
    return SideFigures(
        tokens_per_second=rate,
        tflops=tflops,
        mfu=tflops / peak_tflops if peak_tflops else pick("_mfu"),
        peak_memory_gib=allocated if allocated is not None else rss_gib,
        final_loss=figures.get("llm_final_loss", tail_mean(losses)),
        losses=losses,
    )
