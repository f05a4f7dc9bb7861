"""The sweeps `gpuaccept bench` runs: measure kernels over sizes and shapes, stated as results."""
