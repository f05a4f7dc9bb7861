"""torchtitan 0.3.0 training gpuaccept's model shapes on gpuaccept's tokens: run by
`benchmarks/llm_vs_torchtitan.py` under torchrun inside torchtitan's own venv (never imported by
gpuaccept itself; it needs torchtitan, which the project's venv does not hold).

    torchrun --standalone --nproc-per-node 2 benchmarks/titan_launch.py \
        --module titan_launch --config gpuaccept_side [torchtitan --section.key overrides]

with PYTHONPATH=benchmarks:src and GPUACCEPT_TT_SPEC holding the run as JSON (shapes, batch per
rank, steps, learning rate, precision, checkpointing, loss, device). Every torchtitan setting
relied on is cited as torchtitan/<file>:<line> of the 0.3.0 wheel from PyPI (the source as
installed in that venv, read there).

On the CPU torchtitan 0.3.0 does not run as shipped: tools/utils.py:54-60 takes "cuda" wherever
torch reports no accelerator, so the trainer calls torch.cuda.set_device (trainer.py:301) and its
memory monitor torch.cuda.memory_stats (components/metrics.py:38-92). With GPUACCEPT_TT_DEVICE=cpu
this launcher makes torchtitan take "cpu" (gloo is then torch's default backend for it,
distributed/utils.py:512-520) and gives torch.cpu the few calls torchtitan makes of a device
module: the memory monitor reports the process's peak resident set (ru_maxrss), the only peak a
CPU process has, and the peak FLOPS for its MFU is the CPU's measured one the benchmark passes
(GPUACCEPT_TT_PEAK_FLOPS) instead of tools/utils.py:141's table (which has no CPU).
"""

# ruff: noqa: E402  (torchtitan is imported after the CPU patch, which must come first)
from __future__ import annotations

import json
import os
import resource
from collections.abc import Iterator
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

import torch
import torch._utils

SPEC_ENV = "GPUACCEPT_TT_SPEC"
CPU = os.environ.get("GPUACCEPT_TT_DEVICE", "cuda") == "cpu"


def _patch_for_cpu() -> None:
    """Before torchtitan is imported: its device module becomes torch.cpu (see the docstring)."""
    torch._utils._get_available_device_type = lambda: "cpu"  # type: ignore[assignment]
    total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")

    def memory_stats(device: Any = None) -> dict[str, int]:
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # KiB on Linux
        return {"active_bytes.all.peak": peak, "reserved_bytes.all.peak": peak}

    extra = {
        "get_device_name": lambda device=None: "cpu",
        "get_device_properties": lambda device=None: SimpleNamespace(total_memory=total),
        "memory_stats": memory_stats,
        "reset_peak_memory_stats": lambda device=None: None,
        "empty_cache": lambda: None,
    }
    for name, function in extra.items():
        if not hasattr(torch.cpu, name):
            setattr(torch.cpu, name, function)


if CPU:
    _patch_for_cpu()

# torchtitan's imports come after the patch: tools/utils.py reads the device type at import
from torchtitan.components.dataloader import BaseDataLoader
from torchtitan.components.loss import ChunkedLossWrapper, CrossEntropyLoss
from torchtitan.components.metrics import MetricsProcessor
from torchtitan.components.optimizer import LRSchedulersContainer, default_adamw
from torchtitan.components.tokenizer import BaseTokenizer
from torchtitan.config import CompileConfig, DebugConfig, ParallelismConfig, TrainingConfig
from torchtitan.distributed.activation_checkpoint import FullAC, SelectiveAC
from torchtitan.models.common import ComplexRoPE, Embedding, Linear, RMSNorm
from torchtitan.models.common.attention import ScaledDotProductAttention
from torchtitan.models.llama3 import (
    _EMBEDDING_INIT,
    _NORM_INIT,
    Llama3Model,
    _build_llama3_layers,
    _output_linear_init,
    model_registry,
)
from torchtitan.trainer import Trainer

if CPU and os.environ.get("GPUACCEPT_TT_PEAK_FLOPS"):
    import torchtitan.components.metrics as _metrics
    import torchtitan.tools.utils as _tools

    _peak = float(os.environ["GPUACCEPT_TT_PEAK_FLOPS"])
    # metrics.py:347 calls utils.get_peak_flops through the module
    _tools.get_peak_flops = lambda device_name: _peak  # type: ignore[assignment]
    _metrics.utils.get_peak_flops = _tools.get_peak_flops


if CPU:
    import torchtitan.distributed.fsdp as _fsdp
    from torch.distributed.fsdp import FSDPModule

    _divide = _fsdp.disable_fsdp_gradient_division

    def _sum_for_gloo(model: torch.nn.Module) -> None:
        """torchtitan divides the loss by the global token count and sets FSDP's gradient
        divide factor to 1 (distributed/fsdp.py:27-41, 316), which FSDP2 reduce-scatters as
        PREMUL_SUM (torch/distributed/fsdp/_fully_shard/_fsdp_collectives.py:846-851): gloo has
        none. A plain SUM, divided by 1 after, is the same gradient."""
        _divide(model)
        for module in model.modules():
            if isinstance(module, FSDPModule):
                module.set_force_sum_reduction_for_comms(True)

    _fsdp.disable_fsdp_gradient_division = _sum_for_gloo

    import torchtitan.distributed.utils as _dist_utils

    # after the first step torchtitan lowers the collectives' timeout behind a barrier on
    # device_ids=[current_device()] (distributed/utils.py:586; trainer.py:1057-1064), which gloo
    # refuses for "cpu": the CPU run keeps the initial timeout instead
    _dist_utils.set_pg_timeouts = lambda timeout, parallel_dims: None


if not CPU:
    import torchtitan.components.metrics as _gpu_metrics

    _peak_stats = _gpu_metrics.DeviceMemoryMonitor.get_peak_stats

    def _peak_line(self: Any) -> Any:
        """Beside torchtitan's line (whose memory is the reserved peak): the allocator's active
        peak, the figure gpuaccept reports (torch.cuda.max_memory_allocated)."""
        stats = _peak_stats(self)
        from torchtitan.tools.logging import logger

        logger.info(
            f"gpuaccept-peak: active {stats.max_active_gib:.3f} GiB reserved "
            f"{stats.max_reserved_gib:.3f}"
        )
        return stats

    _gpu_metrics.DeviceMemoryMonitor.get_peak_stats = _peak_line  # type: ignore[method-assign]


def _spec() -> dict[str, Any]:
    return json.loads(os.environ[SPEC_ENV])  # type: ignore[no-any-return]


class ChainTokenizer(BaseTokenizer):
    """No text: the tokens are gpuaccept's Markov chain's ids; only the vocabulary size is
    asked of a tokenizer here (trainer.py:567 builds it; the validator, off, would use more)."""

    @dataclass(kw_only=True, slots=True)
    class Config(BaseTokenizer.Config):
        vocab_size: int = 256

    def __init__(self, config: Config, tokenizer_path: str | None = None) -> None:
        super().__init__()
        self.vocab_size = config.vocab_size

    def encode(self, *args: Any, **kwargs: Any) -> list[int]:
        raise NotImplementedError("the chain's tokens are not text")

    def decode(self, *args: Any, **kwargs: Any) -> str:
        raise NotImplementedError("the chain's tokens are not text")

    def get_vocab_size(self) -> int:
        return self.vocab_size


class ChainDataLoader(BaseDataLoader):
    """gpuaccept's tokens, one stream per data-parallel rank, in torchtitan's batch format:
    ({"input", "positions"}, labels) as hf_datasets/text_datasets.py:166 yields. Positions run
    0..seq-1 in every row: one document a sequence, so torchtitan's block-causal mask
    (models/common/decoder.py:292-303) is the plain causal mask gpuaccept's SDPA applies."""

    @dataclass(kw_only=True, slots=True)
    class Config(BaseDataLoader.Config):
        seed: int = 0
        steps: int = 1

    def __init__(
        self,
        config: Config,
        *,
        dp_world_size: int,
        dp_rank: int,
        tokenizer: Any,
        seq_len: int,
        local_batch_size: int,
        snapshot_every_n_steps: int | None = None,
    ) -> None:
        from titan_side import rank_tokens  # beside this file on PYTHONPATH

        self.tokens = rank_tokens(
            config.seed, dp_rank, dp_world_size, config.steps, local_batch_size, seq_len
        )
        self.position = 0
        self.positions = torch.arange(seq_len).expand(local_batch_size, seq_len)

    def __iter__(self) -> Iterator[tuple[dict[str, torch.Tensor], torch.Tensor]]:
        while self.position < len(self.tokens):
            batch = self.tokens[self.position]
            self.position += 1
            yield {"input": batch[:, :-1], "positions": self.positions}, batch[:, 1:]

    def state_dict(self) -> dict[str, Any]:
        return {"position": self.position}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self.position = int(state_dict["position"])


def _model(spec: dict[str, Any]) -> Llama3Model.Config:
    """gpuaccept's shapes as a torchtitan Llama 3 (models/llama3/__init__.py:114-145 is the
    debugmodel this follows): q, k, v as three matmuls (fuse_qkv False: gpuaccept's wq, wk, wv),
    rotary without Llama 3.1's scaling (gpuaccept's), output not tied, FlexAttention (the
    language models' default backend, __init__.py:369-377; SDPA is refused for them,
    models/common/config_utils.py:97-101)."""
    dim, vocab = spec["dim"], spec["vocab"]
    layers = _build_llama3_layers(
        fuse_qkv=False,
        n_layers=spec["layers"],
        dim=dim,
        n_heads=spec["heads"],
        n_kv_heads=spec["kv_heads"],
        hidden_dim=spec["ffn_dim"],
        rope=ComplexRoPE.Config(
            dim=dim // spec["heads"],
            max_seq_len=max(spec["seq_len"], 2048),
            theta=spec["rope_theta"],
            scaling="none",
        ),
        attn_backend="flex",
    )
    if spec["attention"] == "sdpa":
        # torchtitan's own SDPA module (models/common/attention.py:385-445, is_causal, native
        # GQA), which it keeps but no longer offers language models; with it the trainer builds
        # no mask and RoPE still reads the positions (trainer.py:725-745). Flex has no backward
        # on the CPU in torch 2.13 (torch/nn/attention/flex_attention.py _validate_device)
        for layer in layers:
            layer.attention.inner_attention = ScaledDotProductAttention.Config()
    return Llama3Model.Config(
        dim=dim,
        vocab_size=vocab,
        tok_embeddings=Embedding.Config(
            num_embeddings=vocab, embedding_dim=dim, param_init=_EMBEDDING_INIT
        ),
        norm=RMSNorm.Config(normalized_shape=dim, param_init=_NORM_INIT),
        lm_head=Linear.Config(
            in_features=dim, out_features=vocab, param_init=_output_linear_init(dim)
        ),
        layers=layers,
    )


def gpuaccept_side() -> Trainer.Config:
    """The config registry function (config/manager.py:53-160 loads it by --module/--config)."""
    spec = _spec()
    model_spec = model_registry("debugmodel")  # for its parallelize and pipelining functions
    model_spec.model = _model(spec)
    model_spec.flavor = "gpuaccept"
    steps = spec["steps"]
    loss_fn = CrossEntropyLoss.Config(global_vocab_size=spec["vocab"])
    optimizer = default_adamw(lr=spec["learning_rate"], weight_decay=0.0)
    # torch.optim.AdamW's own choice for gpuaccept's parameters: one tensor at a time on the
    # CPU, foreach on CUDA (torchtitan's default: fused, components/optimizer/optimizer.py:109)
    optimizer.implementation = "for-loop" if CPU else "foreach"
    # gpuaccept's selective-op is torchtitan's per-op SelectiveAC, its save list and every second
    # matmul recomputed (distributed/activation_checkpoint.py:185-212; llm/checkpointing.py)
    checkpointing = {"none": None, "full": FullAC.Config(), "selective-op": SelectiveAC.Config()}
    return Trainer.Config(
        # gpuaccept: one F.cross_entropy over the fp32 logits; torchtitan's own configs wrap it
        # in ChunkedLossWrapper (models/llama3/config_registry.py:37-41), which "chunked" picks
        loss=ChunkedLossWrapper.Config(loss_fn=loss_fn) if spec["loss"] == "chunked" else loss_fn,
        hf_assets_path="",
        model_spec=model_spec,
        tokenizer=ChainTokenizer.Config(vocab_size=spec["vocab"]),
        # gpuaccept's AdamW: betas (0.9, 0.95), eps 1e-8, no weight decay (llm/train.py _train)
        optimizer=optimizer,
        # gpuaccept's schedule (llm/train.py _learning_rate): linear warm-up over a tenth of the
        # steps, then linear decay to a tenth of the peak (lr_scheduler.py:50-82, 130-190)
        lr_scheduler=LRSchedulersContainer.Config(
            warmup_steps=max(1, steps // 10),
            decay_ratio=None,
            decay_type="linear",
            min_lr_factor=0.1,
        ),
        training=TrainingConfig(
            local_batch_size=spec["local_batch"],
            seq_len=spec["seq_len"],
            steps=steps,
            max_norm=1.0,
            # configs.py:78-93: fp32 master weights; bf16 or fp32 compute under FSDP2
            mixed_precision_param="bfloat16" if spec["precision"] == "bf16" else "float32",
            disable_cuda_graphs=True,
        ),
        dataloader=ChainDataLoader.Config(seed=spec["seed"], steps=steps),
        # one line a step by default (log_freq 1; config_registry.py:59 sets the same for the
        # debug model), no colour codes, so the benchmark reads every step's figures
        metrics=MetricsProcessor.Config(
            log_freq=int(spec.get("log_freq", 1)), disable_color_printing=True
        ),
        activation_checkpoint=checkpointing[spec["checkpointing"]],
        # FSDP2 alone, its parameters plain tensors sharded by fully_shard as gpuaccept's are
        # ("partial_dtensor": DTensor for model-parallel axes only, config/configs.py:163-172;
        # the default "spmd_types" wants every parameter a DTensor first)
        parallelism=ParallelismConfig(spmd_backend="partial_dtensor"),
        # torch.compile per block and of the loss when asked (configs.py CompileConfig;
        # models/llama3/parallelize.py:57-67), as gpuaccept's --compile compiles each block
        compile=CompileConfig(enable=bool(spec.get("compile"))),
        # the model's initial weights from the run's seed (configs.py:353: None draws a new
        # seed every run, and the loss after N steps moved by 0.04 between two runs)
        debug=DebugConfig(seed=spec["seed"]),
    )


def _train_then_wait(train: Any) -> Any:
    """Trainer.train, then a barrier: no rank tears its process group down while another still
    works. torchtitan's rank 0 sleeps 2 s after the last step ("Sleeping 2 seconds for other
    ranks to complete", trainer.py:1069-1071 of the 0.3.0 wheel) while the other ranks go on to
    Trainer.close and destroy_process_group (train.py:67-75); on the CPU a rank 1 that tore down
    gloo meanwhile twice died of SIGABRT after the last step (2026-11-28 and a fresh clone's
    `.ci/run` of 2026-11-29)."""

    def wrapped(self: Any) -> Any:
        done = train(self)
        if torch.distributed.is_initialized():
            torch.distributed.barrier()
        return done

    return wrapped


if __name__ == "__main__":
    from torchtitan.train import main
    from torchtitan.trainer import Trainer

    Trainer.train = _train_then_wait(Trainer.train)  # type: ignore[method-assign]
    main()
