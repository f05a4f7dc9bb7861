"""The train loop: it learns, it is deterministic, a resumed run equals an uninterrupted one, and
two gloo ranks (the CPU twin of multi-GPU DDP) train the same model as one process."""

from __future__ import annotations

import dataclasses
import math
import os
from pathlib import Path
from typing import Any

import pytest
import torch

from gpuaccept.distributed.local_ranks import run_ranks
from gpuaccept.errors import InputError
from gpuaccept.measure.training_smoke import parameter_digest
from gpuaccept.mnist.data import MnistData
from gpuaccept.mnist.model import MODELS
from gpuaccept.mnist.recipes import RECIPES
from gpuaccept.mnist.train import (
    CheckpointPlan,
    TrainConfig,
    TrainOutcome,
    train_mnist,
)

CPU = torch.device("cpu")


def _train(data: MnistData, **config: Any) -> TrainOutcome:
    return train_mnist(
        data, TrainConfig(**({"recipe": RECIPES["fast"], "epochs": 2} | config)), CPU
    )


def _slice(data: MnistData, train: int, test: int) -> MnistData:
    return dataclasses.replace(
        data,
        train_images=data.train_images[:train],
        train_labels=data.train_labels[:train],
        test_images=data.test_images[:test],
        test_labels=data.test_labels[:test],
        sha256=f"{data.sha256}[:{train}, :{test}]",
    )


def test_default_recipe_learns_generated_digits(small_mnist: MnistData) -> None:
    outcome = _train(small_mnist, epochs=3)
    assert [r.epoch for r in outcome.records] == [1, 2, 3]
    assert outcome.final_accuracy >= 0.95  # 0.98 measured; chance is 0.10
    assert outcome.records[-1].loss < outcome.records[0].loss
    assert all(r.images_per_second > 0 and r.epoch_seconds > 0 for r in outcome.records)


def test_the_seeds_lenet_learns_too(small_mnist: MnistData) -> None:
    outcome = _train(small_mnist, recipe=RECIPES["lenet"], epochs=3)
    assert outcome.final_accuracy >= 0.8  # 0.90 measured; the seed's recipe is slow to start


def test_same_seed_same_model_other_seed_other_model(small_mnist: MnistData) -> None:
    data = _slice(small_mnist, 1024, 200)
    first, again = _train(data, epochs=1, seed=3), _train(data, epochs=1, seed=3)
    other = _train(data, epochs=1, seed=4)
    assert parameter_digest(first.model) == parameter_digest(again.model)
    assert parameter_digest(first.model) != parameter_digest(other.model)


class _Evicted(Exception):
    pass


def _evict_after(epoch: int) -> Any:
    def after_checkpoint(written: int) -> None:
        if written == epoch:
            raise _Evicted

    return after_checkpoint


def test_resume_after_eviction_equals_an_uninterrupted_run(
    small_mnist: MnistData, tmp_path: Path
) -> None:
    config = TrainConfig(recipe=RECIPES["fast"], epochs=3, seed=1)
    data = _slice(small_mnist, 1024, 200)
    uninterrupted = train_mnist(data, config, CPU)
    plan = CheckpointPlan(tmp_path / "ck.pt", every_epochs=1)
    with pytest.raises(_Evicted):
        train_mnist(data, config, CPU, checkpoint=plan, after_checkpoint=_evict_after(1))
    with pytest.raises(_Evicted):
        train_mnist(data, config, CPU, checkpoint=plan, after_checkpoint=_evict_after(2))
    resumed = train_mnist(data, config, CPU, checkpoint=plan)
    assert resumed.resumed_from_epoch == 2
    assert resumed.checkpoints_written == [3]
    assert parameter_digest(resumed.model) == parameter_digest(uninterrupted.model)
    assert [(r.loss, r.test_accuracy) for r in resumed.records] == [
        (r.loss, r.test_accuracy) for r in uninterrupted.records
    ]
    # elapsed time carries across the restart, so it is not reset to the last epoch alone
    assert resumed.records[-1].elapsed_seconds > resumed.records[-1].epoch_seconds


def test_a_checkpoint_whose_content_does_not_match_its_identity_is_refused(
    small_mnist: MnistData, tmp_path: Path
) -> None:
    plan = CheckpointPlan(tmp_path / "ck.pt")
    config = TrainConfig(recipe=RECIPES["fast"], epochs=2, seed=1)
    data = _slice(small_mnist, 1024, 200)
    with pytest.raises(_Evicted):
        train_mnist(data, config, CPU, checkpoint=plan, after_checkpoint=_evict_after_all)
    payload = torch.load(plan.path, weights_only=True)
    assert payload["identity"]["model_fingerprint"]  # the architecture is part of the identity
    assert payload["identity"]["gpuaccept_version"]
    del payload["optimizer"]  # same identity, missing content
    torch.save(payload, plan.path)
    before = plan.path.read_bytes()
    with pytest.raises(InputError, match="content does not match") as raised:
        train_mnist(data, config, CPU, checkpoint=plan)
    assert "\n" not in str(raised.value)
    assert plan.path.read_bytes() == before  # left as it was


def _evict_after_all(written: int) -> None:
    raise _Evicted


def test_checkpoint_of_another_run_is_refused(small_mnist: MnistData, tmp_path: Path) -> None:
    plan = CheckpointPlan(tmp_path / "ck.pt")
    config = TrainConfig(recipe=RECIPES["fast"], epochs=1, seed=1)
    data = _slice(small_mnist, 1024, 200)
    train_mnist(data, config, CPU, checkpoint=plan)
    with pytest.raises(InputError, match=r"seed=1.*seed=2"):
        train_mnist(data, dataclasses.replace(config, seed=2), CPU, checkpoint=plan)


def test_damaged_checkpoint_is_refused(small_mnist: MnistData, tmp_path: Path) -> None:
    damaged = tmp_path / "ck.pt"
    damaged.write_bytes(b"PK\x03\x04 not really a checkpoint")
    config = TrainConfig(recipe=RECIPES["fast"], epochs=1)
    with pytest.raises(InputError, match=f"{damaged}: unreadable"):
        train_mnist(small_mnist, config, CPU, checkpoint=CheckpointPlan(damaged))
    assert damaged.read_bytes().startswith(b"PK\x03\x04 not")  # left as it was


def test_batch_larger_than_the_data(small_mnist: MnistData) -> None:
    recipe = dataclasses.replace(RECIPES["fast"], batch_size=10**6)
    with pytest.raises(InputError, match="larger than the"):
        _train(small_mnist, recipe=recipe)


def _ddp_rank(rank: int, world: int, payload: tuple[MnistData, TrainConfig]) -> dict[str, Any]:
    data, config = payload
    outcome = train_mnist(data, config, CPU)
    return {
        # numpy, not tensors: torch would pass tensors through shared memory that dies with the rank
        "state": {k: v.numpy().copy() for k, v in outcome.model.state_dict().items()},
        "accuracy": outcome.final_accuracy,
    }


def _flat(state: dict[str, Any]) -> torch.Tensor:
    return torch.cat([torch.as_tensor(value).flatten().double() for value in state.values()])


# How far (relative to the distance training moved the weights) a DDP result may land from one
# process's. Measured on 2,048 generated digits: 3.4e-3 from summation order alone (ReLU and
# max-pool decisions flip on tiny differences early in training); an all-reduce that sums instead
# of averaging lands 1.33 away. 5e-2 sits well between the two.
DDP_RELATIVE_TOLERANCE = 5e-2


def test_two_gloo_ranks_train_what_one_process_trains(small_mnist: MnistData) -> None:
    """DDP over two ranks follows the single process: same batches, gradients averaged.

    Not bit for bit: each rank sums its half-batch's gradient and gloo adds the halves, so the
    float summation order differs, and SGD amplifies that a little every step (2 of 400,000
    weights differed by 2.4e-4 on an AMD EPYC). What a DDP fault changes is the trajectory itself
    (a wrong slice, a missing or unaveraged all-reduce, another rank's permutation): the weights
    then land a sizeable fraction of the distance they travelled away. So the test judges the
    distance between the two results against the distance training moved the weights.
    """
    data = _slice(small_mnist, 2048, 500)
    config = TrainConfig(recipe=RECIPES["lenet"], epochs=1, seed=5)
    torch.manual_seed(config.seed)
    initial = _flat(MODELS["lenet"]().state_dict())
    single = train_mnist(data, config, CPU)
    ranks = run_ranks(_ddp_rank, 2, (data, config), timeout_seconds=240, backend="gloo")
    for name in ranks[0]["state"]:  # every rank holds the same model, bit for bit
        assert (ranks[0]["state"][name] == ranks[1]["state"][name]).all()
    assert ranks[0]["accuracy"] == ranks[1]["accuracy"]
    assert abs(ranks[0]["accuracy"] - single.final_accuracy) <= 0.01
    trained = _flat(single.model.state_dict())
    travelled = float((trained - initial).norm())
    apart = float((_flat(ranks[0]["state"]) - trained).norm())
    assert travelled > 0.05  # training moved the weights: the comparison below means something
    assert apart <= DDP_RELATIVE_TOLERANCE * travelled, (
        f"DDP result {apart:.3g} from one process's, which travelled {travelled:.3g}"
    )


def test_the_ddp_judgement_catches_a_wrong_trajectory(small_mnist: MnistData) -> None:
    """The yardstick above is not loose: the gradient of a doubled learning rate (an all-reduce
    that sums instead of averaging) lands far outside it."""
    data = _slice(small_mnist, 2048, 500)
    config = TrainConfig(recipe=RECIPES["lenet"], epochs=1, seed=5)
    torch.manual_seed(config.seed)
    initial = _flat(MODELS["lenet"]().state_dict())
    single = _flat(train_mnist(data, config, CPU).model.state_dict())
    summed_recipe = dataclasses.replace(
        config.recipe, learning_rate=2 * config.recipe.learning_rate
    )
    summed = train_mnist(data, dataclasses.replace(config, recipe=summed_recipe), CPU)
    apart = float((_flat(summed.model.state_dict()) - single).norm())
    assert apart > 10 * DDP_RELATIVE_TOLERANCE * float((single - initial).norm())


def _odd_batch_rank(rank: int, world: int, data: MnistData) -> str:
    recipe = dataclasses.replace(RECIPES["fast"], batch_size=127)
    try:
        train_mnist(data, TrainConfig(recipe=recipe, epochs=1), CPU)
    except InputError as error:
        return str(error)
    return "trained"


def test_batch_must_split_over_ranks(small_mnist: MnistData) -> None:
    messages = run_ranks(_odd_batch_rank, 2, small_mnist, timeout_seconds=120, backend="gloo")
    assert all("does not split evenly over 2 ranks" in m for m in messages)


def test_the_step_reads_its_batch_and_learning_rate_from_device_counters(
    small_mnist: MnistData,
) -> None:
    """The CPU twin of the captured step: after an epoch the device-side step counter has advanced
    once per batch, which is what a replayed graph relies on instead of Python's loop index."""
    from gpuaccept.mnist.train import learning_rate_factor

    recipe = RECIPES["fast"]
    steps = torch.tensor([0, 1, 4, 5, 10, 20])
    factors = learning_rate_factor(recipe, 10, steps)
    warmup = round(recipe.warmup_epochs * 10)  # 3 steps
    expected = [
        (s + 1) / warmup if s < warmup else recipe.decay_per_epoch ** ((s - warmup) / 10)
        for s in steps.tolist()
    ]
    torch.testing.assert_close(factors, torch.tensor(expected, dtype=torch.float32))
    outcome = _train(_slice(small_mnist, 1024, 200), epochs=1)
    assert outcome.step_mode == "eager"  # the CPU runs the same step function eagerly


@pytest.mark.gpu
def test_one_gpu_trains_with_the_step_captured_in_a_cuda_graph(small_mnist: MnistData) -> None:
    gpu = torch.device("cuda")
    config = TrainConfig(recipe=RECIPES["fast"], epochs=3, seed=1)
    graphed = train_mnist(small_mnist, config, gpu)
    assert graphed.step_mode == "cuda-graph"
    eager = train_mnist(small_mnist, dataclasses.replace(config, cuda_graph=False), gpu)
    assert eager.step_mode == "eager"
    assert graphed.final_accuracy >= 0.95
    assert abs(graphed.final_accuracy - eager.final_accuracy) <= 0.01
    # the graph replays the same batches: the per-epoch losses follow the eager run's
    for ours, theirs in zip(graphed.records, eager.records, strict=True):
        assert ours.loss == pytest.approx(theirs.loss, rel=0.05)


@pytest.mark.gpu
def test_a_resumed_gpu_run_continues_the_captured_run(
    small_mnist: MnistData, tmp_path: Path
) -> None:
    gpu = torch.device("cuda")
    config = TrainConfig(recipe=RECIPES["lenet"], epochs=2, seed=1)
    uninterrupted = train_mnist(small_mnist, config, gpu)
    plan = CheckpointPlan(tmp_path / "ck.pt", every_epochs=1)
    with pytest.raises(_Evicted):
        train_mnist(small_mnist, config, gpu, checkpoint=plan, after_checkpoint=_evict_after(1))
    resumed = train_mnist(small_mnist, config, gpu, checkpoint=plan)
    assert resumed.resumed_from_epoch == 1
    assert resumed.step_mode == "cuda-graph"
    assert resumed.final_accuracy == pytest.approx(uninterrupted.final_accuracy, abs=0.01)


def test_a_fifo_as_the_checkpoint_is_refused_not_read(
    small_mnist: MnistData, tmp_path: Path
) -> None:
    fifo = tmp_path / "ck.pt"
    os.mkfifo(fifo)
    config = TrainConfig(recipe=RECIPES["fast"], epochs=1)
    with pytest.raises(InputError, match="FIFO"):
        train_mnist(small_mnist, config, CPU, checkpoint=CheckpointPlan(fifo))


def test_a_run_whose_loss_diverged_fails_even_without_a_target(small_mnist: MnistData) -> None:
    from gpuaccept.mnist.result import training_check
    from gpuaccept.results import Status

    data = _slice(small_mnist, 512, 256)
    recipe = dataclasses.replace(RECIPES["fast"], learning_rate=1e30)
    config = TrainConfig(recipe=recipe, epochs=1)
    outcome = train_mnist(data, config, CPU)
    assert not math.isfinite(outcome.records[-1].loss)  # what --lr 1e30 does
    check = training_check(outcome, config, data, None, 1.0)
    assert check.status is Status.FAIL
    assert "training diverged" in check.message
    sane = train_mnist(data, dataclasses.replace(config, recipe=RECIPES["fast"]), CPU)
    ungated = training_check(sane, config, data, None, 1.0)
    assert ungated.status is Status.PASS
    # a pass without a target says that nothing was gated, in words, and counts one epoch as one
    assert " after 1 epoch, " in ungated.message
    assert ungated.message.endswith("; no --target-accuracy: the accuracy was not gated")
    first = sane.records[0]
    gated = training_check(sane, config, data, first.test_accuracy / 2, 1.0)
    assert gated.message.endswith(f"reached at epoch 1 ({first.elapsed_seconds:.1f} s)")


def test_a_forged_record_does_not_pass_a_target_the_model_does_not_reach(
    small_mnist: MnistData, tmp_path: Path
) -> None:
    """A finished run's checkpoint whose records claim 100%: resuming it trains nothing, and the
    accuracy the verdict uses is measured on the model, not read from the records."""
    from gpuaccept.mnist.result import training_check
    from gpuaccept.results import Status

    plan = CheckpointPlan(tmp_path / "ck.pt")
    config = TrainConfig(recipe=dataclasses.replace(RECIPES["fast"], learning_rate=0.0), epochs=1)
    data = _slice(small_mnist, 512, 256)
    honest = train_mnist(data, config, CPU, checkpoint=plan)
    assert honest.final_accuracy < 0.5  # learning rate 0: the untrained model
    payload = torch.load(plan.path, weights_only=True)
    payload["records"][-1]["test_accuracy"] = 1.0
    torch.save(payload, plan.path)
    resumed = train_mnist(data, config, CPU, checkpoint=plan)
    assert resumed.records[-1].test_accuracy == 1.0  # what the checkpoint says...
    assert resumed.final_accuracy == honest.final_accuracy  # ...is not what is judged
    check = training_check(resumed, config, data, 0.99, 1.0)
    assert check.status is Status.FAIL
    assert "(the records claimed 100.00%)" in check.message


@pytest.mark.parametrize(
    "records",
    [
        [],
        ["not a record"],
        [
            {
                "epoch": 1,
                "loss": "x",
                "test_accuracy": 1.0,
                "images_per_second": 1.0,
                "epoch_seconds": 1.0,
                "elapsed_seconds": 1.0,
            }
        ],
    ],
)
def test_checkpoint_records_emptied_or_of_the_wrong_type_are_refused(
    small_mnist: MnistData, tmp_path: Path, records: list[object]
) -> None:
    plan = CheckpointPlan(tmp_path / "ck.pt")
    config = TrainConfig(recipe=RECIPES["fast"], epochs=2)
    data = _slice(small_mnist, 512, 128)
    with pytest.raises(_Evicted):
        train_mnist(data, config, CPU, checkpoint=plan, after_checkpoint=_evict_after_all)
    payload = torch.load(plan.path, weights_only=True)
    payload["records"] = records
    torch.save(payload, plan.path)
    with pytest.raises(InputError, match="content does not match"):
        train_mnist(data, config, CPU, checkpoint=plan)


class _FakeGraphCuda:
    """torch.cuda as _StepRunner meets it during a capture whose step fails and whose exit then
    fails too, as torch.cuda.graph's does: which stream is current, what was reset."""

    def __init__(self, synchronize_fails: bool = False) -> None:
        self.stream = "default"
        self.reset = False
        self.synchronize_fails = synchronize_fails

    def current_stream(self, device: Any = None) -> str:
        return self.stream

    def set_stream(self, stream: str) -> None:
        self.stream = stream

    def synchronize(self, device: Any = None) -> None:
        if self.synchronize_fails:
            raise RuntimeError("CUDA error: unspecified launch failure")

    def CUDAGraph(self) -> Any:  # torch's name
        fake = self

        class Graph:
            def reset(self) -> None:
                fake.reset = True

        return Graph()

    def graph(self, graph: Any) -> Any:
        fake = self

        class Capture:
            def __enter__(self) -> None:
                fake.stream = "capture"

            def __exit__(self, *exc: object) -> None:
                # capture_end() fails before the stream is restored
                raise RuntimeError("operation failed due to a previous error during capture")

        return Capture()


def _failing_step() -> None:
    raise RuntimeError("the real cause: an op that cannot be captured")


def test_a_failed_capture_names_the_real_cause_and_goes_on_from_a_clean_state(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from gpuaccept.mnist import train as train_module

    fake = _FakeGraphCuda()
    for name in ("current_stream", "set_stream", "synchronize", "CUDAGraph", "graph"):
        monkeypatch.setattr(train_module.torch.cuda, name, getattr(fake, name))
    runner = train_module._StepRunner(_failing_step, torch.device("cpu"), graphed=True)
    runner._capture()
    assert runner.mode == (
        "eager (CUDA graph capture failed: RuntimeError: the real cause: an op that cannot be "
        "captured)"
    )
    assert fake.stream == "default"  # not left on the capture stream
    assert fake.reset  # the graph's pool released
    assert runner._graph is None


def test_a_capture_that_breaks_the_device_stops_with_the_real_cause(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from gpuaccept.errors import EnvironmentProblem
    from gpuaccept.mnist import train as train_module

    fake = _FakeGraphCuda(synchronize_fails=True)
    for name in ("current_stream", "set_stream", "synchronize", "CUDAGraph", "graph"):
        monkeypatch.setattr(train_module.torch.cuda, name, getattr(fake, name))
    runner = train_module._StepRunner(_failing_step, torch.device("cpu"), graphed=True)
    with pytest.raises(EnvironmentProblem, match="the real cause: an op that cannot be captured"):
        runner._capture()


def test_adamw_is_capturable_only_when_the_step_is_captured_and_a_checkpoint_cannot_change_it(
    small_mnist: MnistData, tmp_path: Path
) -> None:
    from gpuaccept.mnist import train as train_module

    model = MODELS["fast"]()
    recipe = RECIPES["fast"]
    assert recipe.optimizer == "adamw"
    eager = train_module._optimizer(recipe, model, CPU)
    assert not eager.param_groups[0].get("capturable")
    # a checkpoint written by a capturable optimizer (a GPU run) resumed here: this run's own
    # settings win (load_state_dict would bring capturable=True back)
    plan = CheckpointPlan(tmp_path / "ck.pt")
    config = TrainConfig(recipe=recipe, epochs=2)
    data = _slice(small_mnist, 512, 128)
    with pytest.raises(_Evicted):
        train_mnist(data, config, CPU, checkpoint=plan, after_checkpoint=_evict_after_all)
    payload = torch.load(plan.path, weights_only=True)
    for group in payload["optimizer"]["param_groups"]:
        group["capturable"], group["fused"], group["foreach"] = True, False, True
    torch.save(payload, plan.path)
    outcome = train_mnist(data, config, CPU, checkpoint=plan)
    assert outcome.records[-1].epoch == 2  # torch refuses capturable=True on CPU tensors


def test_fp32_training_turns_tf32_off_and_restores_it() -> None:
    from gpuaccept.mnist import train as train_module

    before = (torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32)
    torch.backends.cudnn.allow_tf32 = True
    try:
        with train_module._precision_as_asked(TrainConfig(recipe=RECIPES["fast"], epochs=1)):
            assert torch.backends.cudnn.allow_tf32 is False
            assert torch.backends.cuda.matmul.allow_tf32 is False
        assert torch.backends.cudnn.allow_tf32 is True
        bf16 = TrainConfig(recipe=RECIPES["fast"], epochs=1, bf16=True)
        with train_module._precision_as_asked(bf16):
            assert torch.backends.cudnn.allow_tf32 is True  # bf16 runs choose their own math
    finally:
        torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32 = before
