"""pixi.toml: valid for pixi's own schema, and true to our targets, tasks and README."""

from __future__ import annotations

import copy
import json
import re
import tomllib
from importlib.resources import files
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from tests import pixi_invariants as inv


@pytest.fixture(scope="module")
def pixi_schema() -> dict[str, Any]:
    text = (
        files("validate_pyproject_schema_store").joinpath("resources/pixi.schema.json").read_text()
    )
    schema: dict[str, Any] = json.loads(text)
    return schema


def schema_errors(schema: dict[str, Any], manifest: dict[str, Any]) -> list[str]:
    validator = jsonschema.validators.validator_for(schema)(schema)
    return [error.message for error in validator.iter_errors(manifest)]


def test_manifest_is_valid_for_pixis_schema(
    pixi_schema: dict[str, Any], pixi_manifest: dict[str, Any]
) -> None:
    assert "pixi" in pixi_schema.get("$comment", "")  # the real schema, not an empty one
    assert schema_errors(pixi_schema, pixi_manifest) == []


BREAKAGES = {
    "reserved platform name": lambda m: m["workspace"]["platforms"].append(
        {"name": "linux", "platform": "linux-64"}
    ),
    "inline platform with unknown subdir": lambda m: m["workspace"]["platforms"].append(
        {"name": "odd", "platform": "linux-65"}
    ),
    "cuda table without driver": lambda m: m["workspace"]["platforms"].append(
        {"name": "x", "platform": "linux-64", "cuda": {"arch": "9.0"}}
    ),
    "misspelled task key": lambda m: m["tasks"]["accept"].update(command="gpuaccept accept"),
    "environment with unknown key": lambda m: m["environments"]["cuda12"].update(feature=["x"]),
    "dependency spec is a number": lambda m: m["dependencies"].update(numpy=2),
    "unknown workspace key": lambda m: m["workspace"].update(platform=["linux-64"]),
}


@pytest.mark.parametrize("breakage", sorted(BREAKAGES))
def test_schema_check_catches_a_broken_copy(
    pixi_schema: dict[str, Any], pixi_manifest: dict[str, Any], breakage: str
) -> None:
    broken = copy.deepcopy(pixi_manifest)
    BREAKAGES[breakage](broken)
    assert schema_errors(pixi_schema, broken) != []


def test_broken_toml_on_disk_is_rejected(repo: Path, tmp_path: Path) -> None:
    text = (repo / "pixi.toml").read_text()
    broken = tmp_path / "pixi.toml"
    broken.write_text(text.replace("[tasks.accept]", "[tasks.accept", 1))
    with pytest.raises(tomllib.TOMLDecodeError):
        tomllib.loads(broken.read_text())


def test_current_pixi_idioms(pixi_manifest: dict[str, Any]) -> None:
    workspace = pixi_manifest["workspace"]
    assert "project" not in pixi_manifest  # [project] is deprecated since 0.57
    assert workspace["channels"] == ["conda-forge"]
    match = re.fullmatch(r">=\s*0\.(\d+)(\.\d+)?", workspace["requires-pixi"])
    assert match
    assert int(match.group(1)) >= 71
    text = json.dumps(pixi_manifest)
    assert "system-requirements" not in text  # deprecated in favour of rich platforms


@pytest.mark.parametrize("check", inv.ALL_CHECKS, ids=lambda c: c.__name__)
def test_invariant_holds(pixi_manifest: dict[str, Any], check: Any) -> None:
    assert check(pixi_manifest) == []


INVARIANT_BREAKAGES = {
    "feature names unknown platform": (
        inv.check_platform_references,
        lambda m: m["feature"]["cuda12"].update(platforms=["linux-64-cuda-12"]),
    ),
    "environment with no platform": (
        inv.check_environments_have_platforms,
        lambda m: m["environments"].update(odd={"features": ["cuda12", "gb10"]}),
    ),
    "cpu platform listed first": (
        inv.check_cuda_before_cpu,
        lambda m: m["workspace"]["platforms"].insert(
            0, {"name": "early-cpu", "platform": "linux-64"}
        ),
    ),
    "cuda-version drifts from driver floor": (
        inv.check_stacks,
        lambda m: m["target"]["linux-64-cuda12"]["dependencies"].update({"cuda-version": "12.6.*"}),
    ),
    "cpu platform takes the gpu build": (
        inv.check_stacks,
        lambda m: m["target"]["linux-64-cpu"]["dependencies"].update({"pytorch-gpu": "*"}),
    ),
    "task runs a loose script": (
        inv.check_cli_tasks,
        lambda m: m["tasks"]["accept"].update(cmd="python tasks/accept.py"),
    ),
    "task passes an option the CLI lacks": (
        inv.check_cli_tasks,
        lambda m: m["tasks"]["train"].update(cmd="gpuaccept train mnist --epoch 20"),
    ),
    "task names a missing command": (
        inv.check_cli_tasks,
        lambda m: m["tasks"]["bench"].update(cmd="gpuaccept benchmark"),
    ),
}


@pytest.mark.parametrize("breakage", sorted(INVARIANT_BREAKAGES))
def test_invariant_catches_a_broken_copy(pixi_manifest: dict[str, Any], breakage: str) -> None:
    check, breaking = INVARIANT_BREAKAGES[breakage]
    broken = copy.deepcopy(pixi_manifest)
    breaking(broken)
    assert check(broken) != []


def test_readme_targets_table_matches_pins(repo: Path, pixi_manifest: dict[str, Any]) -> None:
    readme = (repo / "README.md").read_text()
    assert len(inv.readme_targets(readme)) == len(pixi_manifest["workspace"]["platforms"])
    assert inv.check_readme_targets(pixi_manifest, readme) == []


def test_readme_check_catches_drift(repo: Path, pixi_manifest: dict[str, Any]) -> None:
    readme = (repo / "README.md").read_text().replace("| 13.0 |", "| 12.9 |", 1)
    assert inv.check_readme_targets(pixi_manifest, readme) != []


def test_train_task_keeps_the_seed_defaults(pixi_manifest: dict[str, Any]) -> None:
    from tests.cli_paths import resolve_cli

    path, params = resolve_cli(pixi_manifest["tasks"]["train"]["cmd"].split()[1:])
    assert path == ["gpuaccept", "train", "mnist"]
    assert params["epochs"] == 20
    assert params["save_model"] is not None


def test_container_environments_hold_one_platform_each(pixi_manifest: dict[str, Any]) -> None:
    assert inv.environment_platforms(pixi_manifest, "cuda12") == {"linux-64-cuda12"}
    assert inv.environment_platforms(pixi_manifest, "gb10") == {"linux-aarch64-cuda13"}
    for env in ("test", "lint"):
        platforms = inv.environment_platforms(pixi_manifest, env)
        assert platforms
        assert all(
            p.cuda is None for p in inv.workspace_platforms(pixi_manifest) if p.name in platforms
        )


def test_python_pin_agrees_with_pyproject(
    pixi_manifest: dict[str, Any], pyproject: dict[str, Any]
) -> None:
    pinned = pixi_manifest["dependencies"]["python"].removesuffix(".*")
    floor = pyproject["project"]["requires-python"].removeprefix(">=")
    assert tuple(map(int, pinned.split("."))) >= tuple(map(int, floor.split(".")))


@pytest.mark.parametrize("extra", ["test", "lint"])
def test_pixi_feature_installs_the_pyproject_extra(
    pixi_manifest: dict[str, Any], pyproject: dict[str, Any], extra: str
) -> None:
    feature = pixi_manifest["feature"][extra]
    provided = {*feature.get("dependencies", {}), *feature.get("pypi-dependencies", {})}
    provided |= set(pixi_manifest["dependencies"])  # every environment has these
    # a requirement limited to Linux x86-64 by its marker may come from that platform's target
    linux_64 = feature.get("target", {}).get("linux-64-cpu", {})
    on_linux_64 = {*linux_64.get("dependencies", {}), *linux_64.get("pypi-dependencies", {})}
    for requirement in pyproject["project"]["optional-dependencies"][extra]:
        name = re.split(r"[<>=!~\[ ;]", requirement, maxsplit=1)[0]
        marker = requirement.partition(";")[2]
        if "platform_machine == 'x86_64'" in marker and "sys_platform == 'linux'" in marker:
            assert name in on_linux_64 | provided, f"{name} ({marker.strip()})"
        else:
            assert name in provided, name


def test_lock_file_is_marked_generated(repo: Path) -> None:
    attributes = (repo / ".gitattributes").read_text().split("\n")
    assert any(re.match(r"pixi\.lock\s.*linguist-generated", line) for line in attributes)
