"""k8s/preflight-indexed-job.yaml (its schema is tests/test_kubernetes.py's, which reads every
manifest): the init container's arguments are options `gpuaccept preflight` takes, its gang is
the Job's size and finds pod 0 where Kubernetes names it, and the workload cannot start before
the preflight ends."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer
import yaml

from gpuaccept.cli.preflight import preflight
from gpuaccept.suite.gang import DEFAULT_PORT, LEADER_ENV, SIZE_ENV

MANIFEST = Path(__file__).resolve().parent.parent / "k8s" / "preflight-indexed-job.yaml"


def _documents() -> dict[str, Any]:
    return {d["kind"]: d for d in yaml.safe_load_all(MANIFEST.read_text()) if d}


def test_the_init_container_runs_preflight_with_the_gang_of_the_whole_job() -> None:
    documents = _documents()
    job, service = documents["Job"], documents["Service"]
    spec = job["spec"]
    assert spec["completionMode"] == "Indexed"
    # every pod at once: a gang waiting for a pod the Job starts later would run out its budget
    assert spec["parallelism"] == spec["completions"]
    pod = spec["template"]["spec"]
    assert pod["subdomain"] == service["metadata"]["name"]
    assert service["spec"]["clusterIP"] == "None"
    assert service["spec"]["selector"] == {"job-name": job["metadata"]["name"]}
    [init] = pod["initContainers"]
    env = {e["name"]: e.get("value") for e in init["env"]}
    assert env[SIZE_ENV] == str(spec["completions"])
    # an Indexed Job's pod is JOB-INDEX, under the headless Service's subdomain
    assert env[LEADER_ENV] == f"{job['metadata']['name']}-0.{service['metadata']['name']}"
    args = init["args"]
    assert args[:2] == ["gpuaccept", "preflight"]
    app = typer.Typer()
    app.command()(preflight)
    parsed = typer.main.get_command(app).make_context("preflight", args[2:]).params
    assert parsed["gang"] is True
    port = parsed["gang_port"] or DEFAULT_PORT
    assert port == service["spec"]["ports"][0]["port"]
    assert {"containerPort": port, "name": "gang"} in init["ports"]
    assert parsed["report_dir"] == Path("/results")
    assert parsed["budget"] <= 60  # seconds before a job, not a sweep
    # the preflight judges the GPUs the workload gets
    [workload] = pod["containers"]
    gpus = workload["resources"]["limits"]["nvidia.com/gpu"]
    assert init["resources"]["limits"]["nvidia.com/gpu"] == gpus
