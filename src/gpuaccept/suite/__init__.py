"""The acceptance suite: which checks a level runs (selection, levels), the warm workers they
run in (worker, pool), and the run that gathers them into one report (runner)."""

from gpuaccept.suite.levels import DEFAULT_TIMEOUT_SECONDS, level_settings
from gpuaccept.suite.runner import SuiteOutcome, merge_device_results, run_acceptance, run_suite
from gpuaccept.suite.selection import CHECKS, LEVELS, CheckSpec, check_names, select_checks

__all__ = [
    "CHECKS",
    "DEFAULT_TIMEOUT_SECONDS",
    "LEVELS",
    "CheckSpec",
    "SuiteOutcome",
    "check_names",
    "level_settings",
    "merge_device_results",
    "run_acceptance",
    "run_suite",
    "select_checks",
]
