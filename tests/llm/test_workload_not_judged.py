"""What the workload does not judge, it says (issue #52): a GPU model with no floor for the run's
configuration, a floor measured at another configuration, a changed run's convergence."""

from __future__ import annotations

import dataclasses
import tomllib
from importlib import resources

from gpuaccept.checks import workload
from gpuaccept.checks.context import RanksOutcome
from gpuaccept.checks.judging import Findings, Target
from gpuaccept.llm.figures import compute_figures
from gpuaccept.llm.floors import FLOOR_CONFIGURATIONS
from gpuaccept.llm.plans import Overrides, llm_spec
from gpuaccept.llm.train import LlmSpec
from gpuaccept.results import Status, Verdict
from tests.llm.helpers import H200, context, record

H100 = Target(0, "NVIDIA H100 80GB HBM3")


def concluded(spec: LlmSpec, target: Target, **changes: object) -> tuple[Findings, str, Status]:
    findings = Findings("workload", "TRAIN")
    ran = dataclasses.replace(record(**changes), spec=spec)
    workload.judge(context("cuda"), target, spec, RanksOutcome(1, "nccl", [ran]), findings)
    result = findings.conclude("ok")
    return findings, result.message, result.status


def speed_verdicts(findings: Findings) -> dict[str, Verdict]:
    return {m.name: m.verdict for m in findings.measurements if m.name.startswith("llm_1b")}


def test_1b_on_an_h100_has_no_floor_and_says_speed_not_judged_never_pass() -> None:
    findings, message, status = concluded(llm_spec("1b", "bf16"), H100)
    assert status is Status.WARN
    assert message.startswith("speed NOT JUDGED: no 1b floor for NVIDIA H100 80GB HBM3 (h100-sxm)")
    assert findings.details["speed_judged"] is False
    assert "no 1b floor" in findings.details["speed_not_judged"]
    assert set(speed_verdicts(findings).values()) == {Verdict.UNCHECKED}


def test_1b_as_shipped_on_an_h200_is_judged_against_its_floor() -> None:
    findings, _, status = concluded(llm_spec("1b", "bf16"), H200)
    assert findings.details["speed_judged"] is True
    assert speed_verdicts(findings)["llm_1b_tokens_per_second_per_gpu"] is Verdict.FAIL
    assert status is Status.FAIL  # a forged 4,096 tokens/s is below 0.6 x 24,956


def test_a_floor_applies_only_to_the_configuration_it_was_measured_with() -> None:
    other = llm_spec("1b", "bf16", Overrides(checkpointing="full"))
    findings, message, status = concluded(other, H200)
    assert status is Status.WARN, "a slow run at another configuration is not judged as 1b's"
    assert "the h200 llm_1b_tokens_per_second_per_gpu floor does not apply" in message
    assert "measured at batch 2, checkpointing none" in message
    assert "this run was batch 2, checkpointing full" in message
    assert set(speed_verdicts(findings).values()) == {Verdict.UNCHECKED}
    compiled = dataclasses.replace(llm_spec("1b", "bf16"), compile=True)
    assert "this run was batch 2, checkpointing none, compiled" in concluded(compiled, H200)[1]


def test_torchtitans_8b_floor_is_per_op_selective_and_never_ours() -> None:
    """torchtitan's "selective" checkpointing is per operator; ours recomputes every second
    block: its 5,762 tokens/s is no floor for our 8b."""
    spec = llm_spec("8b", "bf16")
    findings, message, status = concluded(spec, H100)
    assert status is Status.WARN
    assert "per-op selective (torchtitan's; not run here)" in message
    assert all(m.reference is None for m in findings.measurements)


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
    assert "8b at batch 2 per GPU, checkpointing full" in message
