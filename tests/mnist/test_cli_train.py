"""`gpuaccept train mnist` in subprocesses: data, gate, model, report, self-checkpoints."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from gpuaccept.mnist.checkpoint import load_model_file
from gpuaccept.results import RunReport, Status

TORCHRUN_TWO_RANKS = [
    sys.executable,
    "-m",
    "torch.distributed.run",
    "--standalone",
    "--nproc-per-node",
    "2",
]


def train(
    *args: str, cwd: Path | None = None, launcher: list[str] | None = None
) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in {"WORLD_SIZE", "RANK", "LOCAL_RANK"}}
    return subprocess.run(
        [
            *(launcher or [sys.executable]),
            "-m",
            "gpuaccept",
            "train",
            "mnist",
            "--device",
            "cpu",
            *args,
        ],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
        env=env,
        cwd=cwd,
    )


def test_tarball_to_model_and_report(tarball: Path, tmp_path: Path) -> None:
    model, reports = tmp_path / "models" / "mnist_cnn.pt", tmp_path / "reports"
    run = train(
        "--data",
        str(tarball),
        "--epochs",
        "2",
        "--save-model",
        str(model),
        "--report-dir",
        str(reports),
        "--target-accuracy",
        "0.9",
        "--seed",
        "7",
    )
    assert run.returncode == 0, run.stderr
    epochs = [line for line in run.stdout.splitlines() if line.startswith("[TRAIN] epoch")]
    assert len(epochs) == 2
    assert "loss" in epochs[0]
    assert "test accuracy" in epochs[0]
    assert "images/s" in epochs[0]
    assert run.stdout.rstrip().endswith(
        "[RESULT] SUCCESS in CPU mode: this ran on the CPU and says nothing of a GPU"
    )

    saved = load_model_file(model)
    assert saved["epoch"] == 2
    assert saved["seed"] == 7
    assert saved["model"] == "fast"
    assert 0.9 <= saved["test_accuracy"] <= 1
    assert len(saved["environment_sha256"]) == 64
    assert set(saved["state_dict"])
    assert all(isinstance(v, torch.Tensor) for v in saved["state_dict"].values())

    (written,) = reports.glob("gpuaccept-train-mnist-*.json")
    report = RunReport.model_validate_json(written.read_text())
    check, compared = report.checks  # the training, and the node's history (a first run)
    assert check.status == Status.PASS
    assert (compared.name, compared.status) == ("history", Status.SKIP)
    assert report.device_mode == "cpu"
    figures = {m.name: m.value for m in check.measurements}
    assert figures["test_accuracy"] == pytest.approx(saved["test_accuracy"] * 100)
    assert figures["images_per_second"] > 0
    assert figures["time_to_target"] > 0
    assert [e["epoch"] for e in check.details["epochs_run"]] == [1, 2]
    assert report.environment["torch"]["version"] == torch.__version__


def test_below_target_exits_1(small_tarball: Path, tmp_path: Path) -> None:
    # A learning rate of zero leaves the model at chance: a deterministic miss.
    run = train(
        "--data",
        str(small_tarball),
        "--epochs",
        "1",
        "--lr",
        "0",
        "--target-accuracy",
        "50",
        "--report-dir",
        str(tmp_path),
    )
    assert run.returncode == 1, run.stderr
    assert "below the target 50.00%" in run.stdout
    assert "[RESULT] FAILURE: mnist" in run.stdout
    (written,) = tmp_path.glob("*.json")
    assert RunReport.model_validate_json(written.read_text()).checks[0].status == Status.FAIL


def test_self_checkpointing_resumes_to_the_uninterrupted_result(
    small_tarball: Path, tmp_path: Path
) -> None:
    common = ["--data", str(small_tarball), "--epochs", "3", "--seed", "2"]
    assert train(*common, "--save-model", str(tmp_path / "straight.pt")).returncode == 0
    checkpoint, codes = tmp_path / "ck.pt", []
    for _ in range(5):  # what HTCondor does: rerun while the job exits with checkpoint_exit_code
        run = train(
            *common,
            "--checkpoint",
            str(checkpoint),
            "--checkpoint-exit-code",
            "85",
            "--save-model",
            str(tmp_path / "resumed.pt"),
        )
        codes.append(run.returncode)
        if run.returncode != 85:
            break
    assert codes == [85, 85, 0]
    assert "resuming from" in run.stdout
    straight = load_model_file(tmp_path / "straight.pt")["state_dict"]
    resumed = load_model_file(tmp_path / "resumed.pt")["state_dict"]
    assert straight.keys() == resumed.keys()
    assert all(torch.equal(straight[k], resumed[k]) for k in straight)


def _error_line(run: subprocess.CompletedProcess[str]) -> str:
    assert run.returncode == 2, (run.stdout, run.stderr)
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1
    assert "Traceback" not in run.stderr
    return lines[0]


def test_missing_default_data(tmp_path: Path) -> None:
    assert "no MNIST data" in _error_line(train(cwd=tmp_path))


def test_hostile_tarball_exits_2_naming_it(tmp_path: Path) -> None:
    import io
    import tarfile

    evil = tmp_path / "MNIST_data.tar.gz"
    with tarfile.open(evil, "w:gz") as archive:
        member = tarfile.TarInfo("../../escape")
        member.size = 3
        archive.addfile(member, io.BytesIO(b"pwn"))
    line = _error_line(train(cwd=tmp_path))  # found as the default ./MNIST_data.tar.gz
    assert "MNIST_data.tar.gz" in line
    assert "'..'" in line


def test_truncated_idx_exits_2_naming_it(flat_dir: Path, tmp_path: Path) -> None:
    import shutil

    data = tmp_path / "data"
    shutil.copytree(flat_dir, data)
    labels = data / "train-labels-idx1-ubyte"
    labels.write_bytes(labels.read_bytes()[:-10])
    line = _error_line(train("--data", str(data)))
    assert "train-labels-idx1-ubyte" in line
    assert "truncated" in line


# `python -m gpuaccept` in a process where `import torch` fails.
_WITHOUT_TORCH = (
    "import runpy, sys; sys.modules['torch'] = None; sys.argv[0] = 'gpuaccept'; "
    "runpy.run_module('gpuaccept', run_name='__main__')"
)


def test_bad_data_and_outputs_are_refused_before_torch_is_imported(
    flat_dir: Path, tmp_path: Path
) -> None:
    """A wrong path or a broken file is refused in a fraction of a second, not after importing
    torch (seconds, more on a GPU node): where torch cannot even be imported, the same one-line
    refusal still comes."""
    import shutil

    truncated = tmp_path / "data"
    shutil.copytree(flat_dir, truncated)
    labels = truncated / "t10k-labels-idx1-ubyte"
    labels.write_bytes(labels.read_bytes()[:-10])
    cases = [
        (["--data", str(tmp_path / "missing")], "no such file"),
        (["--data", str(truncated)], "t10k-labels-idx1-ubyte"),
        (["--data", str(flat_dir), "--save-model", str(tmp_path)], "is a directory"),
    ]
    for args, fragment in cases:
        done = subprocess.run(
            [sys.executable, "-c", _WITHOUT_TORCH, "train", "mnist", "--device", "cpu", *args],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert fragment in _error_line(done), args


def test_damaged_checkpoint_exits_2_and_is_kept(small_tarball: Path, tmp_path: Path) -> None:
    damaged = tmp_path / "ck.pt"
    damaged.write_bytes(b"garbage")
    line = _error_line(train("--data", str(small_tarball), "--checkpoint", str(damaged)))
    assert str(damaged) in line
    assert "unreadable" in line
    assert damaged.read_bytes() == b"garbage"


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["--model", "resnet"], "--model must be one of fast, lenet"),
        (["--target-accuracy", "150"], "--target-accuracy must be"),
        (["--target-accuracy", "-1"], "--target-accuracy must be"),
        (["--precision", "fp8"], "--precision must be"),
        (["--checkpoint-exit-code", "85"], "needs --checkpoint"),
        (["--lr", "inf"], "--lr must be a finite number"),
    ],
)
def test_bad_flags_exit_2(small_tarball: Path, args: list[str], fragment: str) -> None:
    # in this process: a flag check needs no fresh interpreter (the root group is the same edge)
    from typer.testing import CliRunner

    from gpuaccept.cli import app

    command = ["train", "mnist", "--device", "cpu", "--data", str(small_tarball), *args]
    result = CliRunner().invoke(app, command)
    assert result.exit_code == 2, result.output
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith("gpuaccept train mnist: error: ")
    assert fragment in line


def test_unwritable_model_path_is_refused_before_training(
    small_tarball: Path, tmp_path: Path
) -> None:
    line = _error_line(train("--data", str(small_tarball), "--save-model", str(tmp_path)))
    assert "is a directory" in line


def test_torchrun_two_cpu_ranks(small_tarball: Path, tmp_path: Path) -> None:
    launcher = TORCHRUN_TWO_RANKS
    run = train(
        "--data",
        str(small_tarball),
        "--model",
        "lenet",
        "--epochs",
        "1",
        "--report-dir",
        str(tmp_path),
        launcher=launcher,
    )
    assert run.returncode == 0, (run.stdout[-2000:], run.stderr[-2000:])
    assert "x 2 ranks" in run.stdout, run.stdout
    assert run.stdout.count("[TRAIN] epoch") == 1  # rank 0 alone prints
    assert len(list(tmp_path.glob("*.json"))) == 1  # and writes


def test_torchrun_ranks_agree_on_a_missed_target(small_tarball: Path, tmp_path: Path) -> None:
    launcher = TORCHRUN_TWO_RANKS
    run = train(
        "--data",
        str(small_tarball),
        "--model",
        "lenet",
        "--epochs",
        "1",
        "--lr",
        "0",
        "--target-accuracy",
        "50",
        launcher=launcher,
    )
    assert run.returncode == 1, (run.stdout[-2000:], run.stderr[-2000:])
    assert "[RESULT] FAILURE: mnist" in run.stdout


def test_a_long_epoch_says_how_far_it_has_got(
    small_tarball: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An epoch took 68 s on the development CPU with nothing printed: now a line at most every
    TRAIN_PROGRESS_SECONDS (here: every step, to see them), none after the last step."""
    from typer.testing import CliRunner

    from gpuaccept.cli import app
    from gpuaccept.commands import train_mnist as train_cli

    monkeypatch.setattr(train_cli, "TRAIN_PROGRESS_SECONDS", 0.0)
    command = ["train", "mnist", "--device", "cpu", "--data", str(small_tarball)]
    result = CliRunner().invoke(app, [*command, "--epochs", "1", "--no-history"])
    assert result.exit_code == 0, result.output
    progress = [line for line in result.stdout.splitlines() if "% of epoch 1/1" in line]
    assert progress
    assert progress[-1] != "[TRAIN] 100% of epoch 1/1"
    percents = [int(line.split("%")[0].rsplit(" ", 1)[1]) for line in progress]
    assert percents == sorted(percents)
    lines = result.stdout.splitlines()
    first_epoch = next(i for i, line in enumerate(lines) if line.startswith("[TRAIN] epoch   1/1"))
    assert lines.index(progress[-1]) < first_epoch  # progress comes before the epoch's line
    # how the steps run is said once, when known, before the first epoch's line
    [mode] = [i for i, line in enumerate(lines) if line.startswith("[TRAIN] training step: ")]
    assert mode < first_epoch


def test_a_signal_whose_exception_was_lost_stops_training_after_the_epoch(
    small_tarball: Path,
) -> None:
    """A SIGTERM whose exception Python lost (raised in a finalizer, seen in CI for accept):
    the handler noted it, and the run stops at the end of the epoch, INTERRUPTED, exit 143."""
    import signal

    from typer.testing import CliRunner

    from gpuaccept import interrupts
    from gpuaccept.cli import app

    command = ["train", "mnist", "--device", "cpu", "--data", str(small_tarball)]
    interrupts.note(signal.SIGTERM)  # as the handler leaves it when its exception is lost
    try:
        result = CliRunner().invoke(app, [*command, "--epochs", "5", "--no-history"])
    finally:
        interrupts.clear()
    assert result.exit_code == 143, result.output
    epochs = [line for line in result.stdout.splitlines() if line.startswith("[TRAIN] epoch")]
    assert len(epochs) == 1  # one epoch ran, not five
    assert "INTERRUPTED by SIGTERM" in result.stdout
