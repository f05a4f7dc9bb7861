"""Measure: the kernels, the timer and the training smoke. Each runs on `cuda` or `cpu` through the
same code and returns figures; none judges."""
