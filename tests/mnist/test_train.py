"""The train loop: it learns, it is deterministic, a resumed run equals an uninterrupted one, and
two gloo ranks (the CPU twin of multi-GPU DDP) train the same model as one process."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest
import torch

from gpuaccept.distributed.local_ranks import run_ranks
from gpuaccept.errors import InputError
from gpuaccept.measure.training_smoke import parameter_digest
from gpuaccept.mnist.data import MnistData
from gpuaccept.mnist.train import (
    RECIPES,
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
    first, again = _train(small_mnist, epochs=1, seed=3), _train(small_mnist, epochs=1, seed=3)
    other = _train(small_mnist, epochs=1, seed=4)
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
    uninterrupted = train_mnist(small_mnist, config, CPU)
    plan = CheckpointPlan(tmp_path / "ck.pt", every_epochs=1)
    with pytest.raises(_Evicted):
        train_mnist(small_mnist, config, CPU, checkpoint=plan, after_checkpoint=_evict_after(1))
    with pytest.raises(_Evicted):
        train_mnist(small_mnist, config, CPU, checkpoint=plan, after_checkpoint=_evict_after(2))
    resumed = train_mnist(small_mnist, config, CPU, checkpoint=plan)
    assert resumed.resumed_from_epoch == 2
    assert resumed.checkpoints_written == [3]
    assert parameter_digest(resumed.model) == parameter_digest(uninterrupted.model)
    assert [(r.loss, r.test_accuracy) for r in resumed.records] == [
        (r.loss, r.test_accuracy) for r in uninterrupted.records
    ]
    # elapsed time carries across the restart, so it is not reset to the last epoch alone
    assert resumed.records[-1].elapsed_seconds > resumed.records[-1].epoch_seconds


def test_checkpoint_of_another_run_is_refused(small_mnist: MnistData, tmp_path: Path) -> None:
    plan = CheckpointPlan(tmp_path / "ck.pt")
    config = TrainConfig(recipe=RECIPES["fast"], epochs=1, seed=1)
    train_mnist(small_mnist, config, CPU, checkpoint=plan)
    with pytest.raises(InputError, match=r"seed=1.*seed=2"):
        train_mnist(small_mnist, dataclasses.replace(config, seed=2), CPU, checkpoint=plan)


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


def test_two_gloo_ranks_train_what_one_process_trains(small_mnist: MnistData) -> None:
    # LeNet has no batch norm, so two ranks averaging gradients over half-batches follow the
    # single process's trajectory up to float summation order.
    config = TrainConfig(recipe=RECIPES["lenet"], epochs=1, seed=5)
    single = train_mnist(small_mnist, config, CPU)
    ranks = run_ranks(_ddp_rank, 2, (small_mnist, config), timeout_seconds=240, backend="gloo")
    assert ranks[0]["accuracy"] == ranks[1]["accuracy"]
    assert abs(ranks[0]["accuracy"] - single.final_accuracy) <= 0.01
    for name, value in single.model.state_dict().items():
        torch.testing.assert_close(
            torch.from_numpy(ranks[0]["state"][name]), value, atol=2e-4, rtol=1e-3
        )
        assert (ranks[0]["state"][name] == ranks[1]["state"][name]).all()


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
