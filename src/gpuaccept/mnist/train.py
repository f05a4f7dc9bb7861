"""The MNIST train loop, top to bottom: data on the device, shuffle and batch there, train, test.

The whole dataset is one uint8 tensor on the device; each epoch's order is a permutation drawn
from (seed, epoch), so a resumed run draws the same batches as an uninterrupted one. Under DDP
every rank draws the same permutation and takes its slice of each global batch, so the global
batch (and the result) does not depend on the number of ranks.

One training step (batch selection, forward, loss, backward, optimizer, learning rate) reads and
advances only device tensors: the step counters, this epoch's order and the learning rate. So on
one GPU the whole step is captured once in a CUDA graph and replayed: a step costs one launch
instead of ~40 launches from Python, which on a fast GPU is what bounds a small model. The CPU
(and DDP) run the very same step function eagerly.
"""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn

from gpuaccept import __version__
from gpuaccept.errors import EnvironmentProblem, InputError
from gpuaccept.mnist.checkpoint import (
    load_checkpoint,
    model_fingerprint,
    restore_checkpoint,
    save_checkpoint,
)
from gpuaccept.mnist.data import MnistData
from gpuaccept.mnist.model import MODELS
from gpuaccept.mnist.recipes import Recipe

# The seed's normalisation (MNIST's pixel mean and standard deviation).
PIXEL_MEAN, PIXEL_STD = 0.1307, 0.3081
_TEST_BATCH = 2000


@dataclass(frozen=True)
class TrainConfig:
    recipe: Recipe
    epochs: int
    seed: int = 0
    bf16: bool = False  # autocast to bfloat16 (GPU default)
    channels_last: bool = True  # NHWC activations: faster on GPUs and on this CPU (oneDNN) too
    cuda_graph: bool = True  # on one GPU, replay the step as a CUDA graph (False: eager steps)

    def identity(self, data: MnistData, world_size: int) -> dict[str, Any]:
        """What a checkpoint must share with this run for a resume to give the same result."""
        return {
            **asdict(self.recipe),
            "epochs": self.epochs,
            "seed": self.seed,
            "bf16": self.bf16,
            "channels_last": self.channels_last,
            "data_sha256": data.sha256,
            "world_size": world_size,
        }


@dataclass(frozen=True)
class EpochRecord:
    epoch: int  # 1-based
    loss: float  # mean training loss over the epoch
    test_accuracy: float  # fraction, 0..1
    images_per_second: float  # training throughput over all ranks, test time excluded
    epoch_seconds: float  # training and test of this epoch
    elapsed_seconds: float  # since the run began, across resumes


@dataclass(frozen=True)
class CheckpointPlan:
    path: Path
    every_epochs: int = 1


@dataclass
class TrainOutcome:
    records: list[EpochRecord]
    model: nn.Module  # the plain module (unwrapped from DDP), in eval mode
    resumed_from_epoch: int = 0
    checkpoints_written: list[int] = field(default_factory=list)
    step_mode: str = "eager"  # "cuda-graph" when the step ran as a replayed CUDA graph
    measured_accuracy: float | None = None  # the final model, evaluated in this process

    @property
    def final_accuracy(self) -> float:
        """The accuracy the verdict uses: measured on the model in hand, never only recorded."""
        if self.measured_accuracy is not None:
            return self.measured_accuracy
        return self.records[-1].test_accuracy if self.records else math.nan


def _rank_and_world() -> tuple[int, int]:
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


def _normalise(images: torch.Tensor, channels_last: bool) -> torch.Tensor:
    batch = (images.float().div_(255).sub_(PIXEL_MEAN).div_(PIXEL_STD)).unsqueeze(1)
    return batch.contiguous(memory_format=torch.channels_last) if channels_last else batch


# Optimizer settings that belong to the device a run is on, not to the state a checkpoint holds.
_DEVICE_SETTINGS = ("capturable", "fused", "foreach", "differentiable")


def _optimizer(
    recipe: Recipe, model: nn.Module, device: torch.device, captured: bool = False
) -> torch.optim.Optimizer:
    """The recipe's optimizer with its learning rate as a device tensor (the step sets it).

    AdamW is `capturable` (its step counts stay on the device) only when the step will be
    captured in a CUDA graph: elsewhere (DDP, --no graph, CPU) capturable costs a slower step and
    a warning for nothing. SGD is fused on every device: it takes a tensor learning rate without
    a host sync, graph or not.
    """
    learning_rate = torch.tensor(recipe.learning_rate, dtype=torch.float32, device=device)
    if recipe.optimizer == "sgd":
        return torch.optim.SGD(
            model.parameters(),
            lr=learning_rate,
            momentum=recipe.momentum,
            weight_decay=recipe.weight_decay,
            fused=True,
        )
    if recipe.optimizer == "adamw":
        if captured:
            return torch.optim.AdamW(
                model.parameters(),
                lr=learning_rate,
                weight_decay=recipe.weight_decay,
                capturable=True,
                foreach=True,
            )
        return torch.optim.AdamW(
            model.parameters(), lr=learning_rate, weight_decay=recipe.weight_decay, fused=True
        )
    raise ValueError(f"unknown optimizer {recipe.optimizer!r}")


def learning_rate_factor(recipe: Recipe, steps_per_epoch: int, step: torch.Tensor) -> torch.Tensor:
    """Learning-rate factor of step s (a device tensor): linear warm-up, then an exponential decay
    per epoch.

    It does not depend on the run's length, so a short run is as accurate at epoch k as a long
    one: time to accuracy does not pay for --epochs.
    """
    warmup = float(round(recipe.warmup_epochs * steps_per_epoch))
    s = step.to(torch.float32)
    decayed = torch.pow(recipe.decay_per_epoch, (s - warmup) / steps_per_epoch)
    return torch.where(s < warmup, (s + 1) / max(warmup, 1.0), decayed)


@dataclass
class _StepState:
    """What a step reads and advances, all on the device, so a replayed graph needs no Python:
    this epoch's order, the step within the epoch, the step within the run, the loss sum."""

    order: torch.Tensor
    step_in_epoch: torch.Tensor
    global_step: torch.Tensor
    loss_sum: torch.Tensor
    my_slice: torch.Tensor  # this rank's positions within a global batch


def _training_step(
    trained: nn.Module,
    optimizer: torch.optim.Optimizer,
    state: _StepState,
    images: torch.Tensor,
    labels: torch.Tensor,
    config: TrainConfig,
    steps_per_epoch: int,
) -> Callable[[], None]:
    """One step as a closure over device tensors (eager on CPU and under DDP, captured on GPU)."""
    recipe = config.recipe
    learning_rate: torch.Tensor = optimizer.param_groups[0]["lr"]

    def step() -> None:
        factor = learning_rate_factor(recipe, steps_per_epoch, state.global_step)
        learning_rate.copy_(factor * recipe.learning_rate)
        positions = state.step_in_epoch * recipe.batch_size + state.my_slice
        mine = state.order.index_select(0, positions)
        inputs = _normalise(images.index_select(0, mine), config.channels_last)
        # cache_enabled=False: autocast's weight cache would be stale inside a replayed graph
        with torch.autocast(
            images.device.type, torch.bfloat16, enabled=config.bf16, cache_enabled=False
        ):
            logits = trained(inputs)
        loss = F.cross_entropy(logits.float(), labels.index_select(0, mine))
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        state.loss_sum.add_(loss.detach())
        state.step_in_epoch.add_(1)
        state.global_step.add_(1)

    return step


# Eager steps before capture: they create the optimizer's state and warm cuDNN and the caching
# allocator (as PyTorch's whole-network capture example does), and they are real training steps.
_EAGER_STEPS_BEFORE_CAPTURE = 3


class _StepRunner:
    """Runs the step: eagerly, or (one GPU) eagerly a few times, then as a replayed CUDA graph.

    A capture that fails (an op this torch cannot capture) falls back to eager steps and says why
    in `mode`, so training never fails for want of a graph.
    """

    def __init__(self, step: Callable[[], None], device: torch.device, graphed: bool) -> None:
        self._step = step
        self._device = device
        self._eager_left = _EAGER_STEPS_BEFORE_CAPTURE if graphed else 0
        self._graph: Any = None
        self.mode = "eager"

    def __call__(self) -> None:
        if self._graph is not None:
            self._graph.replay()
            return
        if self._eager_left <= 0:
            self._step()
            return
        side = torch.cuda.Stream(self._device)
        side.wait_stream(torch.cuda.current_stream(self._device))
        with torch.cuda.stream(side):
            self._step()
        torch.cuda.current_stream(self._device).wait_stream(side)
        self._eager_left -= 1
        if self._eager_left == 0:
            self._capture()

    def _capture(self) -> None:
        graph = torch.cuda.CUDAGraph()
        before = torch.cuda.current_stream(self._device)
        try:
            with torch.cuda.graph(graph):
                self._step()  # recorded, not run: the counters advance only on replay
        except Exception as error:
            cause = _first_cause(error)
            # torch.cuda.graph's __exit__ can fail in capture_end() before it restores the
            # stream, and its error ("operation failed due to a previous error during capture")
            # hides the real one: put the stream back, release the graph's memory pool, name
            # the cause, and go on eagerly only if the device is usable again
            torch.cuda.set_stream(before)
            with contextlib.suppress(Exception):
                graph.reset()
            try:
                torch.cuda.synchronize(self._device)
            except Exception as broken:
                raise EnvironmentProblem(
                    f"capturing the training step in a CUDA graph failed "
                    f"({type(cause).__name__}: {cause}) and left {self._device} unusable "
                    f"({type(broken).__name__}: {broken})"
                ) from None
            self.mode = f"eager (CUDA graph capture failed: {type(cause).__name__}: {cause})"
            return
        self._graph = graph
        self.mode = "cuda-graph"


def _first_cause(error: BaseException) -> BaseException:
    """The first error of a chain: an exception raised while another was handled (a failing
    __exit__) keeps the original as its __context__."""
    seen = {id(error)}
    while error.__context__ is not None and id(error.__context__) not in seen:
        error = error.__context__
        seen.add(id(error))
    return error


@torch.no_grad()
def evaluate(
    model: nn.Module, images: torch.Tensor, labels: torch.Tensor, config: TrainConfig
) -> float:
    """Test accuracy (fraction); under DDP each rank scores a slice and the counts are summed."""
    rank, world = _rank_and_world()
    model.eval()
    correct = torch.zeros((), dtype=torch.int64, device=images.device)
    for begin in range(rank * _TEST_BATCH, len(images), world * _TEST_BATCH):
        batch = _normalise(images[begin : begin + _TEST_BATCH], config.channels_last)
        with torch.autocast(images.device.type, torch.bfloat16, enabled=config.bf16):
            predicted = model(batch).argmax(dim=1)
        correct += (predicted == labels[begin : begin + _TEST_BATCH]).sum()
    if world > 1:
        dist.all_reduce(correct)
    return int(correct.item()) / len(images)


@contextmanager
def _precision_as_asked(config: TrainConfig) -> Iterator[None]:
    """fp32 means fp32: cuDNN's convolutions and cuBLAS's matmuls default to TF32 on Ampere and
    later (torch.backends.cudnn.allow_tf32 is True by default), which --precision fp32 must not
    silently use. The previous settings are restored afterwards."""
    before = (torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32)
    if not config.bf16:
        torch.backends.cudnn.allow_tf32 = False
        torch.backends.cuda.matmul.allow_tf32 = False
    try:
        yield
    finally:
        torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32 = before


def train_mnist(
    data: MnistData,
    config: TrainConfig,
    device: torch.device,
    checkpoint: CheckpointPlan | None = None,
    on_epoch: Callable[[EpochRecord], None] | None = None,
    after_checkpoint: Callable[[int], None] | None = None,
    on_step: Callable[[int, int, int], None] | None = None,
    on_step_mode: Callable[[str], None] | None = None,
) -> TrainOutcome:
    """Train `config.recipe` on `data` for `config.epochs`, resuming from `checkpoint` if present.

    `on_epoch` sees each epoch's record; `after_checkpoint` is called with the epoch number after
    each checkpoint written (HTCondor's self-checkpointing exits the job there); `on_step` with
    (epoch, steps done, steps per epoch) after each step is launched (not awaited: it must be
    cheap, and says how far the host has got); `on_step_mode` once, with how the steps run
    (a CUDA graph or eager, and why), as soon as the first epoch of this run has shown it.
    """
    with _precision_as_asked(config):
        return _train_mnist(
            data, config, device, checkpoint, on_epoch, after_checkpoint, on_step, on_step_mode
        )


def _train_mnist(
    data: MnistData,
    config: TrainConfig,
    device: torch.device,
    checkpoint: CheckpointPlan | None,
    on_epoch: Callable[[EpochRecord], None] | None,
    after_checkpoint: Callable[[int], None] | None,
    on_step: Callable[[int, int, int], None] | None = None,
    on_step_mode: Callable[[str], None] | None = None,
) -> TrainOutcome:
    recipe = config.recipe
    rank, world = _rank_and_world()
    if recipe.batch_size % world:
        raise InputError(
            f"--batch-size {recipe.batch_size} does not split evenly over {world} ranks"
        )
    train_count = len(data.train_labels)
    steps_per_epoch = train_count // recipe.batch_size  # the last partial batch is dropped
    if steps_per_epoch == 0:
        raise InputError(
            f"--batch-size {recipe.batch_size} is larger than the {train_count} training images"
        )
    local_batch = recipe.batch_size // world

    train_images = torch.from_numpy(data.train_images).to(device)
    train_labels = torch.from_numpy(data.train_labels).to(device)
    test_images = torch.from_numpy(data.test_images).to(device)
    test_labels = torch.from_numpy(data.test_labels).to(device)

    torch.manual_seed(config.seed)  # the same initial weights on every rank and every run
    model = MODELS[recipe.model]().to(device)
    if config.channels_last:
        model = model.to(memory_format=torch.channels_last)  # type: ignore[call-overload]
    graphed = (
        config.cuda_graph
        and device.type == "cuda"
        and world == 1
        and steps_per_epoch > _EAGER_STEPS_BEFORE_CAPTURE
    )
    optimizer = _optimizer(recipe, model, device, captured=graphed)
    # the optimizer's own settings (capturable, fused, foreach) are this run's, whatever device
    # wrote a checkpoint: load_state_dict would otherwise bring the writer's back
    own_settings = [
        {key: group[key] for key in _DEVICE_SETTINGS if key in group}
        for group in optimizer.param_groups
    ]

    identity = config.identity(data, world) | {
        "gpuaccept_version": __version__,
        "model_fingerprint": model_fingerprint(model),
    }
    records: list[EpochRecord] = []
    start_epoch, elapsed_before = 0, 0.0
    if checkpoint is not None and checkpoint.path.exists():
        state = load_checkpoint(checkpoint.path, identity)
        restored: dict[str, Any] = {}

        def restore(payload: dict[str, Any]) -> None:
            model.load_state_dict(payload["model"])
            optimizer.load_state_dict(payload["optimizer"])
            restored["records"] = [_epoch_record(record) for record in payload["records"]]
            restored["epoch"] = int(payload["epoch"])
            restored["elapsed"] = float(payload["elapsed_seconds"])
            if not 0 < restored["epoch"] <= config.epochs:
                raise ValueError(f"epoch {restored['epoch']} outside 1..{config.epochs}")
            numbers = [record.epoch for record in restored["records"]]
            if numbers != list(range(1, restored["epoch"] + 1)):
                raise ValueError(
                    f"records of epochs {numbers[:5]}... for a checkpoint of epoch "
                    f"{restored['epoch']}"
                )

        restore_checkpoint(checkpoint.path, state, restore)
        for group, own in zip(optimizer.param_groups, own_settings, strict=True):
            group.update(own)
            # a loaded learning rate comes back on the CPU
            group["lr"] = torch.as_tensor(group["lr"], dtype=torch.float32, device=device)
        records = restored["records"]
        start_epoch, elapsed_before = restored["epoch"], restored["elapsed"]
    resumed_from = start_epoch

    trained: nn.Module = model
    if world > 1:
        trained = nn.parallel.DistributedDataParallel(
            model, device_ids=[device.index] if device.type == "cuda" else None
        )
    counters = _StepState(
        order=torch.empty(train_count, dtype=torch.int64, device=device),
        step_in_epoch=torch.zeros((), dtype=torch.int64, device=device),
        global_step=torch.full((), start_epoch * steps_per_epoch, dtype=torch.int64, device=device),
        loss_sum=torch.zeros((), dtype=torch.float32, device=device),
        my_slice=torch.arange(rank * local_batch, (rank + 1) * local_batch, device=device),
    )
    step = _training_step(
        trained, optimizer, counters, train_images, train_labels, config, steps_per_epoch
    )
    run_step = _StepRunner(step, device, graphed)
    outcome = TrainOutcome(records=records, model=model, resumed_from_epoch=resumed_from)
    run_start = time.perf_counter()
    for epoch in range(start_epoch, config.epochs):
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        epoch_start = time.perf_counter()
        counters.order.copy_(
            torch.randperm(
                train_count,
                generator=torch.Generator(device=device).manual_seed(
                    config.seed * 1_000_003 + epoch
                ),
                device=device,
            )
        )
        counters.step_in_epoch.zero_()
        counters.loss_sum.zero_()
        trained.train()
        for done in range(1, steps_per_epoch + 1):
            run_step()
            if on_step is not None:
                on_step(epoch + 1, done, steps_per_epoch)
        loss_sum = counters.loss_sum.clone()
        if world > 1:
            dist.all_reduce(loss_sum)
            loss_sum /= world
        mean_loss = float(loss_sum.item()) / steps_per_epoch  # .item() synchronises the device
        if on_step_mode is not None and epoch == start_epoch:
            on_step_mode(run_step.mode)
        outcome.step_mode = run_step.mode
        train_seconds = time.perf_counter() - epoch_start
        accuracy = evaluate(model, test_images, test_labels, config)
        now = time.perf_counter()
        record = EpochRecord(
            epoch=epoch + 1,
            loss=mean_loss,
            test_accuracy=accuracy,
            images_per_second=steps_per_epoch * recipe.batch_size / train_seconds,
            epoch_seconds=now - epoch_start,
            elapsed_seconds=elapsed_before + now - run_start,
        )
        records.append(record)
        if on_epoch is not None:
            on_epoch(record)
        due = (epoch + 1) % checkpoint.every_epochs == 0 if checkpoint else False
        if checkpoint is not None and (due or epoch + 1 == config.epochs):
            if rank == 0:
                save_checkpoint(
                    checkpoint.path,
                    {
                        "identity": identity,
                        "epoch": epoch + 1,
                        "elapsed_seconds": record.elapsed_seconds,
                        "model": model.state_dict(),
                        "optimizer": optimizer.state_dict(),
                        "records": [asdict(r) for r in records],
                    },
                )
            if world > 1:
                dist.barrier()  # no rank moves on (or exits) before the checkpoint is complete
            outcome.checkpoints_written.append(epoch + 1)
            if after_checkpoint is not None and epoch + 1 < config.epochs:
                after_checkpoint(epoch + 1)
    model.eval()
    # The verdict's accuracy is measured here, on the model in hand: a run resumed from a
    # checkpoint with nothing left to train would otherwise report the accuracy the checkpoint's
    # records claim, which nothing checked (a forged 100% passed any target).
    outcome.measured_accuracy = evaluate(model, test_images, test_labels, config)
    return outcome


def _epoch_record(raw: Any) -> EpochRecord:
    """One stored epoch record, its types checked (a checkpoint is user input)."""
    if not isinstance(raw, dict):
        raise TypeError(f"an epoch record is {type(raw).__name__}, not a mapping")
    record = EpochRecord(**raw)
    numbers = [
        record.loss,
        record.test_accuracy,
        record.images_per_second,
        record.epoch_seconds,
        record.elapsed_seconds,
    ]
    if not isinstance(record.epoch, int) or not all(
        isinstance(x, int | float) and not isinstance(x, bool) for x in numbers
    ):
        raise TypeError("an epoch record holds a value that is not a number")
    return record
