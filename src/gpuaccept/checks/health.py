"""health: NVML's view of each GPU at the start of the run: ECC against aznhc's thresholds, row
remapping against DCGM's, page retirement, the recovery action the driver asks for, throttling,
the PCIe link, every NVLink against the count the model should have, fabric registration, and
MIG mode. Where a rule is stricter than the monitoring tool it comes from, the comment says why:
acceptance of a node is judged before it is handed over, not while jobs run on it."""

from __future__ import annotations

from dataclasses import asdict

from gpuaccept.actions import ActionRules, Cause, builtin_rules, judge_of
from gpuaccept.checks.context import CheckContext
from gpuaccept.checks.judging import Findings, measurement_targets
from gpuaccept.checks.load_judging import temperature_violation
from gpuaccept.probe.hardware import load_nvml, nvml_missing_reason
from gpuaccept.probe.nvml_health import GpuHealth, GpuNotFound, read_gpu_health
from gpuaccept.probe.xid import FAILING_RECOVERY_ACTIONS
from gpuaccept.references import ModelReferences
from gpuaccept.results import CheckResult, Status

# The RAS limits (ECC, remapped rows, retired pages) are rows of the action tables' [limit]
# (data/actions.toml, each with its source; a site's --rules may set its own): aznhc's
# check_gpu_ecc for ECC, DCGM's limit for rows remapped for uncorrectable errors. DCGM warns
# there; an acceptance fails: a GPU that has spent 512 rows on uncorrectable errors is not one to
# hand over. (aznhc's remapped-rows rule reads field [3] of a 3-field query and never fires, so it
# is not the source.)
RAS_SOURCE = "aznhc check_gpu_ecc"
ROWS_SOURCE = "DCGM's limit"


# Idle readings: a software power cap or a lowered link speed is how an idle GPU saves power.
_IDLE_NORMAL_REASONS = {"software power cap"}


def _caused(health: GpuHealth, text: str, cause: str) -> Cause:
    return Cause(text, "cause", cause, health.uuid)


def _ras_failures(health: GpuHealth, tag: str, rules: ActionRules | None = None) -> list[str]:
    rules = rules or builtin_rules()
    sram_limit = rules.limit_of("sram_corrected")
    dram_limit = rules.limit_of("dram_ecc")
    rows_limit = rules.limit_of("remapped_rows_uncorrectable")
    full_pages = rules.limit_of("retirement_full_pages")
    failures: list[str] = []
    ecc = health.ecc
    for key, count in sorted(ecc.items()):
        scope, kind, where = key.split("_")
        if where == "sram" and kind == "uncorrected" and count > 0:
            failures.append(
                _caused(
                    health,
                    f"{tag}: {count} uncorrectable SRAM ECC error(s) ({scope})",
                    "ecc-uncorrectable",
                )
            )
        elif where == "sram" and kind == "corrected" and count > sram_limit:
            failures.append(
                _caused(
                    health,
                    f"{tag}: {count} corrected SRAM ECC errors ({scope}) above "
                    + rules.limit_said("sram_corrected", RAS_SOURCE + "'s {value}"),
                    "ecc-limit",
                )
            )
        elif where == "dram" and count > dram_limit:
            failures.append(
                _caused(
                    health,
                    f"{tag}: {count} {kind} DRAM ECC errors ({scope}) above "
                    + rules.limit_said("dram_ecc", RAS_SOURCE + "'s {value}"),
                    "ecc-limit",
                )
            )
    rows = health.remapped_rows_uncorrectable
    if rows is not None and rows >= rows_limit:
        failures.append(
            _caused(
                health,
                f"{tag}: {rows} rows remapped for uncorrectable errors, at or above "
                + rules.limit_said("remapped_rows_uncorrectable", ROWS_SOURCE + " {value}"),
                "remapped-rows-limit",
            )
        )
    retired = (health.retired_pages_sbe or 0) + (health.retired_pages_dbe or 0)
    if health.retired_pages_pending and retired >= full_pages:
        failures.append(
            _caused(
                health,
                f"{tag}: page retirement table full ({retired} pages retired, more pending)",
                "retirement-limit",
            )
        )
    return failures


def _nvlink_failures(health: GpuHealth, model: ModelReferences | None, tag: str) -> list[str]:
    """Too few active links for the model; a model with optional bridges (no expected count)
    is not judged, so a PCIe card never fails on links it does not need. Error counters since
    the driver loaded are only reported: their growth during the run is judged at its end."""
    if model is None or not model.nvlink_links:
        return []
    if health.mig_enabled:
        # NVML reports the links of a MIG-enabled GPU as down; DCGM skips down links there
        # (DcgmHealthWatch.cpp:3004-3010, "Bug 200682374"), and so does this check
        return []
    expected = model.nvlink_links
    active = [link for link in health.nvlinks if link.active]
    if len(active) >= expected:
        return []
    down = [
        str(link.link) if link.state == "inactive" else f"{link.link} {link.state}"
        for link in health.nvlinks
        if not link.active
    ]
    which = f" (down: {', '.join(down)})" if down else ""
    return [
        _caused(
            health,
            f"{tag}: {len(active)} of {expected} NVLinks active{which}; a {model.display} has "
            f"{expected} (datasheet NVLink bandwidth / per-link bandwidth)",
            "nvlink-down",
        )
    ]


def _fabric_findings(
    health: GpuHealth, model: ModelReferences | None, tag: str
) -> tuple[list[str], list[str]]:
    """(failures, warnings) of the fabric registration. On a model built for NVSwitch systems
    (`switch_fabric` in references.toml) a fabric NVML cannot read, or reports as not supported,
    warns: the fabric was not judged (4-GPU boards of the same model have no NVSwitch)."""
    fabric = health.fabric
    if fabric is None or fabric.state in ("not supported", "unreadable"):
        if model is None or not model.switch_fabric:
            return [], []
        why = (
            f"unreadable ({fabric.problem})"
            if fabric is not None and fabric.state == "unreadable"
            else "not reported by this driver"
        )
        return [], [
            f"{tag}: NVSwitch fabric registration {why}: the fabric was not judged "
            f"(a {model.display} on an NVSwitch system registers with it)"
        ]
    if fabric.state != "completed":
        text = (
            f"{tag}: NVSwitch fabric registration {fabric.state} (is nvidia-fabricmanager "
            "running and healthy?)"
        )
    elif fabric.status not in (None, 0):
        text = f"{tag}: NVSwitch fabric registration failed (NVML status {fabric.status})"
    elif fabric.health:
        text = f"{tag}: NVSwitch fabric reports {', '.join(fabric.health)}"
    else:
        return [], []
    return [_caused(health, text, "nvswitch-fabric")], []


def _recovery_verdict(action: str | None, rules: ActionRules | None) -> str:
    """fail, warn or ignore for the recovery action the driver asks for. The built-in verdict is
    DCGM's (reset and reboot fail: DcgmHealthWatch, FIELD-NOTES); a site's `[recovery_action]`
    row that sets another action decides it as any row does (issue #50 §1: fail from reset-gpu
    up, ignore at none, warn between)."""
    if action in (None, "none"):
        return "ignore"
    row = (rules or builtin_rules()).recovery_action.get(str(action))
    if row is not None and row != builtin_rules().recovery_action.get(str(action)):
        return judge_of(row)
    return "fail" if action in FAILING_RECOVERY_ACTIONS else "warn"


def judge_health(
    health: GpuHealth,
    model: ModelReferences | None = None,
    *,
    alone: bool = False,
    rules: ActionRules | None = None,
) -> tuple[list[str], list[str]]:
    """(failures, warnings) for one GPU's snapshot at rest; unknown facts are neither. A GPU
    `alone` on its node (a one-GPU slice of an SXM board, as cloud VMs give) has no peer to
    reach over NVLink or the NVSwitch fabric: its links and registration are reported in the
    details, not held to the model's count."""
    tag = f"gpu{health.index}"
    failures: list[str] = []
    warnings: list[str] = []
    if health.ecc_uncorrectable_volatile:
        failures.append(
            _caused(
                health,
                f"{tag}: {health.ecc_uncorrectable_volatile} uncorrectable ECC error(s)",
                "ecc-uncorrectable",
            )
        )
    if health.retired_pages_pending:
        failures.append(
            _caused(health, f"{tag}: page retirement pending (reset the GPU)", "retirement-pending")
        )
    if health.remapped_rows_failed:
        failures.append(
            _caused(health, f"{tag}: row remapping failed (the GPU needs service)", "remap-failure")
        )
    if health.remapped_rows_pending:
        failures.append(
            _caused(health, f"{tag}: row remapping pending (reset the GPU)", "remap-pending")
        )
    action = health.recovery_action
    verdict = _recovery_verdict(action, rules)
    if verdict == "fail":
        failures.append(
            Cause(
                f"{tag}: the driver asks for a {action} (NVML recovery action)",
                "recovery-action",
                str(action),
                health.uuid,
            )
        )
    elif verdict == "warn":
        warnings.append(
            Cause(
                f"{tag}: the driver asks for {action} (NVML recovery action)",
                "recovery-action",
                str(action),
                health.uuid,
            )
        )
    failures += _ras_failures(health, tag, rules)
    if not alone:
        failures += _nvlink_failures(health, model, tag)
        fabric_failures, fabric_warnings = _fabric_findings(health, model, tag)
        failures += fabric_failures
        warnings += fabric_warnings
    reasons = [r for r in health.throttle_reasons if r not in _IDLE_NORMAL_REASONS]
    if reasons:
        warnings.append(f"{tag}: clocks held back at rest by {', '.join(reasons)}")
    width, width_max = health.pcie_width_current, health.pcie_width_max
    if width is not None and width_max is not None and width < width_max:
        warnings.append(f"{tag}: PCIe link x{width} of x{width_max}")
    gpu_gen, system_gen = health.pcie_gen_max_gpu, health.pcie_gen_max_system
    if gpu_gen is not None and system_gen is not None and system_gen < gpu_gen:
        warnings.append(f"{tag}: PCIe slot allows Gen{system_gen}, the GPU supports Gen{gpu_gen}")
    if health.persistence_mode is False:
        warnings.append(f"{tag}: persistence mode off")
    hot = temperature_violation(
        tag,
        health.temperature_c,
        health.temperature_limit_c,
        health.temperature_limit_kind,
        rules,
        when="at rest",
    )
    if hot is not None and hot[0] in ("fail", "warn"):
        (failures if hot[0] == "fail" else warnings).append(hot[1])
    return failures, warnings


def model_of(context: CheckContext, health: GpuHealth) -> ModelReferences | None:
    key = context.references.model_for(health.name, health.pci_device_id)
    return context.references.models.get(key) if key is not None else None


def run(context: CheckContext) -> CheckResult:
    if context.cpu_mode:
        return CheckResult(
            name="health", area="HEALTH", status=Status.SKIP, message="CPU mode: no GPU to read"
        )
    nvml = load_nvml()
    if nvml is None:
        return CheckResult(
            name="health",
            area="HEALTH",
            status=Status.SKIP,
            message=f"NVML unavailable: {nvml_missing_reason()}",
        )
    from gpuaccept.probe.hardware import list_cuda_gpus

    findings = Findings("health", "HEALTH")
    snapshots = []
    notes = []
    gpus = {gpu.index: gpu for gpu in list_cuda_gpus()}
    for target in measurement_targets(context):
        gpu = gpus[target.index] if target.index is not None else None
        if gpu is None:
            continue
        try:
            health = read_gpu_health(nvml, gpu.index, gpu.uuid)
        except GpuNotFound as error:
            said = f"{target.label}: {error}; its health could not be read"
            if error.lost:
                findings.failures.append(Cause(said, "cause", "lost-gpu", target.uuid))
            else:
                findings.warnings.append(said)
            continue
        if health.mig_instance is not None:
            # A slice: its memory and SMs are what torch reports; ECC, links and fabric belong
            # to the whole GPU, which NVML reads through the parent handle.
            notes.append(
                f"{target.label} is MIG instance {health.mig_instance} "
                f"({gpu.memory_bytes / 2**30:.1f} GiB, {gpu.multiprocessors} SMs): "
                "health read from its parent GPU, performance judged on correctness only"
            )
        snapshots.append(asdict(health))
        alone = len(gpus) == 1
        if alone and health.nvlinks and not health.mig_enabled:
            notes.append(
                f"{target.label} is the node's only GPU: its NVLinks and NVSwitch fabric carry "
                "nothing here (a one-GPU slice of a board), reported, not judged"
            )
        failures, warnings = judge_health(
            health, model_of(context, health), alone=alone, rules=context.action_rules
        )
        findings.failures += failures
        findings.warnings += warnings
    findings.details = {"gpus": snapshots, "notes": notes}
    mig = f"; {'; '.join(notes)}" if notes else ""
    return findings.conclude(
        f"{len(snapshots)} GPU(s): no ECC, retirement, link or fabric faults{mig}"
    )
