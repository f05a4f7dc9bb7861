"""`gpuaccept accept`: the acceptance suite."""

from __future__ import annotations

from gpuaccept.errors import NotBuiltError


def accept() -> None:
    """Run the acceptance suite on the GPUs this process was given."""
    raise NotBuiltError("`gpuaccept accept` is not built yet (tracked in issue #3)")
