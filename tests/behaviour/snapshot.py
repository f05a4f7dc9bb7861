"""Record what each command does on the CPU twins, to prove a refactor changed nothing.

    python -m tests.behaviour.snapshot record DIR   # before the change
    python -m tests.behaviour.snapshot check DIR    # after it: exits 1 naming every difference
    python -m tests.behaviour.snapshot check DIR accept-quick train-  # only cases named so

Each case runs `python -m gpuaccept ...` in a fresh directory with a fixed environment and keeps
its exit code, stdout, stderr and every file it wrote (reports, history rows as the CLI shows
them). What a run measures differs from run to run on the same machine (seconds, tokens/s,
TFLOP/s, timestamps, run ids, temporary paths), so digits are masked before comparing: the
comparison holds every word, every status, every field name, every line and its order, and
every exit code, byte for byte. The masking is the only thing this does not compare; a change
that moves a figure but not its words is left to the unit tests that check the figures.
"""

from __future__ import annotations

import contextlib
import difflib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

_ROOT = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class Case:
    name: str
    args: tuple[str, ...]


def _cases() -> list[Case]:
    """The commands the design issue names: accept at each level, burnin, train mnist, train llm,
    history and report, each on the CPU; plus one refusal per command family (exit 2's line)."""
    # --drop-tolerance 1000: the CPU twins' figures wander from run to run; which of them drops
    # past a tolerance against the run before is noise, not behaviour
    acc = (
        "accept",
        "--device",
        "cpu",
        "--history",
        "{work}/h.db",
        "--drop-tolerance",
        "1000",
        "--report-dir",
    )
    return [
        Case("accept-quick", (*acc, "{work}/quick", "--level", "quick")),
        Case("accept-standard", (*acc, "{work}/standard", "--level", "standard")),
        Case("accept-full", (*acc, "{work}/full", "--level", "full")),
        Case("accept-quick-json", (*acc, "{work}/qj", "--level", "quick", "--json")),
        Case(
            "accept-only",
            (*acc, "{work}/only", "--only", "inventory", "--only", "stack", "--only", "compute"),
        ),
        Case("accept-bad-level", ("accept", "--device", "cpu", "--level", "huge")),
        Case("accept-bad-baseline", ("accept", "--device", "cpu", "--baseline", "{work}/no.toml")),
        Case(
            "burnin",
            (
                "burnin",
                "--device",
                "cpu",
                "--duration",
                "3s",
                "--window",
                "1s",
                "--history",
                "{work}/h.db",
                "--report-dir",
                "{work}/burnin",
            ),
        ),
        Case("burnin-bad-duration", ("burnin", "--device", "cpu", "--duration", "soon")),
        Case(
            "train-mnist",
            (
                "train",
                "mnist",
                "--device",
                "cpu",
                "--data",
                "{mnist}",
                "--epochs",
                "1",
                "--seed",
                "1",
                "--history",
                "{work}/h.db",
                "--report-dir",
                "{work}/mnist",
            ),
        ),
        Case("train-mnist-bad-model", ("train", "mnist", "--device", "cpu", "--model", "x")),
        Case(
            "train-llm",
            (
                "train",
                "llm",
                "--device",
                "cpu",
                "--history",
                "{work}/h.db",
                "--report-dir",
                "{work}/llm",
            ),
        ),
        Case("history-list", ("history", "list", "--history", "{work}/h.db")),
        Case("history-fleet", ("history", "fleet", "--history", "{work}/h.db")),
        Case("history-fleet-json", ("history", "fleet", "--history", "{work}/h.db", "--json")),
        Case("report-md", ("report", "{report:quick}", "--markdown", "-")),
        Case(
            "report-files",
            (
                "report",
                "{report:standard}",
                "--html",
                "{work}/r.html",
                "--prometheus",
                "{work}/r.prom",
                "--history",
                "{work}/h.db",
            ),
        ),
        Case(
            "report-fleet",
            ("report", "--fleet", "--html", "{work}/fleet.html", "--history", "{work}/h.db"),
        ),
        Case("report-missing", ("report", "{work}/nothing.json")),
        Case("node-verdict", ("node-verdict", "{report:quick}")),
        Case("env-json", ("env", "--json")),
        Case(
            "act-report",
            (
                "act",
                "slurm",
                "{report:quick}",
                "--act",
                "report",
                "--node",
                "snapshot-node",
                "--state",
                "{work}/act-state.json",
                "--record",
                "{work}/act/record.json",
            ),
        ),
        Case(
            "act-breaker-status", ("act", "breaker", "status", "--state", "{work}/act-state.json")
        ),
        Case(
            "bench-matmul",
            (
                "bench",
                "matmul",
                "--device",
                "cpu",
                "--m",
                "64",
                "--n",
                "64",
                "--k",
                "64",
                "-w",
                "1",
                "-n",
                "2",
                "--history",
                "{work}/h.db",
                "--json",
                "{work}/bench/m.json",
            ),
        ),
        Case(
            "bench-membw",
            ("bench", "membw", "--device", "cpu", "-w", "1", "-n", "2", "--no-history"),
        ),
        Case("bench-bad-dims", ("bench", "matmul", "--device", "cpu", "--m", "0")),
    ]


_MASKS = (
    # temporary directories first: they hold digits and random letters
    (re.compile(r"/tmp/[^\s\"',)\]]*"), "<tmp>"),
    (re.compile(r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b"), "<uuid>"),
    (re.compile(r"\b[0-9a-f]{16,64}\b"), "<hex>"),
    (re.compile(r"\d+"), "#"),
)


def mask(text: str, work: Path) -> str:
    text = text.replace(str(work), "<work>").replace(os.uname().nodename, "<host>")
    for pattern, replacement in _MASKS:
        text = pattern.sub(replacement, text)
    return text


_SAME_UNDER_NOISE = (
    # a masked number is one '#' whatever its width or form (1.5, 1,024, 3.1e+05, a long fraction
    # once read as hex); a table's padding and rules widen with the figures in it
    (re.compile(r"[+-]?#(?:[.,#+-]|<hex>|e\+|e-)*"), "#"),
    (re.compile(r"-{3,}"), "---"),
    (re.compile(r"[ \t]{2,}"), " "),
    # a chart embedded in a page is drawn from the figures: its bytes move with them
    (re.compile(r"data:image/png;base64,[A-Za-z0-9+/=#<>]+"), "data:image/png;base64,<chart>"),
    # train mnist says where an epoch is once per TRAIN_PROGRESS_SECONDS of wall time: whether a
    # line comes depends on the machine's load, not on the code
    (re.compile(r"^\[TRAIN\] #% of epoch #/#\n", re.MULTILINE), ""),
    # the checkout's git state is where the code ran from (a worktree, a branch), not what it did
    (re.compile(r'("|&quot;)(branch|dirty|commit|describe)\1: [^,\n]*'), r"\2: <git>"),
)


def comparable(text: str) -> str:
    """The masked text with what measuring noise alone changes made equal (applied to both sides
    of a comparison, so a snapshot recorded before it was added still compares)."""
    for pattern, replacement in _SAME_UNDER_NOISE:
        text = pattern.sub(replacement, text)
    return text


def _mnist_data(into: Path) -> Path:
    sys.path.insert(0, str(_ROOT / "src"))
    from gpuaccept.mnist.synthetic import write_mnist_files

    flat = into / "mnist"
    flat.mkdir()
    write_mnist_files(flat, 2048, 500, seed=0)
    return flat


def _resolved(arg: str, work: Path, mnist: Path) -> str:
    """{work}, {mnist}, and {report:DIR}: the one JSON report an earlier case wrote in DIR."""
    if arg.startswith("{report:"):
        found = sorted((work / arg[len("{report:") : -1]).glob("*.json"))
        return str(found[0]) if found else str(work / "no-report.json")
    return arg.format(work=work, mnist=mnist)


def _drifts_by_metric(value: object) -> object:
    """The history check's drift entries in the order of their metric: they are listed largest
    change first, and which CPU figure moved most is noise; every other list keeps its order."""
    if isinstance(value, dict):
        return {key: _drifts_by_metric(item) for key, item in value.items()}
    if not isinstance(value, list):
        return value
    items = [_drifts_by_metric(item) for item in value]
    drifts = [i for i in items if isinstance(i, dict) and "change" in i and "metric" in i]
    if items and len(drifts) == len(items):
        return sorted(drifts, key=lambda i: (str(i["metric"]), str(i.get("device"))))
    return items


def record(out: Path, only: tuple[str, ...] = ()) -> int:
    out.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="gpuaccept-snapshot-"))
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("GPUACCEPT_", "SLURM"))},
        "HOME": str(work / "home"),
        "GPUACCEPT_NODE_NAME": "snapshot-node",
        "PYTHONPATH": str(_ROOT / "src"),
        "COLUMNS": "120",
        "NO_COLOR": "1",
        "CUDA_VISIBLE_DEVICES": "",
    }
    (work / "home").mkdir()
    mnist = _mnist_data(work)
    try:
        for case in _cases():
            if only and not case.name.startswith(only):
                continue
            args = [_resolved(a, work, mnist) for a in case.args]
            done = subprocess.run(
                [sys.executable, "-m", "gpuaccept", *args],
                cwd=work,
                env=env,
                capture_output=True,
                text=True,
                timeout=900,
                check=False,
            )
            lines = [
                f"$ gpuaccept {' '.join(case.args)}",
                f"exit {done.returncode}",
                "--- stdout",
                mask(done.stdout, work),
                "--- stderr",
                mask(done.stderr, work),
            ]
            (out / f"{case.name}.txt").write_text("\n".join(lines))
            print(f"{case.name}: exit {done.returncode}", flush=True)
        for path in sorted(work.rglob("*")):
            if (
                path.is_file()
                and path.suffix in {".json", ".xml", ".md", ".html", ".prom"}
                and path.relative_to(work).parts[0] != "home"  # caches of libraries
            ):
                rel = path.relative_to(work)
                text = path.read_text(errors="replace")
                if path.suffix == ".json":
                    with contextlib.suppress(ValueError):
                        text = json.dumps(_drifts_by_metric(json.loads(text)), indent=1)
                name = mask("file--" + str(rel).replace("/", "--"), work)
                (out / name).write_text(mask(text, work))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


def check(before: Path, only: tuple[str, ...] = ()) -> int:
    with tempfile.TemporaryDirectory() as after_dir:
        after = Path(after_dir)
        record(after, only)
        names = sorted({p.name for p in before.iterdir()} | {p.name for p in after.iterdir()})
        if only:  # the files a case wrote are named by their directory, not the case: kept out
            names = [n for n in names if n.removesuffix(".txt").startswith(only)]
        differing = 0
        for name in names:
            old = (before / name).read_text() if (before / name).exists() else "<absent>\n"
            new = (after / name).read_text() if (after / name).exists() else "<absent>\n"
            if comparable(old) != comparable(new):
                differing += 1
                sys.stdout.writelines(
                    difflib.unified_diff(
                        comparable(old).splitlines(True),
                        comparable(new).splitlines(True),
                        f"before/{name}",
                        f"after/{name}",
                    )
                )
        print(f"{len(names) - differing} of {len(names)} outputs identical after masking digits")
        return 1 if differing else 0


def main(argv: list[str]) -> int:
    if len(argv) < 2 or argv[0] not in {"record", "check"}:
        print(__doc__, file=sys.stderr)
        return 2
    only = tuple(argv[2:])
    return record(Path(argv[1]), only) if argv[0] == "record" else check(Path(argv[1]), only)


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
