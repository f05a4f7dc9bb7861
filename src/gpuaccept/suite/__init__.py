"""The acceptance suite: which checks a level runs (selection, levels), the warm workers they
run in (worker, pool), and the run that gathers them into one report (runner).

The names below load their module on first use (PEP 562): `gpuaccept --help` needs only the check
names from `selection`, and must not pay for pydantic, the references or torch.
"""

from __future__ import annotations

import importlib
from typing import Any

_WHERE = {
    "CHECKS": "selection",
    "LEVELS": "selection",
    "CheckSpec": "selection",
    "check_names": "selection",
    "select_checks": "selection",
    "DEFAULT_TIMEOUT_SECONDS": "selection",
    "level_settings": "levels",
    "SuiteOutcome": "runner",
    "merge_device_results": "runner",
    "run_acceptance": "runner",
    "run_suite": "runner",
}

__all__ = sorted(_WHERE)


def __getattr__(name: str) -> Any:
    if name not in _WHERE:
        raise AttributeError(f"module 'gpuaccept.suite' has no attribute {name!r}")
    return getattr(importlib.import_module(f"gpuaccept.suite.{_WHERE[name]}"), name)
