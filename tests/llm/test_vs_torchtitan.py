"""benchmarks/llm_vs_torchtitan.py beside torchtitan (issue #52 §3), without torchtitan: its log
parser on a real torchtitan 0.3.0 log (tests/llm/data, 2 gloo ranks on the CPU), the figures and
ratios it prints, the tokens torchtitan's side is fed, and its refusals (one line, non-zero,
nothing written). The run against a real torchtitan venv is the service test at the end."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
LOG = Path(__file__).with_name("data") / "torchtitan-0.3.0-cpu-tiny.log"
BENCHMARK = REPO / "benchmarks" / "llm_vs_torchtitan.py"


@pytest.fixture(scope="module")
def ts() -> Iterator[Any]:
    sys.path.insert(0, str(REPO / "benchmarks"))
    try:
        import titan_side

        yield titan_side
    finally:
        sys.path.remove(str(REPO / "benchmarks"))


def test_the_parser_reads_every_step_of_a_real_torchtitan_log(ts: Any) -> None:
    steps = ts.parse_titan_log(LOG.read_text())
    assert [s.step for s in steps] == list(range(1, 41))
    first, last = steps[0], steps[-1]
    # the log's own lines, as printed (components/metrics.py:540-549 of torchtitan 0.3.0)
    assert (first.loss, first.grad_norm, first.memory_gib, first.tps) == (
        6.01538,
        0.4031,
        0.57,
        611,
    )
    assert first.mfu_percent == 0.43
    assert last.step == 40
    assert last.loss < 3.4
    assert last.tps > 1000


def test_colour_codes_and_a_second_ranks_copy_of_a_line_are_read_once(ts: Any) -> None:
    line = (
        "step:  7  loss:  3.77592  grad_norm:  0.6833  memory:  0.57GiB(2.43%)  "
        "tps: 3,975  tflops: 0.00  mfu: N/A"
    )
    coloured = "\x1b[31m" + line.replace("loss", "\x1b[32mloss") + "\x1b[39m"
    other_rank = line.replace("tps: 3,975", "tps: 9,999")
    steps = ts.parse_titan_log("\n".join([coloured, other_rank, "noise"]))
    assert len(steps) == 1
    assert steps[0].tps == 3975
    assert steps[0].mfu_percent is None


def test_tokens_per_second_is_the_tokens_over_the_summed_time_after_the_warm_up(
    ts: Any,
) -> None:
    # two steps at 1,000 and 3,000 tokens/s take 1 s and 1/3 s for 1,000 tokens each: 1,500
    assert ts.harmonic_rate([1000.0, 3000.0]) == pytest.approx(1500.0)
    steps = ts.parse_titan_log(LOG.read_text())
    figures = ts.titan_figures(steps, 5, 786_432, 0.113)
    timed = [s.tps for s in steps[5:]]
    assert figures.tokens_per_second == pytest.approx(len(timed) / sum(1 / t for t in timed))
    # the first step (611 tokens/s: start-up) is not in it
    assert figures.tokens_per_second > 3000
    assert figures.tflops == pytest.approx(figures.tokens_per_second * 786_432 / 1e12)
    assert figures.mfu == pytest.approx(figures.tflops / 0.113)
    assert figures.final_loss == pytest.approx(sum(s.loss for s in steps[-4:]) / 4)


def test_the_ratio_is_gpuaccept_over_torchtitan_and_missing_where_a_side_is(ts: Any) -> None:
    ratio = ts.ratio
    assert ratio(7466.0, 5707.0) == pytest.approx(1.3082, abs=1e-4)
    assert ratio(None, 1.0) is None
    assert ratio(1.0, None) is None
    assert ratio(1.0, 0.0) is None
    assert ratio(math.nan, 1.0) is None
    side = ts.SideFigures
    ours = side(tokens_per_second=200.0, tflops=2.0, mfu=None, peak_memory_gib=1.0, final_loss=3.0)
    theirs = side(tokens_per_second=100.0, tflops=1.0, mfu=0.5, peak_memory_gib=4.0, final_loss=2.0)
    rows = ts.table(ours, theirs)
    assert "| tokens/s per rank | 200 | 100 | 2.000 |" in rows
    assert "| MFU | - | 50.0% | - |" in rows
    assert "| peak memory GiB | 1.00 | 4.00 | 0.250 |" in rows
    assert "| final loss | 3.000 | 2.000 | 1.500 |" in rows


def test_torchtitans_side_is_fed_the_tokens_gpuaccepts_ranks_train_on(ts: Any) -> None:
    from dataclasses import replace

    import torch

    from gpuaccept.llm.plans import llm_spec
    from gpuaccept.llm.train import _batches

    spec = replace(llm_spec("tiny", "fp32"), steps=6, local_batch=3, seed=2)
    for rank in (0, 1):
        ours = _batches(spec, rank, 2, torch.device("cpu"))
        theirs = ts.rank_tokens(2, rank, 2, 6, 3, spec.shape.seq_len)
        assert torch.equal(ours, theirs)
    assert not torch.equal(ts.rank_tokens(2, 0, 2, 6, 3, 64), ts.rank_tokens(2, 1, 2, 6, 3, 64))


def test_a_failing_torchtitan_is_named_by_its_last_error_line(ts: Any) -> None:
    text = "\n".join(
        [
            "[rank0]: Traceback (most recent call last):",
            "[rank0]:     work.wait()",
            "[rank0]: RuntimeError: Cannot use ReduceOp.PREMUL_SUM with Gloo",
            "E1129 00:56:10 torch/distributed/elastic/multiprocessing/api.py failed (exitcode: 1)",
            "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: ",
        ]
    )
    line = ts.titan_failure_line(text)
    assert line == "[rank0]: RuntimeError: Cannot use ReduceOp.PREMUL_SUM with Gloo"


def test_a_directory_without_torchtitan_is_refused_and_left_as_it_is(
    ts: Any, tmp_path: Path
) -> None:
    venv = tmp_path / "not-a-venv"
    venv.mkdir()
    (venv / "keep").write_text("mine")
    with pytest.raises(ts.SideBySideError) as refused:
        ts.ensure_venv(venv, "2.13.0", False, say=lambda line: None)
    assert refused.value.exit_code == 2
    assert "holds no torchtitan, not 0.3.0 (left as it is)" in str(refused.value)
    assert sorted(p.name for p in venv.iterdir()) == ["keep"]


def test_a_venv_that_cannot_be_made_is_refused_before_any_command(ts: Any, tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    said: list[str] = []
    with pytest.raises(ts.SideBySideError) as refused:
        ts.ensure_venv(blocker / "venv", "2.13.0", False, say=said.append)
    assert refused.value.exit_code == 2
    assert "is not a directory this user may write" in str(refused.value)
    assert said == []
    assert not (blocker / "venv").exists()


def test_a_venv_whose_install_fails_is_removed_and_named_in_one_line(
    ts: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    venv = tmp_path / "venv"

    def commands(where: Path, torch_version: str, gpu: bool) -> list[list[str]]:
        return [
            [sys.executable, "-c", f"import os; os.makedirs({str(where)!r})"],
            [sys.executable, "-c", "import sys; sys.exit('ERROR: No matching distribution')"],
        ]

    monkeypatch.setattr(ts, "venv_commands", commands)
    said: list[str] = []
    with pytest.raises(ts.SideBySideError) as refused:
        ts.ensure_venv(venv, "2.13.0", False, say=said.append)
    assert refused.value.exit_code == 2
    assert str(refused.value).endswith("failed (exit 1): ERROR: No matching distribution")
    assert not venv.exists()
    assert said[0].startswith("[TITAN] making torchtitan's venv")
    assert len(said) == 3


def test_the_venv_commands_pin_torch_first_then_torchtitan(ts: Any, tmp_path: Path) -> None:
    cpu = ts.venv_commands(tmp_path / "v", "2.13.0+cpu", False)
    assert cpu[0] == ["python3", "-m", "venv", str(tmp_path / "v")]
    assert cpu[1][-1] == "torch==2.13.0"
    assert cpu[2][-2:] == ["torchtitan==0.3.0", "triton==3.9.0"]
    gpu = ts.venv_commands(tmp_path / "v", "2.13.0", True)
    assert gpu[2][-1] == "torchtitan==0.3.0"


def _fake_venv(root: Path, torchrun_body: str) -> Path:
    """A venv whose python says torchtitan 0.3.0 and whose torchrun is `torchrun_body`."""
    bin_dir = root / "venv" / "bin"
    bin_dir.mkdir(parents=True)
    python = bin_dir / "python"
    python.write_text(
        '#!/bin/sh\necho \'{"torch": "2.13.0+cpu", "torchtitan": "0.3.0"}\'\n', encoding="utf-8"
    )
    torchrun = bin_dir / "torchrun"
    torchrun.write_text("#!/bin/sh\n" + torchrun_body, encoding="utf-8")
    for script in (python, torchrun):
        script.chmod(0o755)
    return root / "venv"


def _benchmark(args: list[str], tmp_path: Path) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, TMPDIR=str(tmp_path))
    return subprocess.run(
        [sys.executable, str(BENCHMARK), *args],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=REPO,
        env=env,
        check=False,
    )


def test_the_benchmark_refuses_a_venv_without_torchtitan_and_writes_nothing(
    tmp_path: Path,
) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    out = tmp_path / "out" / "result"
    done = _benchmark(["--torchtitan-venv", str(empty), "--out", str(out)], tmp_path)
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1
    assert lines[0].startswith("llm_vs_torchtitan: --torchtitan-venv ")
    assert "Traceback" not in done.stdout + done.stderr
    assert not (tmp_path / "out").exists()


def test_a_torchtitan_that_fails_stops_the_benchmark_in_one_line_and_writes_nothing(
    tmp_path: Path,
) -> None:
    venv = _fake_venv(
        tmp_path,
        'echo "[rank0]: RuntimeError: FlexAttention does not support backward on CPU."\n'
        'echo "torch.distributed.elastic.multiprocessing.errors.ChildFailedError:"\nexit 1\n',
    )
    out = tmp_path / "out" / "result"
    done = _benchmark(["--torchtitan-venv", str(venv), "--steps", "4", "--out", str(out)], tmp_path)
    assert done.returncode == 1
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith(
        "llm_vs_torchtitan: torchtitan failed (exit 1): [rank0]: RuntimeError: FlexAttention"
    )
    assert not (tmp_path / "out").exists()


def test_a_torchtitan_that_logs_no_step_is_refused_not_compared(tmp_path: Path) -> None:
    venv = _fake_venv(tmp_path, "echo 'Training completed'\n")
    out = tmp_path / "out" / "result"
    done = _benchmark(["--torchtitan-venv", str(venv), "--steps", "4", "--out", str(out)], tmp_path)
    assert done.returncode == 1
    assert (
        done.stderr.strip() == "llm_vs_torchtitan: torchtitan logged no step: no figure to compare"
    )
    assert not (tmp_path / "out").exists()


@pytest.mark.service
def test_both_sides_train_the_same_tokens_for_real(tmp_path: Path) -> None:
    """The whole benchmark against a real torchtitan 0.3.0 venv (GPUACCEPT_TORCHTITAN_VENV: it
    takes minutes and a download to make one, so this test does not make it)."""
    venv = os.environ.get("GPUACCEPT_TORCHTITAN_VENV")
    if not venv or not Path(venv, "bin", "torchrun").exists():
        pytest.skip("GPUACCEPT_TORCHTITAN_VENV names no torchtitan venv (see docs/llm.md)")
    out = tmp_path / "result"
    done = _benchmark(
        ["--torchtitan-venv", venv, "--steps", "60", "--variants", "", "--out", str(out)], tmp_path
    )
    assert done.returncode == 0, done.stderr[-2000:]
    record = json.loads(out.with_suffix(".json").read_text())
    ours, theirs = record["gpuaccept"], record["torchtitan"]
    assert len(ours["losses"]) == len(theirs["losses"]) == 60
    # the same tokens and the same schedule: both learn the chain's unigram statistics
    assert abs(ours["final_loss"] - theirs["final_loss"]) < 0.15
    assert record["ratios"]["tokens_per_second"] > 0


@pytest.mark.parametrize(
    ("args", "refusal"),
    [
        (["--variants", "loss,speed"], "--variants takes loss, attention, logging, compile"),
        (["--variants", "attention"], "FlexAttention, which has no backward on the CPU"),
        (["--flags", "--preset tiny --checkpointing selective-layer-2"], "gpuaccept's alone"),
        (["--flags", "--preset tiny --checkpointing sometimes"], "--checkpointing must be"),
        (["--flags", "--preset tiny --steps 1"], "--steps must be at least 2"),
        (["--repeat", "0"], "--repeat must be at least 1 (got 0)"),
    ],
)
def test_a_run_the_two_sides_cannot_share_is_refused_before_any_venv_is_made(
    args: list[str], refusal: str, tmp_path: Path
) -> None:
    venv = tmp_path / "venv"
    done = _benchmark(["--torchtitan-venv", str(venv), *args], tmp_path)
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1
    assert refusal in lines[0]
    assert not venv.exists()


def test_an_out_path_that_cannot_be_written_is_refused_before_any_run(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    venv = tmp_path / "venv"
    done = _benchmark(
        ["--torchtitan-venv", str(venv), "--out", str(blocker / "sub" / "result")], tmp_path
    )
    assert done.returncode == 2
    assert done.stderr.strip() == (
        f"llm_vs_torchtitan: --out {blocker / 'sub' / 'result'}: {blocker} is not a directory "
        "this user may write"
    )
    assert not venv.exists()


def _titan_exiting(ts: Any, tmp_path: Path, steps_logged: int, code: int) -> Any:
    """run_titan against a torchrun stand-in that logs `steps_logged` of 4 steps, leaves rank 1's
    last words where torchrun's --log-dir keeps them, and exits `code`."""
    line = (
        "[titan] step: {n}  loss:  3.30000  grad_norm:  0.2500  memory:  0.58GiB(2.48%)  "
        "tps: 14,000  tflops: 0.01  mfu: 9.50%"
    )
    body = "".join(f"echo '{line.format(n=n)}'\n" for n in range(1, steps_logged + 1))
    venv = _fake_venv(
        tmp_path,
        'while [ "$1" != "--log-dir" ]; do shift; done; logs="$2"\n'
        'mkdir -p "$logs/run_x/attempt_0/1"\n'
        'echo "terminate called after throwing an instance of gloo::IoException" '
        '> "$logs/run_x/attempt_0/1/stderr.log"\n' + body + f"exit {code}\n",
    )
    shape = ts.RunShape(
        dim=64, vocab=256, layers=2, heads=4, kv_heads=4, ffn_dim=128, seq_len=32,
        rope_theta=10000.0, steps=4, warmup=1, local_batch=2, learning_rate=1e-3,
        precision="fp32", checkpointing="none", seed=0, ranks=2,
    )  # fmt: skip
    return ts.run_titan(
        venv / "bin" / "python", shape, gpu=False, loss="plain", attention="sdpa",
        peak_flops=None, threads=1, work=tmp_path, limit=60,
    )  # fmt: skip


def test_a_rank_that_dies_in_the_teardown_after_the_last_step_is_said_not_fatal(
    ts: Any, tmp_path: Path
) -> None:
    # torchtitan 0.3.0 on the CPU: every step trained and logged, then a rank aborted tearing
    # gloo down (a fresh clone's .ci/run, 2026-11-29): the figures are the log's, the note says it
    text, _, _, teardown = _titan_exiting(ts, tmp_path, 4, 1)
    assert len(ts.parse_titan_log(text)) == 4
    assert teardown == (
        "torchtitan exit 1 after its last step, in its teardown: [titan] step: 4  loss:  3.30000"
        "  grad_norm:  0.2500  memory:  0.58GiB(2.48%)  tps: 14,000  tflops: 0.01  mfu: 9.50%; "
        "rank 1: terminate called after throwing an instance of gloo::IoException"
    )


def test_a_rank_that_dies_before_the_last_step_fails_the_run(ts: Any, tmp_path: Path) -> None:
    with pytest.raises(ts.SideBySideError, match=r"torchtitan failed \(exit 1\): .*rank 1: "):
        _titan_exiting(ts, tmp_path, 3, 1)
