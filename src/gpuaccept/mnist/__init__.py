"""The MNIST workload: IDX data (directories and tarballs), models, the train loop, checkpoints."""
