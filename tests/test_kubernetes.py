"""k8s/: every manifest validates offline against the bundled schemas of two Kubernetes versions
(kubernetes-validate, strict), and keeps our invariants; node verdicts become exact kubectl
commands."""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from gpuaccept.act.kubernetes import patch_for
from gpuaccept.report.node_verdict import kubectl_commands, node_verdict
from gpuaccept.results import Status
from tests.run_reports import gpu_report, rejudged

REPO = Path(__file__).resolve().parent.parent
MANIFESTS = sorted((REPO / "k8s").glob("*.yaml"))
VERSIONS = ("1.30.0", "1.37.0")
DIGEST = re.compile(r"@sha256:[0-9a-f]{64}$")


def documents() -> list[tuple[str, dict[str, Any]]]:
    found = []
    for path in MANIFESTS:
        for document in yaml.safe_load_all(path.read_text()):
            if document:
                found.append((f"{path.name}:{document['kind']}", document))
    return found


def pod_specs() -> list[tuple[str, dict[str, Any]]]:
    return [
        (name, doc["spec"]["template"]["spec"])
        for name, doc in documents()
        if doc["kind"] in ("Job", "DaemonSet")
    ]


def test_the_manifests_cover_a_job_a_daemonset_and_an_indexed_job() -> None:
    kinds = {name for name, _ in documents()}
    assert {"accept-job.yaml:Job", "accept-daemonset.yaml:DaemonSet"} <= kinds
    indexed = [d for n, d in documents() if n.startswith("multinode-indexed-job.yaml:Job")]
    assert indexed[0]["spec"]["completionMode"] == "Indexed"


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize(
    ("name", "document"), documents(), ids=lambda v: v if isinstance(v, str) else ""
)
def test_manifests_validate_against_kubernetes(
    version: str, name: str, document: dict[str, Any]
) -> None:
    kubernetes_validate.validate(document, version, strict=True)


def test_the_burn_in_job_resumes_after_disruption_and_stops_on_a_verdict() -> None:
    (_, job) = next((n, d) for n, d in documents() if n == "burnin-job.yaml:Job")
    rules = job["spec"]["podFailurePolicy"]["rules"]
    assert rules[0]["action"] == "FailJob"
    assert rules[0]["onExitCodes"]["values"] == [1, 2, 3]
    assert rules[1] == {
        "action": "Ignore",
        "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}],
    }
    spec = job["spec"]["template"]["spec"]
    assert spec["restartPolicy"] == "Never"  # podFailurePolicy requires it
    assert "kubernetes.io/hostname" in spec["nodeSelector"]  # a burn-in is of one node
    [container] = spec["containers"]
    args = container["args"]
    checkpoint = args[args.index("--checkpoint") + 1]
    assert checkpoint.startswith("/results/")  # on the volume, so a new pod finds it
    assert any(
        m["mountPath"] == "/results" and "subPathExpr" in m for m in container["volumeMounts"]
    )
    from tests.cli_paths import resolve_cli

    path, options = resolve_cli(args[1:])
    assert path == ["gpuaccept", "burnin"]
    assert options["duration"] == "24h"


def test_the_validator_rejects_a_broken_manifest() -> None:
    (_, job) = next((n, d) for n, d in documents() if n == "accept-job.yaml:Job")
    broken = yaml.safe_load(yaml.safe_dump(job))
    broken["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"] = "8 GPUs"
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(broken, VERSIONS[0], strict=True)


@pytest.mark.parametrize(
    ("name", "spec"), pod_specs(), ids=lambda v: v if isinstance(v, str) else ""
)
def test_every_pod_keeps_our_invariants(name: str, spec: dict[str, Any]) -> None:
    pod_security = spec["securityContext"]
    assert pod_security["runAsNonRoot"] is True
    assert pod_security["runAsUser"] == 10001  # the image's USER
    for container in spec["containers"]:
        assert DIGEST.search(container["image"]), f"{name}: image by digest only"
        assert "command" not in container, f"{name}: command would skip the image's entrypoint"
        security = container["securityContext"]
        assert security["readOnlyRootFilesystem"] is True
        assert security["allowPrivilegeEscalation"] is False
        assert security["capabilities"]["drop"] == ["ALL"]
        limits, requests = container["resources"]["limits"], container["resources"]["requests"]
        assert {"cpu", "memory", "nvidia.com/gpu"} <= set(limits)
        assert requests["nvidia.com/gpu"] == limits["nvidia.com/gpu"]  # extended resources
        mounts = {m["mountPath"] for m in container["volumeMounts"]}
        assert {"/results", "/tmp"} <= mounts  # writable places on a read-only root
    selector = spec["nodeSelector"]
    assert any(key.startswith("nvidia.com/gpu.") for key in selector)  # GPU Feature Discovery


def _report(passed: bool = True, node: str = "gpu017") -> Any:
    report = gpu_report("pod-xyz", [750.0], passed=passed)
    return rejudged(report, environment={**report.environment, "scheduler": {"node_name": node}})


def test_a_passing_node_is_labelled_and_untainted() -> None:
    verdict = node_verdict(_report())
    assert kubectl_commands(verdict) == [
        [
            "kubectl",
            "label",
            "node",
            "gpu017",
            "gpuaccept.io/verdict=pass",
            "gpuaccept.io/level=standard",
            "gpuaccept.io/checked=2026-11-01",
            "gpuaccept.io/failed-",
            "gpuaccept.io/action=none",
            "--overwrite",
        ],
        ["kubectl", "taint", "node", "gpu017", "gpuaccept.io/unfit:NoSchedule-"],
    ]


def test_a_failing_node_is_tainted_with_its_failed_checks() -> None:
    verdict = node_verdict(_report(passed=False))
    label, taint = kubectl_commands(verdict)
    assert "gpuaccept.io/verdict=fail" in label
    assert "gpuaccept.io/failed=compute" in label
    assert "gpuaccept.io/action=drain" in label  # the report's recommended action
    assert taint == [
        "kubectl",
        "taint",
        "node",
        "gpu017",
        "gpuaccept.io/unfit=compute:NoSchedule",
        "--overwrite",
    ]
    patch = patch_for(
        verdict,
        [
            {"key": "nvidia.com/gpu", "effect": "NoSchedule"},
            {"key": "gpuaccept.io/unfit", "value": "old", "effect": "NoSchedule"},
        ],
    )
    assert patch["spec"]["taints"] == [
        {"key": "nvidia.com/gpu", "effect": "NoSchedule"},
        {"key": "gpuaccept.io/unfit", "value": "compute", "effect": "NoSchedule"},
    ]


def test_a_report_judging_nothing_leaves_the_taint_alone() -> None:
    report = _report()
    skipped = [c.model_copy(update={"status": Status.SKIP}) for c in report.checks]
    verdict = node_verdict(rejudged(report, checks=skipped))
    (label,) = kubectl_commands(verdict)
    assert "gpuaccept.io/verdict=not-judged" in label
    assert not any(part.startswith("gpuaccept.io/action") for part in label)
    taints = [{"key": "gpuaccept.io/unfit", "value": "x", "effect": "NoSchedule"}]
    assert patch_for(verdict, taints)["spec"]["taints"] == taints


def test_the_cli_prints_the_commands_and_refuses_a_bad_node(tmp_path: Path) -> None:
    path = tmp_path / "r.json"
    path.write_text(_report(passed=False).model_dump_json())
    cli = [sys.executable, "-m", "gpuaccept", "node-verdict"]
    done = subprocess.run([*cli, str(path)], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[1] == (
        "kubectl taint node gpu017 gpuaccept.io/unfit=compute:NoSchedule --overwrite"
    )
    bad = subprocess.run(
        [*cli, str(path), "--node", "Bad Node;rm"], capture_output=True, text=True, check=False
    )
    assert bad.returncode == 2
    assert "is not a Kubernetes node name" in bad.stderr
    if importlib.util.find_spec("kubernetes") is not None:
        return  # with the client installed, --apply would reach for a real cluster
    applied = subprocess.run(
        [*cli, str(path), "--apply"], capture_output=True, text=True, check=False
    )
    assert applied.returncode == 3  # no kubernetes client installed here
    assert "pip install kubernetes" in applied.stderr


def test_a_quick_pass_lifts_no_taint_and_a_standard_pass_does() -> None:
    """Issue #31 §3 for Kubernetes, as for Slurm: the pool daemonset's quick check taints a node
    that fails it, and only a passing standard run (k8s/accept-job.yaml, which tolerates the
    taint) lifts it; the failed label stays until then."""
    quick = node_verdict(rejudged(_report(), level="quick"))
    label, *rest = kubectl_commands(quick)
    assert rest == []  # no taint command at all: left as it is
    assert "gpuaccept.io/verdict=pass" in label
    assert not any(part.startswith("gpuaccept.io/failed") for part in label)
    assert not any(part.startswith("gpuaccept.io/action") for part in label)
    assert quick.note == (
        "passed quick: the gpuaccept.io/unfit taint, if set, is lifted by a passing standard run "
        "(k8s/accept-job.yaml tolerates it)"
    )
    assert kubectl_commands(node_verdict(_report()))[1][-1] == "gpuaccept.io/unfit:NoSchedule-"
    lenient = node_verdict(rejudged(_report(), level="quick"), resume_level="quick")
    assert lenient.remove_taint
    assert lenient.note is None
    strict = node_verdict(_report(), resume_level="full")
    assert not strict.remove_taint
    failed_quick = node_verdict(rejudged(_report(passed=False), level="quick"))
    assert failed_quick.taint == "compute"  # a failure taints at any level


def test_node_verdict_says_what_it_left_and_refuses_a_level_it_does_not_know(
    tmp_path: Path,
) -> None:
    from typer.testing import CliRunner

    from gpuaccept.cli import app

    path = tmp_path / "quick.json"
    path.write_text(rejudged(_report(), level="quick").model_dump_json())
    done = CliRunner().invoke(app, ["node-verdict", str(path)])
    assert done.exit_code == 0, done.output
    assert "NoSchedule-" not in done.stdout
    assert done.stderr.strip() == (
        "# gpu017: passed quick: the gpuaccept.io/unfit taint, if set, is lifted by a passing "
        "standard run (k8s/accept-job.yaml tolerates it)"
    )
    wrong = CliRunner().invoke(app, ["node-verdict", str(path), "--resume-level", "max"])
    assert wrong.exit_code == 2
    assert wrong.stderr.strip() == (
        "gpuaccept node-verdict: error: --resume-level 'max': give one of quick, standard, full"
    )
