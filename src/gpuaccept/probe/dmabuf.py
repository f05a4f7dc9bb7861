"""Whether the node's GPUs can share memory with an RDMA device through dma-buf: GPUDirect RDMA's
route without the nvidia_peermem module (issue #30, the p5 shape's warning).

NCCL asks the CUDA driver the same question before it registers GPU memory by dma-buf:
`cuDeviceGetAttribute(&flag, CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED, dev)`, on a driver of CUDA
11.7 or newer (NVIDIA/nccl 5067397c, src/init.cc:402-419, `dmaBufSupported`; the attribute is
124, src/transport/net_ib/gdaki/doca-gpunetio/src/doca_verbs_cuda_wrapper.h:62-63). NCCL also
needs its network plugin to register by dma-buf and NCCL_DMABUF_ENABLE left on (init.cc:399,
403): those are the job's, not the node's, and are not judged here.

Read through the driver library itself (ctypes, no CUDA context made), in a thread with a time
bound: a driver that does not answer, or is not there, is "not known" (None), never a verdict.
"""

from __future__ import annotations

import ctypes
import threading
from typing import Any

CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED = 124
_MIN_DRIVER = 11070  # cudaDriverGetVersion's 11.7, as NCCL requires (init.cc:411)
READ_SECONDS = 20.0


def _load_libcuda() -> Any:
    return ctypes.CDLL("libcuda.so.1")


def _read(library: Any) -> bool | None:
    if library.cuInit(0) != 0:
        return None
    version = ctypes.c_int()
    if library.cuDriverGetVersion(ctypes.byref(version)) != 0 or version.value < _MIN_DRIVER:
        return None
    count = ctypes.c_int()
    if library.cuDeviceGetCount(ctypes.byref(count)) != 0 or count.value < 1:
        return None
    for ordinal in range(count.value):
        device, flag = ctypes.c_int(), ctypes.c_int()
        if library.cuDeviceGet(ctypes.byref(device), ordinal) != 0:
            return None
        attribute = CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED
        if library.cuDeviceGetAttribute(ctypes.byref(flag), attribute, device) != 0:
            return None
        if flag.value == 0:
            return False  # one GPU without it: NCCL falls back to host staging for that GPU
    return True


def dmabuf_supported(seconds: float = READ_SECONDS) -> bool | None:
    """True when every GPU the CUDA driver lists supports dma-buf, False when one does not, None
    when the driver cannot say (no driver library, one older than 11.7, no GPU, an error, or no
    answer within `seconds`)."""
    answer: list[bool | None] = []

    def read() -> None:
        try:
            answer.append(_read(_load_libcuda()))
        except (OSError, AttributeError):  # no libcuda.so.1, or one without these entry points
            answer.append(None)

    reader = threading.Thread(target=read, name="gpuaccept-dmabuf", daemon=True)
    reader.start()
    reader.join(seconds)
    return answer[0] if answer else None
