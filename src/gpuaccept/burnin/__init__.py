"""Burn-in: hours of load, judged in windows across the GPUs of a node (issue #23)."""
