"""The configuration each shipped LLM floor was measured with: a floor applies only to a run of
that configuration (issue #52: like for like with its source). A run of another configuration,
or on a GPU model with no floor, has its speed NOT JUDGED, and the check, the run's verdict and
its report say why."""

from __future__ import annotations

from dataclasses import dataclass

from gpuaccept.llm.model import PRESETS, ModelShape, ffn_hidden_dim
from gpuaccept.llm.spec import RunConfiguration


@dataclass(frozen=True)
class FloorConfiguration:
    """What the source ran, and where it says so."""

    configuration: RunConfiguration
    source: str

    def mismatch(self, run: RunConfiguration) -> str | None:
        """Why the floor does not apply to `run` (None: it does)."""
        differences = run.differences(self.configuration)
        if not differences:
            return None
        return (
            f"this run differs from its floor's configuration in {'; '.join(differences)} "
            f"(the floor: {self.configuration.text()}; {self.source})"
        )


_TORCHTITAN_8B = FloorConfiguration(
    RunConfiguration(
        shape=PRESETS["8b"],
        local_batch=2,
        precision="bf16",
        # per operator (train_configs/llama3_8b.toml:53-55 at 3f20451), the logits freed before
        # the backward (train.py:303-308 there)
        checkpointing="selective-op",
        loss_form="logits-freed",
        compile=False,
        world_size=8,
    ),
    source="torchtitan, 8 x H100 96 GB at 500 W, FSDP, table 1 of "
    "benchmarks/llama3_h100_202412_torchtitan.md at b5bcd76",
)

# the 1b preset until 2026-11-29 (llm/model.py): a 6,144-wide SwiGLU, the output its own
_1B_BEFORE_2026_11_29 = ModelShape(
    vocab=128256,
    dim=2048,
    layers=16,
    heads=32,
    kv_heads=8,
    ffn_dim=ffn_hidden_dim(2048, 1024, 1.0),
    seq_len=2048,
)

# (references.toml model, metric) -> the configuration of its shipped floor; a test holds every
# llm_* floor in references.toml to an entry here
FLOOR_CONFIGURATIONS: dict[tuple[str, str], FloorConfiguration] = {
    ("h200", "llm_1b_tokens_per_second_per_gpu"): FloorConfiguration(
        RunConfiguration(
            shape=_1B_BEFORE_2026_11_29,
            local_batch=2,
            precision="bf16",
            checkpointing="none",
            loss_form="logits-kept",
            compile=False,
            world_size=1,
        ),
        source="one H200, docs/results/2026-11-26-nvidia-h200-llm.md",
    ),
    ("h100-sxm", "llm_8b_tokens_per_second_per_gpu"): _TORCHTITAN_8B,
    ("h100-sxm", "llm_8b_mfu"): _TORCHTITAN_8B,
}
