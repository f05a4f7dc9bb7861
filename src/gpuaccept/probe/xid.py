"""XID error numbers: what each means and which ones condemn a node.

Meanings follow NVIDIA's "XID Errors" listing (docs.nvidia.com/deploy/xid-errors). The critical
set is Azure HPC health checks' `check_gpu_xid` list (customTests/azure_gpu_xid.nhc: 48 56 57 58
62 63 64 65 68 69 73 74 79 80 81 92 119 120) plus 94 and 95 (contained and uncontained ECC
errors, which NVIDIA's listing says need the GPU reset or drained). Any other XID warns: most are
raised by applications (13, 31, 43...) and say nothing certain about the hardware.
"""

from __future__ import annotations

XID_MEANINGS: dict[int, str] = {
    8: "GPU stopped processing (timeout)",
    13: "graphics engine exception (usually the application)",
    31: "GPU memory page fault (usually the application)",
    32: "invalid or corrupted push buffer stream",
    38: "driver firmware error",
    43: "GPU stopped processing (usually the application)",
    45: "preemptive cleanup after a previous error",
    48: "double-bit ECC error",
    56: "display engine error",
    57: "error programming video memory interface",
    58: "unstable video memory interface detected",
    61: "internal micro-controller breakpoint/warning",
    62: "internal micro-controller halt",
    63: "ECC page retirement or row remapping recording event",
    64: "ECC page retirement or row remapper recording failure",
    65: "video processor exception",
    68: "video processor (NVDEC) exception",
    69: "graphics engine class error",
    73: "video processor (NVENC) error",
    74: "NVLink error",
    79: "GPU has fallen off the bus",
    80: "corrupted data sent to GPU",
    81: "VGA subsystem error",
    92: "high single-bit ECC error rate",
    94: "contained ECC error (the affected application must restart)",
    95: "uncontained ECC error (every application on the GPU affected; reset the GPU)",
    109: "context switch timeout",
    119: "GSP RPC timeout",
    120: "GSP error",
    121: "C2C link corrected error",
    140: "unrecovered ECC error",
}

CRITICAL_XIDS = frozenset(
    {48, 56, 57, 58, 62, 63, 64, 65, 68, 69, 73, 74, 79, 80, 81, 92, 94, 95, 119, 120}
)
XID_SOURCE = (
    "NVIDIA XID Errors listing; critical set: Azure HPC health checks check_gpu_xid, plus 94/95"
)


def describe_xid(xid: int) -> str:
    return XID_MEANINGS.get(xid, "not in gpuaccept's table (see NVIDIA's XID listing)")


def is_critical(xid: int) -> bool:
    return xid in CRITICAL_XIDS
