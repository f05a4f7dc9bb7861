"""An NVML module that writes to file descriptor 1 as it is imported (as a C library may) and
then is not there: `accept --json` must keep the noise off the report's stdout."""

import os

os.write(1, b"noise from a library on fd 1\n")
raise ImportError("no NVML here (a noisy stand-in)")
