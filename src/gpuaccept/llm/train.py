"""One rank of the LLM workload, inside an initialised process group: FSDP2 over every rank,
bf16 compute with fp32 reductions, optional activation checkpointing and torch.compile.

The same function runs on GPUs (NCCL) and on the CPU twin (gloo, 2 ranks). Each rank returns a
RankRecord of what it measured; the judging (llm.figures, checks.workload) happens in the caller,
so a rank never decides a verdict.
"""

from __future__ import annotations

import gc
import math
import statistics
import time
from typing import Any, cast

import torch
import torch.nn.functional as F

from gpuaccept.errors import GpuacceptError
from gpuaccept.llm.checkpointing import block_is_checkpointed
from gpuaccept.llm.model import Block, Decoder, init_weights
from gpuaccept.llm.spec import Checkpointing as Checkpointing
from gpuaccept.llm.spec import LlmSpec as LlmSpec
from gpuaccept.llm.spec import Precision as Precision
from gpuaccept.llm.spec import RankRecord as RankRecord
from gpuaccept.llm.spec import for_world as for_world
from gpuaccept.llm.tokens import build_chain


class WorkloadOutOfMemory(GpuacceptError):
    """The model, batch and sequence did not fit: the message holds the memory figures."""


class _ComputeTimer:
    """Times each block's forward after FSDP's own pre-forward hook has waited for its
    all-gather, so a rank's figure is its own compute, not its wait for a slower peer (the
    section timing of nvidia-resiliency-ext's straggler detector)."""

    def __init__(self, blocks: list[torch.nn.Module], device: torch.device, spec: LlmSpec) -> None:
        self.device = device
        self.active = False
        self.pairs: list[tuple[Any, Any]] = []
        self.delay = spec.slow_seconds if spec.slow_rank == _rank() else 0.0
        for block in blocks:
            # eager even inside a compiled block: traced, the CUDA events would never record
            block.register_forward_pre_hook(torch.compiler.disable(self._before))
            block.register_forward_hook(torch.compiler.disable(self._after))

    def _stamp(self) -> Any:
        if self.device.type == "cuda":
            event = torch.cuda.Event(enable_timing=True)
            event.record()
            return event
        return time.perf_counter()

    def _before(self, module: Any, args: Any) -> None:
        if self.active:
            self.pairs.append((self._stamp(), None))
            if self.delay:
                time.sleep(self.delay)

    def _after(self, module: Any, args: Any, output: Any) -> None:
        if self.active and self.pairs and self.pairs[-1][1] is None:
            self.pairs[-1] = (self.pairs[-1][0], self._stamp())

    def take(self) -> float:
        """Seconds of the forwards since the last take (after the device has synchronised)."""
        total = 0.0
        for start, end in self.pairs:
            if end is None:
                continue
            if self.device.type == "cuda":
                total += start.elapsed_time(end) / 1000.0
            else:
                total += end - start
        self.pairs.clear()
        return total


def _rank() -> int:
    import torch.distributed as dist

    return dist.get_rank() if dist.is_initialized() else 0


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def build_model(spec: LlmSpec, device: torch.device, mesh: Any = None) -> Decoder:
    """The decoder on the meta device, sharded with FSDP2 per block and at the root, then
    materialised on `device` and initialised from the seed: no rank ever holds the whole model."""
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

    with torch.device("meta"):
        model = Decoder(spec.shape)
    blocks = [cast(Block, block) for block in model.layers]
    for index, block in enumerate(blocks):
        # selective-op: torchtitan's per-op policy in every block; full and selective-layer-N:
        # the chosen blocks checkpointed whole (llm.checkpointing)
        if block_is_checkpointed(spec.checkpointing, index):
            block.checkpointing = "full"
        elif spec.checkpointing == "selective-op":
            block.checkpointing = "selective-op"
        block.attention.self_only = spec.self_attention_only
        if spec.compile:
            block.compile()  # per block, as torchtitan compiles
    if spec.precision == "bf16":
        policy = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
    else:
        policy = MixedPrecisionPolicy()
    # mesh None: every rank of the default group; else a sub-mesh (one node's ranks)
    for block in blocks:
        fully_shard(block, mesh=mesh, mp_policy=policy)
    fully_shard(model, mesh=mesh, mp_policy=policy)
    model.to_empty(device=device)
    init_weights(model, spec.seed)
    return model


def _learning_rate(spec: LlmSpec, step: int) -> float:
    """Linear warm-up over a tenth of the run, then linear decay to a tenth of the peak."""
    warm = max(1, spec.steps // 10)
    if step < warm:
        return spec.learning_rate * (step + 1) / warm
    left = (spec.steps - step) / max(1, spec.steps - warm)
    return spec.learning_rate * (0.1 + 0.9 * left)


def _memory_message(step: int, device: torch.device) -> str:
    if device.type != "cuda":
        return f"out of memory at step {step} on {device}"
    gib = 1024**3
    total = torch.cuda.get_device_properties(device).total_memory
    peak = torch.cuda.max_memory_allocated(device) / gib
    reserved = torch.cuda.memory_reserved(device) / gib
    return (
        f"out of memory at step {step} on {device}: {peak:.1f} GiB allocated at peak, "
        f"{reserved:.1f} GiB reserved, {total / gib:.1f} GiB on the GPU; a smaller --batch, "
        "--seq-len or --layers, or --checkpointing full, needs less"
    )


class _StepLog:
    """Rank 0's training log: every `log_every` steps (and the last), a JSON line of the step's
    figures appended to `log_file`, which the command that started the ranks shows."""

    def __init__(self, spec: LlmSpec, device: torch.device) -> None:
        self.every = spec.log_every if spec.log_file and _rank() == 0 else 0
        self.path = spec.log_file
        self.device = device
        self.tokens = spec.local_batch * spec.shape.seq_len

    def step(
        self, step: int, steps: int, loss: float, norm: torch.Tensor, seconds: list[float]
    ) -> None:
        if not self.every or self.path is None or ((step + 1) % self.every and step + 1 < steps):
            return
        import json

        from torch.distributed.tensor import DTensor

        # every rank holds the same total norm (FSDP2's is a replicated DTensor): read locally,
        # never a collective that rank 0 alone would enter
        whole = norm.to_local() if isinstance(norm, DTensor) else norm
        recent = seconds[-self.every :]
        line: dict[str, Any] = {
            "step": step,
            "steps": steps,
            "loss": loss,
            "grad_norm": float(whole.item()),
            "tokens_per_second": self.tokens / seconds[-1] if seconds[-1] > 0 else None,
            "step_seconds_min": min(recent),
            "step_seconds_median": statistics.median(recent),
            "step_seconds_max": max(recent),
        }
        if self.device.type == "cuda":
            line["memory_active_bytes"] = torch.cuda.memory_allocated(self.device)
            line["memory_reserved_bytes"] = torch.cuda.memory_reserved(self.device)
        with open(self.path, "a", encoding="utf-8") as out:
            out.write(json.dumps(line) + "\n")


def _train(
    spec: LlmSpec,
    device: torch.device,
    batches: torch.Tensor,
    steps: int,
    timer_wanted: bool,
    mesh: Any = None,
) -> tuple[list[float], list[float], list[float], int | None, float]:
    """(losses, step seconds, compute seconds, first non-finite step, set-up seconds)"""
    started = time.perf_counter()
    model = build_model(spec, device, mesh)
    timer = _ComputeTimer(list(model.layers), device, spec) if timer_wanted else None
    optimizer = torch.optim.AdamW(
        model.parameters(), lr=spec.learning_rate, betas=(0.9, 0.95), weight_decay=0.0
    )
    _sync(device)
    setup = time.perf_counter() - started
    losses: list[float] = []
    step_seconds: list[float] = []
    compute: list[float] = []
    non_finite: int | None = None
    log = _StepLog(spec, device) if timer_wanted else None
    for step in range(steps):
        try:
            value, seconds, forward, norm = _step(
                spec, model, optimizer, timer, batches[step], step
            )
        except torch.OutOfMemoryError:
            message = _memory_message(step, device)
            del model, optimizer
            gc.collect()
            raise WorkloadOutOfMemory(message) from None
        step_seconds.append(seconds)
        compute.append(forward)
        losses.append(value)
        if log is not None:
            log.step(step, steps, value, norm, step_seconds)
        if not math.isfinite(value):
            non_finite = step
            break
    del model, optimizer
    gc.collect()
    return losses, step_seconds, compute, non_finite, setup


def _step(
    spec: LlmSpec,
    model: Decoder,
    optimizer: torch.optim.Optimizer,
    timer: _ComputeTimer | None,
    tokens: torch.Tensor,
    step: int,
) -> tuple[float, float, float, torch.Tensor]:
    """(loss, seconds, forward compute seconds, gradient norm before clipping) of one step."""
    device = tokens.device
    step_start = time.perf_counter()
    if spec.poison_step is not None and step == spec.poison_step:
        with torch.no_grad():
            cast(Any, model.norm.weight).to_local().fill_(float("nan"))
    for group in optimizer.param_groups:
        group["lr"] = _learning_rate(spec, step)
    if timer:
        timer.active = True
    logits = model(tokens[:, :-1])
    if timer:
        timer.active = False
    loss = F.cross_entropy(logits.flatten(0, 1).float(), tokens[:, 1:].flatten())
    if spec.loss_form == "logits-freed":
        # the loss keeps its fp32 log-softmax for the backward, not the bf16 logits: freed here,
        # as torchtitan does (`del pred` before `loss.backward()`: 0.3.0 trainer.py:814-828, and
        # train.py:303-308 at 3f20451, the run behind the H100 8b floor)
        del logits
    loss.backward()
    norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0, foreach=device.type == "cuda")
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    value = loss.item()  # synchronises the device: the step is done
    _sync(device)
    return value, time.perf_counter() - step_start, timer.take() if timer else 0.0, norm


def _determinism_probe(
    spec: LlmSpec, device: torch.device, batches: torch.Tensor
) -> tuple[list[float], list[float], str | None]:
    """The first determinism_steps steps twice, each from a fresh model of the same seed, with
    PyTorch's deterministic algorithms (the timed run keeps the fast ones: embedding and flash
    attention backwards accumulate with atomics, and differ from run to run in the last bits on a
    healthy GPU). (first losses, rerun losses, why not checked)."""
    import warnings

    steps = min(spec.determinism_steps, spec.steps)
    before = torch.are_deterministic_algorithms_enabled()
    torch.use_deterministic_algorithms(True)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            first = _train(spec, device, batches, steps, False)[0]
            again = _train(spec, device, batches, steps, False)[0]
    except RuntimeError as error:
        # an operation without a deterministic implementation here (cuBLAS before
        # CUBLAS_WORKSPACE_CONFIG was set, on a worker that had made its handles already)
        return [], [], str(error).splitlines()[0][:300]
    finally:
        torch.use_deterministic_algorithms(before)
    return first, again, None


def _batches(spec: LlmSpec, rank: int, world_size: int, device: torch.device) -> torch.Tensor:
    """Every step's batch up front (a second-order walk is sequential in its positions): one
    rank's stream per rank, the same on a rerun. [steps, local batch, seq_len + 1]"""
    chain = build_chain(spec.chain)
    return chain.sample(
        spec.steps * spec.local_batch,
        spec.shape.seq_len + 1,
        seed=(spec.seed * 7919 + rank) * 104729 + world_size,
        device=device,
    ).view(spec.steps, spec.local_batch, spec.shape.seq_len + 1)


def one_node_rate(rank: int, world_size: int, spec: LlmSpec, group: Any) -> float:
    """This rank's tokens/s in a short run over `group` alone (its node's ranks): the yardstick
    the run across nodes is held to. No determinism probe: only the speed is wanted."""
    from torch.distributed.device_mesh import DeviceMesh

    from gpuaccept.llm.figures import timed_rate
    from gpuaccept.measure.collectives import rank_device

    device = rank_device(rank)
    spec = for_world(spec, world_size)
    batches = _batches(spec, rank, world_size, device)
    mesh = DeviceMesh.from_group(group, device.type)
    return timed_rate(_train(spec, device, batches, spec.steps, False, mesh)[1], spec)


def train_rank(rank: int, world_size: int, spec: LlmSpec) -> RankRecord:
    """This rank's part of the workload; the device is the one its process group works on."""
    import os

    from gpuaccept.measure.collectives import rank_device

    started = time.perf_counter()
    # cuBLAS is deterministic with a fixed workspace; read when its handles are first made, so
    # set before this process's first matmul (the determinism probe needs it)
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    device = rank_device(rank)
    spec = for_world(spec, world_size)
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    batches = _batches(spec, rank, world_size, device)
    data_seconds = time.perf_counter() - started
    losses, step_seconds, compute, non_finite, setup = _train(
        spec, device, batches, spec.steps, timer_wanted=True
    )
    wall = time.perf_counter() - started
    probe: list[float] = []
    rerun: list[float] = []
    unchecked = None
    if non_finite is None and spec.determinism_steps:
        probe, rerun, unchecked = _determinism_probe(spec, device, batches)
    record = RankRecord(
        spec=spec,
        rank=rank,
        world_size=world_size,
        device=str(device),
        device_name=torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
        losses=losses,
        step_seconds=step_seconds,
        compute_seconds=compute,
        probe_losses=probe,
        rerun_losses=rerun,
        determinism_unchecked=unchecked,
        setup_seconds=data_seconds + setup,
        wall_seconds=wall,
        non_finite_step=non_finite,
    )
    if device.type == "cuda":
        record.peak_memory_bytes = torch.cuda.max_memory_allocated(device)
        record.reserved_memory_bytes = torch.cuda.max_memory_reserved(device)
        record.total_memory_bytes = torch.cuda.get_device_properties(device).total_memory
    return record
