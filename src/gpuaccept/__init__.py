"""gpuaccept: is this GPU machine fit for real PyTorch work, and as fast as it should be?"""

__version__ = "0.1.0"
