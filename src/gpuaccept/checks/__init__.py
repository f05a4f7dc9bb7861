"""Acceptance checks, one module per concern; each `run(context)` returns a CheckResult."""
