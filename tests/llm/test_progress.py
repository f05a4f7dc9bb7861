"""The training log's lines: units, MFU where a peak is known, and what a CPU line means."""

from __future__ import annotations

import json
from pathlib import Path

from gpuaccept.llm.progress import progress_line

STEP = {
    "step": 9,
    "steps": 60,
    "loss": 4.25,
    "grad_norm": 1.5,
    "tokens_per_second": 25_000.0,
    "step_seconds_min": 0.15,
    "step_seconds_median": 0.16,
    "step_seconds_max": 0.2,
    "memory_active_bytes": 30 * 1024**3,
    "memory_reserved_bytes": 32 * 1024**3,
}


def test_a_gpu_line_has_every_figure_with_its_unit() -> None:
    line = progress_line(json.dumps(STEP), 7_000_000_000, 989.0, cpu=False)
    assert line == (
        "[TRAIN] step 10/60: loss 4.250 nats, grad norm 1.500, 25,000 tokens/s per GPU, "
        "175.00 TFLOPS per GPU, MFU 17.7%, memory 30.0 GiB active, 32.0 GiB reserved, "
        "step 150/160/200 ms min/median/max since the last line"
    )
    unknown = progress_line(json.dumps(STEP), 7_000_000_000, None, cpu=False)
    assert unknown is not None
    assert "MFU unknown (no peak for this GPU)" in unknown


def test_a_cpu_line_says_what_its_figures_mean_there() -> None:
    cpu = {k: v for k, v in STEP.items() if not k.startswith("memory")}
    line = progress_line(json.dumps(cpu), 7_000_000_000, None, cpu=True)
    assert line is not None
    assert "tokens/s per rank" in line
    assert "(CPU twin: no GPU peak, no MFU)" in line
    assert "memory not tracked on the CPU" in line


def test_a_line_cut_short_is_skipped() -> None:
    assert progress_line('{"step": 3, "lo', 1, None, cpu=True) is None
    assert progress_line("", 1, None, cpu=True) is None


def test_the_step_log_gives_the_spread_of_the_steps_since_its_last_line(tmp_path: Path) -> None:
    """Every `log_every` steps and the last: min, median and max of the steps since the line
    before (an even count's median is the mean of the middle two, not the larger)."""
    import dataclasses

    import torch

    from gpuaccept.llm.train import _StepLog
    from tests.llm.helpers import short

    path = tmp_path / "steps.jsonl"
    spec = dataclasses.replace(short(), log_every=2, log_file=str(path))
    log = _StepLog(spec, torch.device("cpu"))
    seconds = [4.0, 1.0, 3.0]
    for step in range(3):
        log.step(step, 3, 5.0 - step, torch.tensor(0.5), seconds[: step + 1])
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert [line["step"] for line in lines] == [1, 2]  # the second step, then the last
    assert (lines[0]["step_seconds_min"], lines[0]["step_seconds_max"]) == (1.0, 4.0)
    assert lines[0]["step_seconds_median"] == 2.5
    assert lines[0]["grad_norm"] == 0.5
    assert lines[0]["tokens_per_second"] == spec.local_batch * spec.shape.seq_len / 1.0
    assert "memory_active_bytes" not in lines[0]  # not tracked on the CPU
