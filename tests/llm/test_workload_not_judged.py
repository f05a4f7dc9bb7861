"""What the workload does not judge, it says (issue #52): a GPU model with no floor for the run's
configuration, a floor measured at another configuration, a changed run's convergence."""

from __future__ import annotations

import dataclasses
import tomllib
from importlib import resources

import pytest

from gpuaccept.checks import workload
from gpuaccept.checks.context import RanksOutcome
from gpuaccept.checks.judging import Findings, Target
from gpuaccept.llm.figures import compute_figures
from gpuaccept.llm.floors import FLOOR_CONFIGURATIONS
from gpuaccept.llm.plans import Overrides, llm_spec
from gpuaccept.llm.train import LlmSpec
from gpuaccept.results import Status, Verdict
from tests.llm.helpers import H100, H200, context, record


def concluded(
    spec: LlmSpec, target: Target, ranks: int = 1, **changes: object
) -> tuple[Findings, str, Status]:
    findings = Findings("workload", "TRAIN")
    ran = [dataclasses.replace(record(rank, **changes), spec=spec) for rank in range(ranks)]
    workload.judge(context("cuda"), target, spec, RanksOutcome(ranks, "nccl", ran), findings)
    result = findings.conclude("ok")
    assert result.not_judged == findings.not_judged
    return findings, result.message, result.status


def speed_verdicts(findings: Findings) -> dict[str, Verdict]:
    return {
        m.name: m.verdict
        for m in findings.measurements
        if m.name.startswith(("llm_1b", "llm_8b")) and not m.name.endswith("memory_gib")
    }


def test_1b_on_an_h100_has_no_floor_and_says_speed_not_judged_never_pass() -> None:
    findings, message, status = concluded(llm_spec("1b", "bf16"), H100)
    assert status is Status.WARN
    assert message.startswith(
        "speed NOT JUDGED: no 1b floor for NVIDIA H100 80GB HBM3 (h100-sxm) at 16 layers, dim "
        "2048, 32 heads (8 kv), FFN 8192, vocabulary 128,256, output tied, sequence 2048, batch 2 "
        "per rank, bf16, checkpointing none, logits-freed, eager, 1 rank(s): nothing measured"
    )
    assert findings.details["speed_judged"] is False
    assert "no 1b floor" in findings.details["speed_not_judged"]
    assert findings.not_judged == {"speed": findings.details["speed_not_judged"]}
    assert set(speed_verdicts(findings).values()) == {Verdict.UNCHECKED}


def test_the_h200_1b_floor_never_judges_the_llama_3_2_1b_shapes() -> None:
    """The H200's 1b floor was measured on the 1b of before 2026-11-29 (FFN 6,144, output untied,
    logits kept): today's 1b (Llama 3.2 1B) is another model, its speed NOT JUDGED there."""
    findings, message, status = concluded(llm_spec("1b", "bf16"), H200)
    assert status is Status.WARN
    assert findings.details["speed_judged"] is False
    assert "the h200 llm_1b_tokens_per_second_per_gpu floor does not apply" in message
    assert "FFN 8192, vocabulary 128,256, output tied (not 16 layers" in message
    assert "FFN 6144, vocabulary 128,256, output untied)" in message
    assert "logits-freed (not logits-kept)" in message
    assert set(speed_verdicts(findings).values()) == {Verdict.UNCHECKED}


@pytest.mark.parametrize(
    ("change", "said"),
    [
        ({"checkpointing": "full"}, "checkpointing full (not checkpointing selective-op)"),
        ({"checkpointing": "selective-layer-2"}, "checkpointing selective-layer-2 (not"),
        ({"loss_form": "logits-kept"}, "logits-kept (not logits-freed)"),
        ({"compile": True}, "compiled (not eager)"),
        ({"precision": "fp32"}, "fp32 (not bf16)"),
    ],
)
def test_a_floor_applies_only_to_the_configuration_it_was_measured_with(
    change: dict[str, object], said: str
) -> None:
    """torchtitan's 8b floor judges our 8b at torchtitan's configuration on 8 ranks; any one
    element changed (each a rule of RunConfiguration) and it does not."""
    shipped = llm_spec("8b", "bf16")
    findings, _, status = concluded(shipped, H100, ranks=8)
    assert findings.details["speed_judged"] is True
    assert status is Status.PASS  # 16,384 tokens/s forged, above 0.8 x 5,762
    assert "speed" not in findings.not_judged
    other = dataclasses.replace(shipped, **change)  # type: ignore[arg-type]
    findings, message, status = concluded(other, H100, ranks=8)
    assert status is Status.WARN, "a run at another configuration is not judged as 8b's"
    assert "the h100-sxm llm_8b_tokens_per_second_per_gpu floor does not apply" in message
    assert said in message
    assert "torchtitan, 8 x H100 96 GB at 500 W" in message
    assert set(speed_verdicts(findings).values()) == {Verdict.UNCHECKED}
    assert "speed" in findings.not_judged


def test_the_8b_floor_of_8_ranks_does_not_judge_4() -> None:
    findings, message, _ = concluded(llm_spec("8b", "bf16"), H100, ranks=4)
    assert findings.details["speed_judged"] is False
    assert "4 rank(s) (not 8 rank(s))" in message
    # another batch is another preset's run altogether (llm_custom_*)
    smaller = dataclasses.replace(llm_spec("8b", "bf16"), local_batch=1)
    assert "a changed run" in concluded(smaller, H100, ranks=8)[1]


def test_the_report_carries_the_runs_configuration() -> None:
    findings, _, _ = concluded(llm_spec("8b", "bf16"), H100, ranks=8)
    details = findings.details
    assert details["configuration"] == (
        "32 layers, dim 4096, 32 heads (8 kv), FFN 14336, vocabulary 128,256, output untied, "
        "sequence 8192, batch 2 per rank, bf16, checkpointing selective-op, logits-freed, eager, "
        "8 rank(s)"
    )
    assert (details["ffn_dim"], details["tied_output"], details["loss_form"]) == (
        14336,
        False,
        "logits-freed",
    )


def test_a_changed_run_on_a_gpu_is_not_judged() -> None:
    _, message, status = concluded(llm_spec("1b", "bf16", Overrides(layers=2)), H200)
    assert status is Status.WARN
    assert "a changed run (its shapes or batch are not a preset's)" in message


def test_the_cpu_twin_says_in_its_message_that_its_speed_is_not_judged() -> None:
    outcome = RanksOutcome(2, "gloo", [record()])
    result = workload.conclude(context("cpu"), outcome)
    assert result.details["speed_judged"] is False
    assert "per rank (CPU twin: no MFU, no GPU peak; speed not judged)" in result.message


def test_every_shipped_llm_floor_says_the_configuration_it_was_measured_with() -> None:
    table = tomllib.loads(resources.files("gpuaccept.data").joinpath("references.toml").read_text())
    floors = {
        (model, metric)
        for model, row in table["models"].items()
        for metric in row.get("metrics", {})
        if metric.startswith("llm_")
    }
    assert floors == set(FLOOR_CONFIGURATIONS)


def test_a_run_shorter_than_its_preset_has_its_convergence_not_judged() -> None:
    """`train llm --steps 30` ended above 1b's limit and failed 'did not learn' (issue #52)."""
    short_run = llm_spec("1b", "bf16", Overrides(steps=30))
    assert not short_run.judge_convergence
    findings, message, _ = concluded(short_run, H200, losses=[12.0, 8.0, 5.0, 4.5])
    assert not any("did not learn" in f for f in findings.failures)
    assert findings.details["convergence_judged"] is False
    assert findings.not_judged["convergence"].startswith("a changed run (fewer steps")
    shipped = llm_spec("1b", "bf16")
    findings, _, _ = concluded(shipped, H200, losses=[12.0, 8.0, 5.0, 4.5])
    assert any("did not learn" in f for f in findings.failures)
    # more steps, the same learning rate and shapes: still held to the limit
    assert llm_spec("1b", "bf16", Overrides(steps=120)).judge_convergence
    assert not llm_spec("1b", "bf16", Overrides(learning_rate=1e-2)).judge_convergence
    assert not llm_spec("8b", "bf16", Overrides(batch=1)).judge_convergence
    assert "NOT JUDGED" in workload._summary(
        context("cuda"),
        short_run,
        compute_figures(short_run, [dataclasses.replace(record(), spec=short_run)], 989),
        RanksOutcome(1, "nccl", []),
    )
    assert message


def test_the_pass_message_says_which_plan_ran_and_why() -> None:
    from gpuaccept.llm.plans import accept_spec

    spec = accept_spec("full", cpu=False, gpu_memory_bytes=85_017_493_504, shards=8)
    ran = dataclasses.replace(record(), spec=spec)
    figures = compute_figures(spec, [ran], 989.0)
    message = workload._summary(context("cuda"), spec, figures, RanksOutcome(8, "nccl", [ran]))
    assert message.endswith(f"; chosen as {spec.plan}")
    assert "8b at batch 2 per GPU, checkpointing selective-op" in message
