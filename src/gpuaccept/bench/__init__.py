"""Measurement kernels: each measures on `cuda` or `cpu` through the same code, never judges."""
