"""The fused n-body kernel where Triton cannot build its launcher (issue #30 §8): under `auto`
the torch path runs, said in a line; asked for by name, exit 3 in one line, never a traceback."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from gpuaccept.errors import EnvironmentProblem
from gpuaccept.measure import nbody


def _no_compiler(*args: object, **kwargs: object) -> torch.Tensor:
    # what triton/runtime/build.py raises on a machine without gcc or clang
    raise RuntimeError("Failed to find C compiler. Please specify via CC environment variable.")


def test_auto_falls_back_to_the_torch_path_and_says_why(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(nbody, "kernel_accelerations", _no_compiler)
    kernel, said = nbody.usable_kernel(nbody.FUSED, "auto", torch.device("cpu"))
    assert kernel == nbody.TILED
    assert said == (
        "the fused Triton kernel cannot run here (RuntimeError: Failed to find C compiler. "
        "Please specify via CC environment variable.): the torch path runs"
    )


def test_triton_by_name_is_an_environment_problem(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(nbody, "kernel_accelerations", _no_compiler)
    with pytest.raises(EnvironmentProblem, match=r"^--kernel triton cannot run here \("):
        nbody.usable_kernel(nbody.FUSED, "triton", torch.device("cpu"))


def test_the_torch_path_is_never_tried_first() -> None:
    assert nbody.usable_kernel(nbody.TILED, "auto", torch.device("cpu")) == (nbody.TILED, None)


def test_cuobjdump_is_found_on_path_where_triton_ships_none(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """conda-forge's Triton ships no cuobjdump; its cuda-cuobjdump puts one on PATH."""
    triton = pytest.importorskip("triton")
    from gpuaccept.measure.nbody_compiled import _tool

    monkeypatch.setattr(triton, "__file__", str(tmp_path / "site" / "triton" / "__init__.py"))
    tool = tmp_path / "bin" / "cuobjdump"
    tool.parent.mkdir()
    tool.write_text("#!/bin/sh\n")
    tool.chmod(0o755)
    monkeypatch.setenv("PATH", str(tool.parent))
    assert _tool("cuobjdump") == tool
    monkeypatch.setenv("PATH", str(tmp_path / "nowhere"))
    with pytest.raises(EnvironmentProblem, match="cuobjdump is neither beside Triton's backend"):
        _tool("cuobjdump")
