"""Our rules for pixi.toml beyond its schema. Each returns a list of problems (empty: ok)."""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from typing import Any

from tests.cli_paths import resolve_cli

CLI_TASKS = ("accept", "bench", "train", "env")


@dataclass(frozen=True)
class Platform:
    name: str
    subdir: str
    cuda: str | None


def workspace_platforms(manifest: dict[str, Any]) -> list[Platform]:
    """The workspace platforms in priority order, string and inline-table entries alike."""
    platforms = []
    for entry in manifest["workspace"]["platforms"]:
        if isinstance(entry, str):
            platforms.append(Platform(entry, entry, None))
            continue
        cuda = entry.get("cuda")
        driver = cuda.get("driver") if isinstance(cuda, dict) else cuda
        subdir = entry.get("platform", entry.get("name"))
        platforms.append(Platform(entry.get("name", subdir), subdir, driver))
    return platforms


def environment_platforms(manifest: dict[str, Any], environment: str) -> set[str]:
    """An environment's platforms: the intersection of its features' platform lists."""
    names = {p.name for p in workspace_platforms(manifest)}
    spec = manifest.get("environments", {}).get(environment, {})
    features = spec if isinstance(spec, list) else spec.get("features", [])
    for feature in features:
        declared = manifest.get("feature", {}).get(feature, {}).get("platforms")
        if declared is not None:
            names &= set(declared)
    return names


def platform_dependencies(manifest: dict[str, Any], platform: str) -> dict[str, str]:
    return {
        **manifest.get("dependencies", {}),
        **manifest.get("target", {}).get(platform, {}).get("dependencies", {}),
    }


def check_platform_references(manifest: dict[str, Any]) -> list[str]:
    names = {p.name for p in workspace_platforms(manifest)}
    problems = []
    for feature, body in manifest.get("feature", {}).items():
        for name in body.get("platforms", []):
            if name not in names:
                problems.append(f"feature {feature!r} names unknown platform {name!r}")
    for target in manifest.get("target", {}):
        if target not in names:
            problems.append(f"[target.{target}] names no workspace platform")
    return problems


def check_environments_have_platforms(manifest: dict[str, Any]) -> list[str]:
    return [
        f"environment {env!r} has no platform (its features' platforms do not intersect)"
        for env in manifest.get("environments", {})
        if not environment_platforms(manifest, env)
    ]


def check_cuda_before_cpu(manifest: dict[str, Any]) -> list[str]:
    """Selection takes the first platform a host satisfies: a CPU twin listed first would win."""
    problems = []
    seen_plain: set[str] = set()
    for platform in workspace_platforms(manifest):
        if platform.cuda is None:
            seen_plain.add(platform.subdir)
        elif platform.subdir in seen_plain:
            problems.append(f"CUDA platform {platform.name!r} is listed after a CPU one")
    return problems


def check_stacks(manifest: dict[str, Any]) -> list[str]:
    """CUDA platforms get the GPU stack pinned to their driver floor; CPU ones the CPU build."""
    problems = []
    for platform in workspace_platforms(manifest):
        deps = platform_dependencies(manifest, platform.name)
        if platform.cuda is None:
            if "pytorch-cpu" not in deps or {"pytorch-gpu", "cuda-version", "nccl"} & set(deps):
                problems.append(f"{platform.name}: a CPU platform must take pytorch-cpu only")
            continue
        missing = {"pytorch-gpu", "torchvision", "cuda-version", "nccl", "nvidia-ml-py"} - set(deps)
        if missing:
            problems.append(f"{platform.name}: missing {sorted(missing)}")
            continue
        if deps["cuda-version"] != f"{platform.cuda}.*":
            problems.append(
                f"{platform.name}: cuda-version {deps['cuda-version']!r} does not match "
                f"the platform's driver floor {platform.cuda}"
            )
    return problems


def check_cli_tasks(manifest: dict[str, Any]) -> list[str]:
    """The front-door tasks run a real `gpuaccept` command with arguments it accepts."""
    problems = []
    tasks = manifest.get("tasks", {})
    for name in CLI_TASKS:
        task = tasks.get(name)
        if not isinstance(task, dict) or not task.get("description"):
            problems.append(f"task {name!r} is missing or has no description")
            continue
        argv = shlex.split(task["cmd"])
        if argv[0] != "gpuaccept":
            problems.append(f"task {name!r} does not run the gpuaccept CLI: {task['cmd']!r}")
            continue
        try:
            resolve_cli(argv[1:])
        except Exception as error:  # the CLI parser's own usage errors
            problems.append(f"task {name!r}: `{task['cmd']}` is not a valid command: {error}")
    return problems


def readme_targets(readme: str) -> list[dict[str, str]]:
    """Rows of the README's targets table: platform, environment, subdir, cuda."""
    rows = []
    for line in readme.splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if len(cells) < 5 or not cells[0].startswith("`"):
            continue
        names = re.findall(r"`([^`]+)`", cells[0])
        rows.append(
            {
                "platform": names[0],
                "environment": names[1] if len(names) > 1 else "",
                "subdir": cells[1].split()[0],
                "cuda": cells[2],
            }
        )
    return rows


def check_readme_targets(manifest: dict[str, Any], readme: str) -> list[str]:
    platforms = {p.name: p for p in workspace_platforms(manifest)}
    rows = readme_targets(readme)
    problems = []
    if {row["platform"] for row in rows} != set(platforms):
        problems.append(
            f"README targets {sorted(r['platform'] for r in rows)} != pixi platforms "
            f"{sorted(platforms)}"
        )
    for row in rows:
        platform = platforms.get(row["platform"])
        if platform is None:
            continue
        pin = platform_dependencies(manifest, platform.name).get("cuda-version", "none")
        if row["subdir"] != platform.subdir or row["cuda"] != pin.removesuffix(".*"):
            problems.append(f"README row {row} disagrees with pixi.toml ({platform}, {pin})")
        if row["environment"] and environment_platforms(manifest, row["environment"]) != {
            platform.name
        }:
            problems.append(f"environment {row['environment']!r} is not exactly {platform.name}")
    return problems


ALL_CHECKS = (
    check_platform_references,
    check_environments_have_platforms,
    check_cuda_before_cpu,
    check_stacks,
    check_cli_tasks,
)
