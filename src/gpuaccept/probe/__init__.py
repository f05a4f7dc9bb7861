"""Probe: what is there (GPUs, driver, NVML health and events, the kernel log). Never judges."""
