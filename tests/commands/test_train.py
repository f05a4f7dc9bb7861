"""`train mnist` and `train llm` called as a library (`gpuaccept.commands.train_mnist.run`,
`gpuaccept.commands.train_llm.run`), without Typer: a small run is trained, judged and written,
a missed target is exit 1 with the report still written, and a bad request is one line before
any work."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from gpuaccept.commands.output import Collected
from gpuaccept.commands.train_llm import TrainLlmRequest
from gpuaccept.commands.train_llm import run as run_llm
from gpuaccept.commands.train_mnist import TrainMnistRequest
from gpuaccept.commands.train_mnist import run as run_mnist
from gpuaccept.errors import InputError
from gpuaccept.results import Status
from tests.cpu_turns import cpu_turn
from tests.llm.test_cli_llm import not_warned_but_for_stragglers


@pytest.fixture(scope="module")
def digits(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Generated MNIST-format digits (tests/mnist/conftest.py's kind), few enough to train on in
    a second: these tests judge the command, not the accuracy."""
    from gpuaccept.mnist.synthetic import write_mnist_files

    directory = tmp_path_factory.mktemp("digits")
    write_mnist_files(directory, 1024, 256, seed=0)
    return directory


def _mnist(digits: Path, **values: object) -> TrainMnistRequest:
    return replace(TrainMnistRequest(data=digits, model="lenet", epochs=1, device="cpu"), **values)


@pytest.mark.slow
def test_mnist_trains_passes_and_is_written_and_recorded(digits: Path, tmp_path: Path) -> None:
    out = Collected()
    history = tmp_path / "history.sqlite"
    result = run_mnist(
        _mnist(digits, seed=1, report_dir=tmp_path / "reports", history=str(history)), out
    )
    said = out.text()
    assert result.exit_code == 0, said
    assert result.report is not None
    (check, compared) = result.report.checks  # the training, and the node's history (its first)
    assert (check.name, check.status) == ("mnist", Status.PASS)
    assert (compared.name, compared.status) == ("history", Status.SKIP)
    assert said.startswith("[TRAIN] mnist --model lenet: 1024 train / 256 test images from ")
    assert "[TRAIN] epoch   1/1  loss " in said
    [written] = (tmp_path / "reports").glob("gpuaccept-train-mnist-*.json")
    assert f"[REPORT] {written}\n" in said
    assert json.loads(written.read_text())["verdict"]["outcome"] == "pass"
    assert f"[HISTORY] run 1 recorded in {history}\n" in said
    assert said.splitlines()[-1].startswith("[RESULT] SUCCESS in CPU mode"), said
    assert out.text("err") == ""


@pytest.mark.slow
def test_mnist_below_its_target_is_exit_1_and_still_written(digits: Path, tmp_path: Path) -> None:
    out = Collected()
    # a learning rate of zero leaves the model at chance: a deterministic miss
    request = _mnist(
        digits, learning_rate=0.0, target_accuracy=50, report_dir=tmp_path, no_history=True
    )
    result = run_mnist(request, out)
    assert result.exit_code == 1, out.text()
    assert result.report is not None
    assert result.report.checks[0].status == Status.FAIL
    assert "below the target 50.00%" in out.text()
    [written] = tmp_path.glob("*.json")
    assert json.loads(written.read_text())["verdict"]["outcome"] == "fail"


@pytest.mark.parametrize(
    ("values", "line"),
    [
        ({"model": "resnet"}, "--model must be one of fast, lenet (got 'resnet')"),
        (
            {"target_accuracy": 150.0},
            "--target-accuracy must be in (0, 1] or (1, 100] percent (got 150)",
        ),
        ({"checkpoint_exit_code": 85}, "--checkpoint-exit-code needs --checkpoint"),
    ],
)
def test_mnist_refuses_a_bad_request_in_one_line_before_any_work(
    values: dict[str, object], line: str, tmp_path: Path
) -> None:
    out = Collected()
    request = replace(TrainMnistRequest(device="cpu", report_dir=tmp_path / "reports"), **values)
    with pytest.raises(InputError) as refused:
        run_mnist(request, out)
    assert str(refused.value) == line
    assert out.lines == []
    assert not (tmp_path / "reports").exists()  # refused before any output was made


def test_mnist_without_data_names_where_it_looked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(InputError, match=r"^no MNIST data: pass --data .*\./MNIST_data\.tar\.gz"):
        run_mnist(TrainMnistRequest(device="cpu", no_history=True), Collected())


@pytest.mark.slow
def test_llm_tiny_short_run_trains_and_passes_without_judging_convergence(
    tmp_path: Path,
) -> None:
    out = Collected()
    request = TrainLlmRequest(
        preset="tiny", steps=30, log_every=10, device="cpu", report_dir=tmp_path, no_history=True
    )
    with cpu_turn():  # the twin's 2 ranks keep both cores busy
        result = run_llm(request, out)
    said = out.text()
    assert result.exit_code == 0, said
    assert result.report is not None
    assert result.report.verdict.outcome == "pass"
    [check] = result.report.checks
    assert check.name == "workload"
    # a straggler warning says how 2 shared cores were shared out (tests/llm/test_cli_llm.py)
    assert not_warned_but_for_stragglers(check.model_dump(mode="json")), check.message
    assert check.details["convergence_judged"] is False  # 30 steps: a changed run
    assert check.status == Status.WARN or "convergence NOT JUDGED" in check.message
    assert said.startswith("[TRAIN] llm tiny: 2 layers, ")
    assert "; 2 gloo rank(s)\n" in said
    steps = [line.split(":")[0] for line in said.splitlines() if line.startswith("[TRAIN] step ")]
    assert steps == ["[TRAIN] step 10/30", "[TRAIN] step 20/30", "[TRAIN] step 30/30"]
    [written] = tmp_path.glob("gpuaccept-train-llm-*.json")
    assert json.loads(written.read_text())["verdict"]["outcome"] == "pass"
    assert said.splitlines()[-1].startswith("[RESULT] SUCCESS in CPU mode"), said


@pytest.mark.parametrize(
    ("values", "line"),
    [
        ({"preset": "70b"}, "--preset must be auto, tiny, 1b or 8b (got '70b')"),
        (
            {"checkpointing": "some"},
            "--checkpointing must be none, full, selective-op (torchtitan's selective, per "
            "operator) or selective-layer-N (every Nth block whole) (got 'some')",
        ),
        ({"learning_rate": float("nan")}, "--lr must be a finite number (got nan)"),
    ],
)
def test_llm_refuses_a_bad_request_in_one_line_before_any_work(
    values: dict[str, object], line: str, tmp_path: Path
) -> None:
    out = Collected()
    request = replace(TrainLlmRequest(device="cpu", report_dir=tmp_path / "reports"), **values)
    with pytest.raises(InputError) as refused:
        run_llm(request, out)
    assert str(refused.value) == line
    assert out.lines == []
    assert not (tmp_path / "reports").exists()


def test_a_layer_policy_that_checkpoints_no_block_is_refused_before_training(
    tmp_path: Path,
) -> None:
    """selective-layer-5 on the twin's 2 layers checkpoints nothing: refused, nothing written."""
    request = TrainLlmRequest(
        device="cpu", checkpointing="selective-layer-5", no_history=True, report_dir=tmp_path
    )
    with pytest.raises(InputError, match="selective-layer-5 on 2 layers checkpoints no block"):
        run_llm(request, Collected())
    assert list(tmp_path.iterdir()) == []
