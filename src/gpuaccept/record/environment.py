"""Environment capture: what ran where (stack, GPUs, pixi environment and lock, image, job ids).

Unknown values are None, never placeholder strings; every probe is isolated, so one failing
probe leaves its field None and never aborts the capture. Strings are made JSON-safe at the end
(undecodable bytes in paths or hostnames become U+FFFD), so any writer can serialise a capture.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import re
import socket
import subprocess
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

# Where our Dockerfile writes the image's OCI labels (a container cannot read its own labels),
# and where Apptainer keeps the labels it carried over from the Docker image.
IMAGE_LABEL_FILES = (Path("/etc/gpuaccept/image-labels.json"), Path("/.singularity.d/labels.json"))
_OCI = "org.opencontainers.image."
_GIT_TIMEOUT_SECONDS = 5.0


def _probe(read: Callable[[], Any]) -> Any:
    try:
        return read()
    except Exception:
        return None


def _or_none(value: Any) -> Any:
    """Empty strings are unknowns, not values."""
    if isinstance(value, str) and not value.strip():
        return None
    return value


def _torch() -> dict[str, Any]:
    import torch

    return {
        "version": torch.__version__,
        "cuda": torch.version.cuda,
        "arch_list": torch.cuda.get_arch_list() if torch.cuda.is_available() else [],
        "debug_build": bool(torch.version.debug),
    }


def _cudnn_version() -> str | None:
    import torch

    version = torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None
    if not version:
        return None
    # cuDNN 9 encodes major*10000 + minor*100 + patch; cuDNN 8 major*1000 + minor*100 + patch.
    major, rest = (version // 10000, version % 10000) if version >= 90000 else divmod(version, 1000)
    return f"{major}.{rest // 100}.{rest % 100}"


def _nccl_version() -> str | None:
    import torch

    if not torch.cuda.is_available() or not torch.distributed.is_nccl_available():
        return None
    version = torch.cuda.nccl.version()
    if isinstance(version, tuple):
        return ".".join(str(part) for part in version)
    return str(version)


def _cuda() -> dict[str, Any]:
    import torch

    from gpuaccept.probe.hardware import driver_versions

    driver, driver_cuda = _probe(driver_versions) or (None, None)
    return {
        "runtime": torch.version.cuda,
        "driver": f"{driver_cuda[0]}.{driver_cuda[1]}" if driver_cuda else None,
        "driver_version": driver,
        "cudnn": _probe(_cudnn_version),
        "nccl": _probe(_nccl_version),
    }


def _gpus() -> list[dict[str, Any]]:
    from gpuaccept.probe.hardware import list_cuda_gpus
    from gpuaccept.probe.nvml_health import board_identity

    return [
        {
            "index": gpu.index,
            "name": gpu.name,
            "uuid": gpu.uuid,
            "pci_bus_id": gpu.pci_bus_id,
            "memory_bytes": gpu.memory_bytes,
            "compute_capability": f"{gpu.capability[0]}.{gpu.capability[1]}",
            "multiprocessors": gpu.multiprocessors,
            # the board behind the UUID, for a GPU's life across hosts and its RMA (#31 §4)
            **board_identity(gpu.index, gpu.uuid),
        }
        for gpu in list_cuda_gpus()
    ]


def _read_key_values(path: Path, separator: str) -> dict[str, str]:
    values: dict[str, str] = {}
    for line in path.read_text(errors="replace").splitlines():
        key, found, value = line.partition(separator)
        if found and key.strip() not in values:
            values[key.strip()] = value.strip()
    return values


def _cpu_model() -> str | None:
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.is_file():
        fields = _read_key_values(cpuinfo, ":")
        # x86 says "model name"; arm64 kernels often give only implementer and part numbers.
        for key in ("model name", "Model", "Hardware", "cpu model"):
            if _or_none(fields.get(key)):
                return str(fields[key])
        if "CPU implementer" in fields and "CPU part" in fields:
            return f"arm implementer {fields['CPU implementer']} part {fields['CPU part']}"
    processor = platform.processor().strip()
    return processor or None


def _memory_bytes() -> int | None:
    meminfo = Path("/proc/meminfo")
    if meminfo.is_file():
        total = _read_key_values(meminfo, ":").get("MemTotal", "")
        if total.endswith("kB") and total[:-2].strip().isdigit():
            return int(total[:-2].strip()) * 1024
    return int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))


def _os_name() -> str | None:
    release = Path("/etc/os-release")
    if release.is_file():
        pretty = _read_key_values(release, "=").get("PRETTY_NAME", "").strip('"')
        if pretty:
            return pretty
    return f"{platform.system()} {platform.release()}".strip() or None


def container_runtime(environ: Mapping[str, str], root: Path = Path("/")) -> str | None:
    """Which container runtime this process runs under, or None when it is not in a container."""
    if environ.get("APPTAINER_CONTAINER") or environ.get("SINGULARITY_CONTAINER"):
        return "apptainer"
    if (root / ".singularity.d").is_dir():
        return "apptainer"
    if (root / "run/.containerenv").exists():
        return "podman"
    if (root / ".dockerenv").exists():
        return "docker"
    cgroup = root / "proc/1/cgroup"
    if cgroup.is_file():
        text = cgroup.read_text(errors="replace")
        for marker, name in (("kubepods", "kubernetes"), ("docker", "docker"), ("lxc", "lxc")):
            if marker in text:
                return name
    return None


def _system() -> dict[str, Any]:
    runtime = _probe(lambda: container_runtime(os.environ))
    return {
        "hostname": _probe(lambda: _or_none(socket.gethostname())),
        "kernel": _probe(lambda: _or_none(platform.release())),
        "architecture": _probe(lambda: _or_none(platform.machine())),
        "os": _probe(_os_name),
        "cpu_model": _probe(_cpu_model),
        "cores": _probe(os.cpu_count),
        "memory_bytes": _probe(_memory_bytes),
        "in_container": runtime is not None,
        "container_runtime": runtime,
        # the machine behind the hostname (issue #31 §4): hostnames are reused, boards move
        **(_probe(machine_identity) or {}),
    }


# Machine identity: systemd's machine-id (machine-id(5): 32 lower-case hex digits, set at
# installation), and the DMI product serial the vendor's RMA names (readable by root only on
# most systems: absent otherwise, never an error).
_MACHINE_ID = Path("/etc/machine-id")
_HEX32 = re.compile(r"[0-9a-f]{32}")
_DMI_PLACEHOLDERS = {"", "none", "not specified", "to be filled by o.e.m.", "default string", "0"}


def machine_identity() -> dict[str, str | None]:
    from gpuaccept.probe.sysfs import read_optional, sysfs_root

    machine_id = read_optional(_MACHINE_ID)
    serial = read_optional(sysfs_root() / "class/dmi/id/product_serial")
    serial = "".join(c for c in serial or "" if c.isprintable()).strip()[:64]
    return {
        "machine_id": machine_id if machine_id and _HEX32.fullmatch(machine_id) else None,
        "product_serial": None if serial.lower() in _DMI_PLACEHOLDERS else serial,
    }


def _find_upwards(name: str, start: Path) -> Path | None:
    for directory in (start, *start.parents):
        if (directory / name).is_file():
            return directory / name
    return None


def _project_root() -> Path | None:
    manifest = os.environ.get("PIXI_PROJECT_MANIFEST")
    if manifest:
        return Path(manifest).parent
    found = _find_upwards("pixi.toml", Path.cwd())
    return found.parent if found else None


def _pixi() -> dict[str, Any]:
    root = _project_root()
    lock = (root / "pixi.lock") if root else None
    lock_sha = hashlib.sha256(lock.read_bytes()).hexdigest() if lock and lock.is_file() else None
    manifest = os.environ.get("PIXI_PROJECT_MANIFEST") or (
        str(root / "pixi.toml") if root and (root / "pixi.toml").is_file() else None
    )
    return {
        "environment": _or_none(os.environ.get("PIXI_ENVIRONMENT_NAME")),
        "manifest": manifest,
        "lock_sha256": lock_sha,
    }


def strip_credentials(url: str) -> str:
    """A URL (a git remote, a container image) with nothing that could be a credential: no
    user:password@ (up to the last @, so a password holding @ or / goes whole), no query or
    fragment (?access_token=..., #token=...), and no password in scp form (user:pw@host:path).
    A plain scp user (git@host:path) stays: it is a name, not a secret."""
    digest = re.search(r"@[a-z0-9]+:[0-9a-f]{32,}$", url, flags=re.IGNORECASE)
    if digest:  # an image's content digest (img@sha256:...) is no credential: keep it whole
        return strip_credentials(url[: digest.start()]) + digest.group(0)
    scheme = re.match(r"^[a-z][a-z0-9+.-]*://", url, flags=re.IGNORECASE)
    if scheme:
        rest = url[scheme.end() :]
        rest = re.split(r"[?#]", rest, maxsplit=1)[0]
        if "@" in rest:
            rest = rest.rsplit("@", 1)[1]
        return scheme.group(0) + rest
    # scp form or a bare image reference: user:password@host... loses everything to the last @
    # when what stands before it holds a colon (a password), else keeps the user
    head, at, tail = url.rpartition("@")
    if at and ":" in head:
        return re.split(r"[?#]", tail, maxsplit=1)[0]
    return re.split(r"[?#]", url, maxsplit=1)[0]


# Git runs commands a repository's own config names: core.fsmonitor on every status, a filter's
# clean/process driver on files whose stat changed. gpuaccept reads the git state of whatever
# directory it runs in (as root on a Slurm node), so it never lets a checkout run code: fsmonitor
# is switched off on the command line, and `status` is skipped (dirty unknown) where the config
# names any filter driver.
_NO_REPOSITORY_COMMANDS = ("-c", "core.fsmonitor=false", "--no-optional-locks")
_EXECUTING_KEYS = re.compile(r"^filter\..+\.(clean|smudge|process)$", re.IGNORECASE)


def _scrubbed(value: Any) -> Any:
    return strip_credentials(value) if isinstance(value, str) else value


def _git_output(directory: Path, *args: str) -> str | None:
    done = subprocess.run(
        ["git", *_NO_REPOSITORY_COMMANDS, "-C", str(directory), *args],
        capture_output=True,
        text=True,
        errors="replace",
        timeout=_GIT_TIMEOUT_SECONDS,
        check=False,
        env={**os.environ, "GIT_TERMINAL_PROMPT": "0"},
    )
    return _or_none(done.stdout.strip()) if done.returncode == 0 else None


def _config_runs_commands(directory: Path) -> bool:
    """Whether any git config in force names a filter driver (status could run it)."""
    keys = _git_output(directory, "config", "--name-only", "--list") or ""
    return any(_EXECUTING_KEYS.match(key) for key in keys.splitlines())


def git_state(directory: Path) -> dict[str, Any] | None:
    """sha, branch, dirty (None: not asked, the config names a filter) and remote of the git
    checkout holding `directory`; None outside one."""
    sha = _git_output(directory, "rev-parse", "HEAD")
    if sha is None:
        return None
    branch = _git_output(directory, "rev-parse", "--abbrev-ref", "HEAD")
    dirty: bool | None = None
    if not _config_runs_commands(directory):
        status = _git_output(directory, "status", "--porcelain", "--untracked-files=no")
        dirty = status is not None
    remote = _git_output(directory, "remote", "get-url", "origin")
    return {
        "sha": sha,
        "branch": None if branch == "HEAD" else branch,  # detached
        "dirty": dirty,
        "remote": strip_credentials(remote) if remote else None,
    }


def _git() -> dict[str, Any] | None:
    # The checkout gpuaccept runs from (editable install), else the project around cwd.
    source = Path(__file__).resolve().parent
    return git_state(source) or (git_state(root) if (root := _project_root()) else None)


def _normalise(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def conda_packages(prefix: Path) -> list[dict[str, Any]]:
    """The packages a conda/pixi environment's conda-meta records."""
    packages = []
    for record in sorted((prefix / "conda-meta").glob("*.json")):
        try:
            data = json.loads(record.read_text())
        except (OSError, ValueError):
            continue
        if isinstance(data, dict) and data.get("name") and data.get("version"):
            packages.append(
                {
                    "name": str(data["name"]),
                    "version": str(data["version"]),
                    "build": _or_none(data.get("build")),
                    "channel": _or_none(data.get("channel")),
                    "source": "conda",
                }
            )
    return packages


def python_distributions() -> list[dict[str, Any]]:
    from importlib import metadata

    packages = []
    for dist in metadata.distributions():
        # each `dist.metadata` (and `dist.version`) parses the whole METADATA file again: read
        # three times, 607 distributions took 0.8 s of every accept run on a GPU image
        found = dist.metadata
        name = found["Name"] if found else None
        if name:
            packages.append(
                {
                    "name": str(name),
                    "version": str(found["Version"]),
                    "build": None,
                    "channel": None,
                    "source": "pypi",
                }
            )
    return packages


def merge_packages(*sources: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One entry per package name, the first source winning (conda-meta over Python metadata).

    conda packages that install Python code show up in both lists under the same name; a name
    found twice on sys.path is listed once, as Python's import would resolve it.
    """
    merged: dict[str, dict[str, Any]] = {}
    for source in sources:
        for package in source:
            merged.setdefault(_normalise(package["name"]), package)
    return sorted(merged.values(), key=lambda package: _normalise(package["name"]))


def _packages() -> list[dict[str, Any]]:
    return merge_packages(conda_packages(Path(sys.prefix)), python_distributions())


def image_labels(files: tuple[Path, ...] = IMAGE_LABEL_FILES) -> dict[str, str]:
    for path in files:
        if path.is_file():
            data = json.loads(path.read_text())
            if isinstance(data, dict):
                return {str(key): str(value) for key, value in data.items()}
    return {}


def container_from_labels(
    labels: Mapping[str, str], job_image: str | None
) -> dict[str, Any] | None:
    """The image this process runs from: its OCI labels, and the reference the scheduler used."""
    if not labels and not job_image:
        return None
    digest = None
    if job_image and "@sha256:" in job_image:
        digest = "sha256:" + job_image.split("@sha256:", 1)[1]
    return {
        "image": _or_none(job_image) or _or_none(labels.get(_OCI + "ref.name")),
        "source": _or_none(labels.get(_OCI + "source")),
        "revision": _or_none(labels.get(_OCI + "revision")),
        "version": _or_none(labels.get(_OCI + "version")),
        "created": _or_none(labels.get(_OCI + "created")),
        "digest": digest,
        "environment": _or_none(labels.get("io.gpuaccept.environment")),
        "lock_sha256": _or_none(labels.get("io.gpuaccept.pixi-lock-sha256")),
    }


_CLASSAD_STRING = re.compile(r'^"((?:[^"\\]|\\.)*)"$')


def parse_classad_value(text: str) -> Any:
    """A literal from a job or machine ad file: string, integer, real or boolean; else the text."""
    text = text.strip()
    string = _CLASSAD_STRING.match(text)
    if string:
        return re.sub(r"\\(.)", r"\1", string.group(1))
    if re.fullmatch(r"-?\d+", text):
        return int(text)
    if re.fullmatch(r"-?\d+\.\d*([eE][-+]?\d+)?", text):
        return float(text)
    if text.lower() in ("true", "false"):
        return text.lower() == "true"
    return text


_MAX_CLASSAD_BYTES = 4 * 1024 * 1024


def read_classad_file(path: Path, wanted: set[str]) -> dict[str, Any]:
    """The wanted attributes of an ad file (`Name = value` lines), case-insensitive as ClassAds."""
    from gpuaccept.input_files import read_input_bytes

    lowered = {name.lower(): name for name in wanted}
    found: dict[str, Any] = {}
    # a job ad is a few KiB; a FIFO or device in its place is refused, never read (it would hang)
    text = read_input_bytes(path, "ClassAd", _MAX_CLASSAD_BYTES).decode("utf-8", "replace")
    for line in text.splitlines():
        key, separator, value = line.partition("=")
        name = lowered.get(key.strip().lower())
        if separator and name and name not in found:
            found[name] = parse_classad_value(value)
    return found


_JOB_AD_ATTRIBUTES = {
    "ClusterId",
    "ProcId",
    "GlobalJobId",
    "Owner",
    "RemoteHost",
    "ContainerImage",
    "JobBatchName",
}


def scheduler_ids(environ: Mapping[str, str]) -> dict[str, Any]:
    """HTCondor ids from the job ad ($_CONDOR_JOB_AD) and Slurm ids from the environment."""
    condor: dict[str, Any] | None = None
    job_ad = environ.get("_CONDOR_JOB_AD")
    if job_ad:
        ad = _probe(lambda: read_classad_file(Path(job_ad), _JOB_AD_ATTRIBUTES)) or {}
        machine_ad = environ.get("_CONDOR_MACHINE_AD")
        machine = (
            _probe(lambda: read_classad_file(Path(machine_ad), {"Machine"})) if machine_ad else None
        )
        condor = {
            "cluster_id": ad.get("ClusterId"),
            "proc_id": ad.get("ProcId"),
            "global_job_id": ad.get("GlobalJobId"),
            "owner": ad.get("Owner"),
            "batch_name": ad.get("JobBatchName"),
            "remote_host": ad.get("RemoteHost"),
            "machine": (machine or {}).get("Machine"),
            "container_image": _scrubbed(ad.get("ContainerImage")),
            "assigned_gpus": _or_none(environ.get("_CONDOR_AssignedGPUs")),
        }
    slurm: dict[str, Any] | None = None
    if environ.get("SLURM_JOB_ID"):
        slurm = {
            key.lower(): _or_none(environ.get(name))
            for key, name in (
                ("job_id", "SLURM_JOB_ID"),
                ("array_job_id", "SLURM_ARRAY_JOB_ID"),
                ("array_task_id", "SLURM_ARRAY_TASK_ID"),
                ("step_id", "SLURM_STEP_ID"),
                ("cluster", "SLURM_CLUSTER_NAME"),
                ("nodelist", "SLURM_JOB_NODELIST"),
            )
        }
    return {
        "htcondor": condor,
        "slurm": slurm,
        "cuda_visible_devices": _or_none(environ.get("CUDA_VISIBLE_DEVICES")),
    }


def _container(scheduler: dict[str, Any] | None) -> dict[str, Any] | None:
    condor = (scheduler or {}).get("htcondor") or {}
    return container_from_labels(_probe(image_labels) or {}, condor.get("container_image"))


def json_safe(value: Any) -> Any:
    """The capture with every string valid UTF-8 (lone surrogates of undecodable bytes replaced)."""
    if isinstance(value, str):
        return value.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
    if isinstance(value, dict):
        return {json_safe(str(key)): json_safe(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [json_safe(item) for item in value]
    return value


def capture_environment() -> dict[str, Any]:
    """A JSON-ready description of this process's stack and place."""
    from gpuaccept.record.identity import resolve_node_name

    scheduler = _probe(lambda: scheduler_ids(os.environ))
    system = _system()
    capture = {
        # the node's one name (record/identity.py), resolved here once: every writer and reader
        # of the report takes it from here
        "node": resolve_node_name(os.environ, system.get("hostname")),
        "git": _probe(_git),
        "cuda": _probe(_cuda),
        "gpus": _probe(_gpus),
        "python": {"version": platform.python_version(), "executable": sys.executable or None},
        "torch": _probe(_torch),
        "system": system,
        "pixi": _probe(_pixi),
        "packages": _probe(_packages),
        "container": _probe(lambda: _container(scheduler)),
        "scheduler": scheduler,
        # how NCCL was steered (NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 make an all-reduce the
        # network's alone): a figure is only comparable with one measured the same way
        "nccl_env": nccl_settings(os.environ),
    }
    return dict(json_safe(capture))


def nccl_settings(environ: Mapping[str, str]) -> dict[str, str]:
    """The NCCL_* variables of this process (NCCL's settings; none of them holds a secret)."""
    return {key: value for key, value in sorted(environ.items()) if key.startswith("NCCL_")}


def stack_sha256(environment: dict[str, Any]) -> str:
    """A digest of the software stack and GPU models in a capture, not of the host it ran on.

    Two nodes with the same lock, torch, driver and GPU models share it, so a saved model can be
    traced to the stack that trained it; hostnames and job ids are left out on purpose.
    """
    cuda = environment.get("cuda") or {}
    stack = {
        "python": (environment.get("python") or {}).get("version"),
        "torch": environment.get("torch"),
        "cuda": {key: cuda.get(key) for key in ("runtime", "driver", "driver_version")},
        "pixi_lock_sha256": (environment.get("pixi") or {}).get("lock_sha256"),
        "gpus": sorted(str((gpu or {}).get("name")) for gpu in (environment.get("gpus") or [])),
    }
    if environment.get("nccl_env"):  # steered NCCL measures something else (kept out when unset,
        stack["nccl_env"] = environment["nccl_env"]  # so earlier captures keep their digest)
    canonical = json.dumps(stack, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(canonical.encode()).hexdigest()
