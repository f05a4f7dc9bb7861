"""Process groups: local ranks started by gpuaccept itself, and ranks started by torchrun/srun."""
