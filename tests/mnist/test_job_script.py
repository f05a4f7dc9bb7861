"""tasks/train-mnist.sh under HTCondor's self-checkpointing: exit 85, restart, resume, finish."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from gpuaccept.report.reading import load_report
from tests.job_scripts import run_job, sandbox

# the job script end to end (~11 s on 2 cores): the long runs' step of CI, as the other job
# scripts' (tests/test_job_scripts.py); the resume itself stays in the everyday suite
# (tests/mnist/test_cli_train.py::test_self_checkpointing_resumes_to_the_uninterrupted_result)
pytestmark = pytest.mark.service


@pytest.mark.slow
def test_checkpoint_exit_then_resume_to_a_model(tmp_path: Path, small_tarball: Path) -> None:
    box = sandbox(tmp_path, "train-mnist.sh")
    shutil.copy2(small_tarball, box / "MNIST_data.tar.gz")
    first = run_job(box, "train-mnist.sh", "MNIST_data.tar.gz", "2", "0.5")
    assert first.returncode == 85, first.stdout + first.stderr
    assert (box / "mnist.ckpt").is_file()
    assert not (box / "report.json").exists()  # a checkpoint is not an outcome
    second = run_job(box, "train-mnist.sh", "MNIST_data.tar.gz", "2", "0.5")
    assert second.returncode == 0, second.stdout + second.stderr
    assert "resuming from mnist.ckpt" in second.stdout
    report = load_report(box / "report.json")
    details = report.checks[0].details
    assert [e["epoch"] for e in details["epochs_run"]] == [1, 2]
    assert details["resumed_from_epoch"] == 1
    assert (box / "mnist_cnn.pt").stat().st_size > 0
