"""What a node must have beyond its GPUs (issue #24): a node profile, a TOML file an operator
writes once per node type, and the `accept` options that override it.

```toml
# hgx-h100.toml
nics = 8                  # InfiniBand/RoCE ports that must be ACTIVE
nic_rate_gbps = 400       # the rate each must run at (NDR)
nvme = 8                  # NVMe controllers
cpus = 224                # logical CPUs
min_cpu_mhz = 2000        # every CPU's current frequency at least this
min_memory_gbps = 150     # host memory copy bandwidth, per NUMA node
scratch_dir = "/scratch"  # where checkpoints are written
min_scratch_write_gbps = 2.0
min_scratch_read_gbps = 4.0
max_fsync_ms = 5.0        # 99th percentile of a 4 KiB write + fsync
```
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from gpuaccept.errors import InputError

_MAX_PROFILE_BYTES = 64 * 1024
# Linux's limits (include/uapi/linux/limits.h): a longer path or name is refused by every system
# call with ENAMETOOLONG, which Python 3.11's Path.is_dir raises rather than answers False
_PATH_MAX = 4096
_NAME_MAX = 255


class NodeExpectation(BaseModel):
    """Every expectation is optional: what is not given is not required (and says so)."""

    # strict: `nics = true` or `nics = "8"` is a mistake, not 1 or 8
    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)

    nics: int | None = Field(default=None, ge=0, le=1024)
    nic_rate_gbps: float | None = Field(default=None, gt=0, le=1e5, allow_inf_nan=False)
    nvme: int | None = Field(default=None, ge=0, le=1024)
    cpus: int | None = Field(default=None, ge=1, le=1 << 16)
    min_cpu_mhz: float | None = Field(default=None, gt=0, le=1e5, allow_inf_nan=False)
    min_memory_gbps: float | None = Field(default=None, gt=0, le=1e5, allow_inf_nan=False)
    scratch_dir: Path | None = Field(default=None, strict=False)  # TOML has no path type
    min_scratch_write_gbps: float | None = Field(default=None, gt=0, le=1e4, allow_inf_nan=False)
    min_scratch_read_gbps: float | None = Field(default=None, gt=0, le=1e4, allow_inf_nan=False)
    max_fsync_ms: float | None = Field(default=None, gt=0, le=1e5, allow_inf_nan=False)
    # the RDMA ports that carry the GPUs' traffic, by device (`mlx5_ib0`) or port (`mlx5_ib0:1`),
    # as aznhc's per-SKU confs name them; the others (frontend, storage) are not held to them
    rails: list[Annotated[str, Field(pattern=r"^[A-Za-z0-9_.-]{1,64}(:[0-9]{1,3})?$")]] | None = (
        Field(default=None, min_length=1, max_length=1024)
    )

    @field_validator("scratch_dir")
    @classmethod
    def _a_path_the_kernel_takes(cls, path: Path | None) -> Path | None:
        """A NUL byte ends a C string: no system call can be given such a path (Python raises
        ValueError "embedded null byte" at the first one), so it is refused here, in one line."""
        if path is None:
            return None
        text = str(path)
        if "\0" in text:
            raise ValueError("holds a NUL byte, which no path can")
        if len(text.encode(errors="surrogateescape")) >= _PATH_MAX:
            raise ValueError(f"is longer than the kernel's PATH_MAX ({_PATH_MAX} bytes)")
        if any(len(part.encode(errors="surrogateescape")) > _NAME_MAX for part in path.parts):
            raise ValueError(f"has a name longer than the kernel's NAME_MAX ({_NAME_MAX} bytes)")
        return path

    def with_overrides(self, **given: object) -> NodeExpectation:
        """This profile with the options that were given (None: keep the profile's)."""
        return self.model_copy(update={k: v for k, v in given.items() if v is not None})

    @property
    def empty(self) -> bool:
        return all(value is None for value in self.model_dump().values())


def load_node_profile(path: Path) -> NodeExpectation:
    """Read and validate a node profile; any fault is one InputError naming the file."""
    from gpuaccept.input_files import first_validation_error, read_toml_input

    shown = f"--node-profile {path}"
    raw = read_toml_input(path, "node profile", shown, _MAX_PROFILE_BYTES)
    try:
        profile = NodeExpectation.model_validate(raw)
    except ValidationError as error:
        raise InputError(f"{shown}: {first_validation_error(error)}") from None
    if not profile.model_dump(exclude_none=True):
        raise InputError(f"{shown}: names no expectation (see docs/accept.md for its keys)")
    scratch = profile.scratch_dir
    if scratch is not None:
        _check_scratch_dir(scratch, shown)
    return profile


def _check_scratch_dir(scratch: Path, shown: str) -> None:
    pseudo = (Path("/proc"), Path("/sys"), Path("/dev"))
    try:
        resolved = scratch.resolve()
        usable = scratch.is_dir() and os.access(scratch, os.W_OK | os.X_OK)
    except (OSError, ValueError) as error:  # what the validator let through and the OS refused
        why = error.strerror if isinstance(error, OSError) and error.strerror else str(error)
        raise InputError(f"{shown}: scratch_dir {scratch!r} cannot be used: {why}") from None
    if any(resolved.is_relative_to(p) for p in pseudo):
        raise InputError(
            f"{shown}: scratch_dir {scratch} is on a kernel pseudo-filesystem, not storage"
        )
    if not usable:
        raise InputError(
            f"{shown}: scratch_dir {scratch} is not a directory this user can write in"
        )
