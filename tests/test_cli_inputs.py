"""Inputs a user can get wrong, end to end: each is one line on stderr with exit 2 (never a
traceback, never a hang), and special files given as inputs are refused rather than read."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

NO_GPU = {"CUDA_VISIBLE_DEVICES": "", "GPUACCEPT_NVML_MODULE": "tests.no_nvml_here"}


def gpuaccept(
    *args: str, extra_env: dict[str, str] | None = None, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in {"WORLD_SIZE", "SLURM_GPUS_ON_NODE"}}
    return subprocess.run(
        [sys.executable, "-m", "gpuaccept", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        env=env | NO_GPU | (extra_env or {}),
    )


def one_line_error(done: subprocess.CompletedProcess[str], code: int, *fragments: str) -> None:
    assert done.returncode == code, done.stdout + done.stderr
    assert "Traceback" not in done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    for fragment in fragments:
        assert fragment in lines[0]


ACCEPT = ("accept", "--device", "cpu", "--level", "quick", "--only", "inventory", "--no-history")


def test_a_slurm_gpu_count_in_superscript_is_refused() -> None:
    done = gpuaccept(*ACCEPT, extra_env={"SLURM_GPUS_ON_NODE": "\u00b2"})
    one_line_error(done, 2, "SLURM_GPUS_ON_NODE", "not a GPU count")


def test_a_baseline_nested_100000_deep_is_refused(tmp_path: Path) -> None:
    deep = tmp_path / "deep.toml"
    deep.write_text("a = " + "[" * 100_000 + "]" * 100_000 + "\n")
    one_line_error(gpuaccept(*ACCEPT, "--baseline", str(deep)), 2, str(deep))


@pytest.mark.parametrize("flag", ["--baseline", "--history"])
def test_a_fifo_given_as_an_input_file_is_refused_not_read(tmp_path: Path, flag: str) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    args = [a for a in ACCEPT if a != "--no-history"] if flag == "--history" else list(ACCEPT)
    one_line_error(gpuaccept(*args, flag, str(fifo), timeout=60), 2, "FIFO")


def test_a_fifo_as_the_condor_job_ad_does_not_hang_env(tmp_path: Path) -> None:
    fifo = tmp_path / "job.ad"
    os.mkfifo(fifo)
    done = gpuaccept("env", "--json", extra_env={"_CONDOR_JOB_AD": str(fifo)}, timeout=60)
    assert done.returncode == 0, done.stderr


def test_a_sweep_too_large_for_memory_is_one_line() -> None:
    done = gpuaccept("bench", "membw", "--device", "cpu", "-b", "1000G", "-e", "1000G")
    one_line_error(done, 2, "do not fit in memory")


def test_a_seed_too_large_is_refused_before_training() -> None:
    done = gpuaccept("train", "mnist", "--device", "cpu", "--seed", "20000000000000")
    one_line_error(done, 2, "--seed")


def test_env_never_prints_pythons_none() -> None:
    done = gpuaccept("env")
    assert done.returncode == 0, done.stderr
    assert "None" not in done.stdout
    assert "CUDA none" in done.stdout


def test_history_list_on_a_new_machine_is_an_empty_list(tmp_path: Path) -> None:
    done = gpuaccept("history", "list", "--history", str(tmp_path / "new" / "h.sqlite"))
    assert done.returncode == 0, done.stderr
    assert "no runs recorded" in done.stdout
    assert not (tmp_path / "new").exists()  # listing creates nothing


@pytest.mark.parametrize(
    "command",
    [
        ["bench", "membw", "--device", "cpu", "-b", "1M", "-e", "1M", "--json"],
        ["bench", "membw", "--device", "cpu", "-b", "1M", "-e", "1M", "--csv"],
        ["train", "mnist", "--device", "cpu", "--data", ".", "--save-model"],
        ["train", "mnist", "--device", "cpu", "--data", ".", "--checkpoint"],
        ["env", "--output"],
        ["accept", "--device", "cpu", "--level", "quick", "--junit"],
    ],
)
def test_an_output_that_cannot_be_written_is_refused_before_any_work(
    tmp_path: Path, command: list[str]
) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("in the way")
    started = time.monotonic()
    extra = [] if command[0] == "env" else ["--no-history"]
    done = gpuaccept(*command, str(blocker / "out.json"), *extra)
    one_line_error(done, 2, "a parent of it is a file")
    assert time.monotonic() - started < 30  # refused up front, not after the run
    assert blocker.read_text() == "in the way"


@pytest.mark.parametrize("redirect", [">&-", "> /dev/full"])
def test_a_closed_or_full_stdout_is_one_line_on_stderr(redirect: str) -> None:
    done = subprocess.run(
        ["bash", "-c", f'"{sys.executable}" -m gpuaccept env {redirect}'],
        capture_output=False,
        stderr=subprocess.PIPE,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 2
    assert "Traceback" not in done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert "cannot write output" in line


@pytest.mark.parametrize(
    "command",
    [["history", "import"], ["train", "mnist", "--device", "cpu", "--data"], ["report"]],
)
def test_paths_that_are_not_utf8_are_named_not_crashed_on(
    tmp_path: Path, command: list[str]
) -> None:
    odd = os.fsencode(tmp_path) + b"/\xff\xfe-report.json"
    done = subprocess.run(
        [sys.executable, "-m", "gpuaccept", *command, odd],
        capture_output=True,
        timeout=120,
        check=False,
        env=os.environ | NO_GPU,
    )
    stderr = done.stderr.decode("utf-8", "replace")
    assert done.returncode == 2, stderr
    assert "Traceback" not in stderr
    assert len(stderr.strip().splitlines()) == 1


@pytest.mark.parametrize(
    ("command", "option", "value"),
    [
        (["accept"], "--check-timeout", "nan"),
        (["accept"], "--min-busbw", "NaN"),
        (["accept"], "--rails-tolerance", "nan"),
        (["bench", "collectives"], "--min-busbw", "nan"),
    ],
)
def test_nan_for_a_ranged_number_says_it_is_not_a_number(
    command: list[str], option: str, value: str
) -> None:
    """Typer 0.29 checks the range first: NaN read "Input should be greater than or equal to 1"."""
    done = gpuaccept(*command, option, value)
    one_line_error(done, 2, f"'{option}'", f"must be a number (got {value})")
    assert "Input should be" not in done.stderr


@pytest.mark.parametrize("command", [["train", "mnist"], ["train", "llm"], ["bench", "matmul"]])
def test_every_device_option_is_one_choice_refused_by_the_parser(command: list[str]) -> None:
    """train and bench took --device as text and refused it later in words of their own (train
    mnist asked for its data first): now the one choice accept and burnin take."""
    done = gpuaccept(*command, "--device", "gpu")
    one_line_error(done, 2, "'--device'", "'gpu' is not one of 'auto', 'cuda', 'cpu'")


@pytest.mark.parametrize(
    ("command", "said"),
    [
        (["train", "llm", "--steps", "1"], "'--steps': must be at least 2 (got 1)"),
        (["history", "fleet", "--page", "0"], "'--page': must be at least 1 (got 0)"),
        (
            ["accept", "--rails-tolerance", "120"],
            "'--rails-tolerance': must be at most 99 (got 120)",
        ),
        (["history", "list", "--limit", "2000000"], "must be at most 1,000,000 (got 2000000)"),
    ],
)
def test_a_number_out_of_its_range_names_the_bound_and_the_value(
    command: list[str], said: str
) -> None:
    """Typer 0.29 words a range through pydantic: "Input should be greater than or equal to 2",
    naming no value; said as the other refusals are."""
    one_line_error(gpuaccept(*command), 2, said)
