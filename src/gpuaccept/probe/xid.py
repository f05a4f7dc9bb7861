"""XID error numbers: what each means and which ones condemn a node.

Names follow the driver's own table, src/common/sdk/nvidia/inc/nverror.h in NVIDIA's
open-gpu-kernel-modules (595.45.04), and NVIDIA's "XID Errors" listing. The critical set is the
union of:
- DCGM's always-failing XIDs, DcgmHealthWatch::BuildXidMappings (modules/health/
  DcgmHealthWatch.cpp:3360-3374, DCGM 4.6): 48 74 79 95 119 120 140, and its memory subsystem's
  failing 64 (:3387);
- Azure HPC health checks' check_gpu_xid list (customTests/azure_gpu_xid.nhc:10): 48 56 57 58 62
  63 64 65 68 69 73 74 79 80 81 92 119 120;
- 94 (contained ECC error). DCGM only warns on it (:3364); an acceptance fails it: a node that
  raises ECC errors before it is handed over is not accepted, whichever application they hit.
Any other XID warns: most are raised by applications (13, 31, 43...) and say nothing certain
about the hardware. Blackwell's NVLink XIDs (136, 137, 144-150, 155) and the retirement and
timeout ones (156-158) are named here and warn: neither DCGM nor aznhc fails them yet.
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
    136: "NVLink training failed (ALI_TRAINING_FAIL)",
    137: "NVLink privilege error (NVLINK_PRIV_ERR)",
    140: "unrecovered ECC error escaped (UNRECOVERABLE_ECC_ERROR_ESCAPE)",
    143: "GPU initialisation error (GPU_INIT_ERROR)",
    144: "NVLink SAW error",
    145: "NVLink RLW error",
    146: "NVLink TLW error",
    147: "NVLink TREX error",
    148: "NVLink NVLPW control error",
    149: "NVLink NETIR error",
    150: "NVLink MSE error",
    154: "GPU recovery action changed (see the NVML recovery action)",
    155: "NVLink software-defined error",
    156: "resource retirement event",
    157: "resource retirement failure",
    158: "GPU fatal timeout",
}

DCGM_FAILING_XIDS = frozenset({48, 64, 74, 79, 95, 119, 120, 140})
AZNHC_XIDS = frozenset({48, 56, 57, 58, 62, 63, 64, 65, 68, 69, 73, 74, 79, 80, 81, 92, 119, 120})
CRITICAL_XIDS = DCGM_FAILING_XIDS | AZNHC_XIDS | {94}
XID_SOURCE = (
    "driver nverror.h and NVIDIA's XID listing; critical set: DCGM's failing XIDs, Azure HPC "
    "health checks' check_gpu_xid, and 94"
)


def describe_xid(xid: int) -> str:
    return XID_MEANINGS.get(xid, "not in gpuaccept's table (see NVIDIA's XID listing)")


def is_critical(xid: int) -> bool:
    return xid in CRITICAL_XIDS


# XID 154's NVML form, the recovery action the driver asks for, judged as DCGM's
# DcgmHealthWatch::MonitorGpuRecoveryAction does (DcgmHealthWatch.cpp:2150-2186): reset, reboot and
# drain-and-reset fail, drain P2P warns. NVML added bus reset and system reboot after DCGM 4.6;
# both take the node out of service, so they fail too.
FAILING_RECOVERY_ACTIONS = frozenset(
    {"GPU reset", "node reboot", "drain and reset", "bus reset", "system reboot"}
)
