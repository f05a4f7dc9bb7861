"""The configuration each shipped LLM floor was measured with: a floor applies only to a run of
that configuration (issue #52: like for like with its source). A run of another configuration,
or on a GPU model with no floor, has its speed NOT JUDGED, and the check says why."""

from __future__ import annotations

from dataclasses import dataclass

from gpuaccept.llm.train import LlmSpec


@dataclass(frozen=True)
class FloorConfiguration:
    """What the source ran: preset shapes (the metric's name says which), sequences per rank,
    activation checkpointing and compilation."""

    local_batch: int
    checkpointing: str  # ours (none, selective, full), or a policy this project does not run
    compile: bool
    source: str  # where, in a few words

    def mismatch(self, spec: LlmSpec) -> str | None:
        """Why the floor does not apply to `spec` (None: it does)."""
        ran = (
            f"batch {spec.local_batch}, checkpointing {spec.checkpointing}"
            f"{', compiled' if spec.compile else ''}"
        )
        measured = (
            f"batch {self.local_batch}, checkpointing {self.checkpointing}"
            f"{', compiled' if self.compile else ''}"
        )
        if ran == measured:
            return None
        return f"its floor was measured at {measured} ({self.source}); this run was {ran}"


_TORCHTITAN_8B = FloorConfiguration(
    local_batch=2,
    # torchtitan's selective checkpointing is per operator (selective_ac_option = "op"), and it
    # frees the logits before the backward; ours recomputes every second block whole
    checkpointing="per-op selective (torchtitan's; not run here)",
    compile=False,
    source="torchtitan, 8 x H100 at 500 W, benchmarks/llama3_h100_202412_torchtitan.md at b5bcd76",
)

# (references.toml model, metric) -> the configuration of its shipped floor; a test holds every
# llm_* floor in references.toml to an entry here
FLOOR_CONFIGURATIONS: dict[tuple[str, str], FloorConfiguration] = {
    ("h200", "llm_1b_tokens_per_second_per_gpu"): FloorConfiguration(
        local_batch=2,
        checkpointing="none",
        compile=False,
        source="one H200, docs/results/2026-11-26-nvidia-h200-llm.md",
    ),
    ("h100-sxm", "llm_8b_tokens_per_second_per_gpu"): _TORCHTITAN_8B,
    ("h100-sxm", "llm_8b_mfu"): _TORCHTITAN_8B,
}
