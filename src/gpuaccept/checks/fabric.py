"""fabric: the node beyond its GPUs (issue #24), read from sysfs (`probe.fabric`).

Rules, each with where it comes from:
- A port not `ACTIVE` / `LinkUp` fails with its name: NHC's `check_hw_ib` requires exactly that
  state and physical state (mej/nhc scripts/lbnl_hw.nhc, 02ffddc).
- A port below the expected rate fails (`--expect-nic-rate`, as aznhc's `check_hw_ib 400
  mlx5_ib0:1` for an ND H100 v5 node: Azure/azurehpc-health-checks conf/nd96isr_h100_v5.conf:
  19-26); without an expectation, a port slower than the node's fastest port of the same link
  layer warns (a cable that trained at half rate).
- Fewer ACTIVE InfiniBand/RoCE ports than `--expect-nics`, or NVMe controllers than
  `--expect-nvme` (aznhc `check_nvme_count 8`, the same conf:39), fails.
- PKeys: an InfiniBand port whose partition keys differ from the node's other ports warns
  (ClusterMAX's expectation of PKey consistency, as issue #24 quotes it).
- GPUDirect RDMA: GPUs and RDMA ports with neither the `nvidia_peermem` module nor dma-buf
  support on every GPU (the CUDA driver's answer, as NCCL asks it: probe/dmabuf.py) warns; a
  driver that cannot be asked warns that dma-buf was not checked.
- Topology: each GPU's nearest RDMA port is on its PCIe switch, else on its NUMA node; a GPU
  with neither, or an RDMA port on a NUMA node without GPUs, warns. A rail of the rails' kind
  slotted off every GPU's switch counts as a rail and warns (`port_roles`); on a node of one
  NUMA node, `numa_node` -1 is local, not far (`affinity_map`). (The worker that drives a
  GPU already runs on the GPU's NUMA node: `probe.numa.run_near`.)
- Link flaps: "lost carrier" lines for an InfiniBand interface within the last 24 hours, 5 or
  more per interface, fail; fewer warn (aznhc's `check_ib_link_flapping` defaults, 24 h and 5,
  and its `-ge` comparison: customTests/azure_ib_link_flapping.nhc at Azure/azurehpc-health-
  checks 0ce3f7c). Each line is dated by its own stamp (`probe.kernel_log.parse_link_flaps`); a
  line with none (a saved log without stamps) has no age: it warns and is never a failure.
- Nothing to look at (no port, no NVMe expected, no expectation given): SKIP, never a pass.

`fabric-errors` (`run_errors`, at the end of the run) judges the growth of each port's error
counters since the run started. Growth of `link_downed` (the link went down: "failed the link
error recovery process and downed the link"), `link_error_recovery`,
`local_link_integrity_errors` or `excessive_buffer_overrun_errors` fails; growth of
`symbol_error`, `port_rcv_errors`, `port_rcv_remote_physical_errors` or `port_xmit_discards`
warns (minor errors, or congestion). The meanings are the kernel's
(Documentation/ABI/stable/sysfs-class-infiniband); the split follows Oracle's note 2195792.1,
which counts the first group's physical-link errors as harmful. A counter at its maximum, of
any width (PortCounters are 4 to 16 bits and stop there; the 32-bit Q counters may), is said:
at both ends its growth is unknown; reached in the run, its growth is a floor. A counter that
cannot be read at either end is not a clean one: its port and name are said in a warning, and
what could be read is still judged (issue #50 §7). On every port that has them
(InfiniBand and RoCE), the driver's Q counters are judged too (`probe.fabric.Q_COUNTERS`):
retransmissions and drops (`out_of_sequence`, `packet_seq_err`, `local_ack_timeout_err`, ...)
warn, and `req_transport_retries_exceeded` (a connection that gave up) fails. They are 32 bits
and wrap: a Q counter read lower at the end, from the upper half of its range, wrapped and grew
by the distance round; any other counter read lower was reset during the run, which is said (the
growth before the reset is unknown) and judged on what it counted since. Ports whose counters
are all unreadable ("N/A (no PMA)") are not judged: SKIP, never a pass.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from gpuaccept.actions import Cause
from gpuaccept.checks.context import CheckContext
from gpuaccept.checks.judging import Findings
from gpuaccept.probe.fabric import (
    ERROR_COUNTERS,
    Q_COUNTERS,
    IbPort,
    NodeInventory,
    read_inventory,
    read_port_counters,
)
from gpuaccept.probe.kernel_log import KernelLogScan, scan_kernel_log
from gpuaccept.probe.sysfs import problems as sysfs_problems
from gpuaccept.probe.sysfs import sysfs_root
from gpuaccept.results import CheckResult, Status

FAILING_GROWTH = (
    "link_downed",
    "link_error_recovery",
    "local_link_integrity_errors",
    "excessive_buffer_overrun_errors",
    "req_transport_retries_exceeded",  # RoCE: a connection gave up (its retries ran out)
)
WARNING_GROWTH = (
    "symbol_error",
    "port_rcv_errors",
    "port_rcv_remote_physical_errors",
    "port_xmit_discards",
    # RoCE: packets lost and sent again on a lossy (or badly tuned) Ethernet fabric
    "out_of_buffer",
    "out_of_sequence",
    "packet_seq_err",
    "implied_nak_seq_err",
    "local_ack_timeout_err",
    "rnr_nak_retry_err",
)
_WIDTHS = {**ERROR_COUNTERS, **Q_COUNTERS}


@dataclass(frozen=True)
class PortRoles:
    """The node's RDMA ports as rails (the GPUs' traffic, held to the expectations) and the
    others (frontend, storage: listed, not judged), and how they were told apart."""

    rails: list[IbPort]
    others: list[IbPort]
    how: str
    astray: list[IbPort] = field(default_factory=list)  # rails on no GPU's PCIe switch


def _kind(port: IbPort, ports_per_device: Counter[str]) -> tuple[str | None, float | None, int]:
    """What a rail HCA looks like: its link layer, its rate and how many ports its device has
    (a node's rails are one adapter model, cabled alike)."""
    return port.link_layer, port.rate_gbps, ports_per_device[port.device]


def port_roles(
    inventory: NodeInventory, named: Sequence[str] | None = None, expected: int | None = None
) -> PortRoles:
    """Rails, in this order of evidence: the ports the node profile names (`rails`, as aznhc's
    per-SKU confs name them: `check_hw_ib 400 mlx5_ib0:1` for a rail beside `check_hw_ib 100
    mlx5_an0:1` for Azure's frontend port, conf/nd96isr_h200_v5.conf at 13fa400); else the ports
    on a GPU's PCIe switch, where some are (a DGX's frontend and storage HCAs sit on switches
    without a GPU); else, where InfiniBand and Ethernet ports are mixed, the InfiniBand ones (a
    VM shows no switches: Azure's mlx5_an0 is its Ethernet port); else every port.

    Where fewer ports sit on a GPU's switch than the `expected` rails, the ports off them of the
    rails' very kind (link layer, rate and ports per device, `_kind`) are rails too: an HCA
    cabled like the rails but in a slot on the other socket is a rail in the wrong place, a
    topology fault `judge_ports` warns about, not a missing rail (issue #50 §7). A DGX's storage
    HCA (two ports) and frontend (Ethernet, 200 G) are not of that kind and still never fill a
    vanished rail's place."""
    ports = inventory.ports
    if named:
        wanted = set(named)
        rails = [p for p in ports if p.name in wanted or p.device in wanted]
        return PortRoles(rails, [p for p in ports if p not in rails], "named by the node profile")
    near = {
        p.name
        for gpu in inventory.gpus
        for p in ports
        if p.place is not None and _same_switch(gpu.place.bridges, p.place.bridges)
    }
    if near:
        rails = [p for p in ports if p.name in near]
        others = [p for p in ports if p not in rails]
        if expected is not None and len(rails) < expected:
            per_device = Counter(p.device for p in ports)
            kinds = {_kind(p, per_device) for p in rails if p.rate_gbps}
            astray = [p for p in others if _kind(p, per_device) in kinds]
            if astray:
                return PortRoles(
                    [p for p in ports if p in rails or p in astray],
                    [p for p in others if p not in astray],
                    "on a GPU's PCIe switch, or of the rails' kind off it",
                    astray,
                )
        return PortRoles(rails, others, "on a GPU's PCIe switch")
    layers = {p.link_layer for p in ports}
    if {"InfiniBand", "Ethernet"} <= layers:
        rails = [p for p in ports if p.link_layer == "InfiniBand"]
        return PortRoles(rails, [p for p in ports if p not in rails], "InfiniBand beside Ethernet")
    return PortRoles(list(ports), [], "every port (nothing tells rails apart)")


def judge_ports(
    inventory: NodeInventory,
    findings: Findings,
    *,
    expect_nics: int | None = None,
    nic_rate_gbps: float | None = None,
    rails: Sequence[str] | None = None,
) -> PortRoles:
    """The rails judged (state, rate, count, PKeys); the other ports are left to the report."""
    roles = port_roles(inventory, rails, expect_nics)
    findings.warnings += [
        f"{p.name} is cabled as a rail ({p.link_layer}, {p.rate_gbps:g} Gb/s) but shares no "
        "GPU's PCIe switch: counted as a rail, its GPU's traffic crosses the PCIe root or the "
        "socket link (a card in the wrong slot?)"
        for p in roles.astray
    ]
    if rails:
        missing = sorted(
            set(rails) - {p.name for p in roles.rails} - {p.device for p in roles.rails}
        )
        findings.failures += [
            Cause(f"rail {name} (node profile) is not on this node", "cause", "port-down")
            for name in missing
        ]
    ports = roles.rails
    for port in ports:
        if port.state != "ACTIVE" or port.phys_state != "LinkUp":
            findings.failures.append(
                Cause(
                    f"{port.name} is {port.state or 'unreadable'} "
                    f"({port.phys_state or 'unreadable'}), expected ACTIVE (LinkUp)",
                    "cause",
                    "port-down",
                )
            )
    for port in ports:
        if nic_rate_gbps is not None and (port.rate_gbps or 0) < nic_rate_gbps:
            findings.failures.append(
                Cause(
                    f"{port.name} runs at {port.rate_gbps:g} Gb/s, below the expected "
                    f"{nic_rate_gbps:g} Gb/s"
                    if port.rate_gbps is not None
                    else f"{port.name}: rate unreadable, expected {nic_rate_gbps:g} Gb/s",
                    "cause",
                    "port-down",
                )
            )
    if nic_rate_gbps is None:
        # no rate file (or one that does not parse) is not a port at full rate: said, and the
        # network check holds its measured bandwidth to the rate its peers run at (issue #50 §7)
        findings.warnings += [
            f"{p.name}: rate unreadable, its speed is not judged here (give --expect-nic-rate "
            "to require a rate)"
            for p in ports
            if p.rate_gbps is None and p.state == "ACTIVE"
        ]
        for layer in sorted({p.link_layer or "" for p in ports}):
            same = [p for p in ports if (p.link_layer or "") == layer and p.rate_gbps]
            best = max((p.rate_gbps or 0.0 for p in same), default=0.0)
            kind = f"{layer} port" if layer else "port of unreadable link layer"
            findings.warnings += [
                f"{p.name} runs at {p.rate_gbps:g} Gb/s while the node's fastest {kind} "
                f"runs at {best:g} (give --expect-nic-rate to require a rate)"
                for p in same
                if (p.rate_gbps or 0.0) < best
            ]
    active = [p for p in ports if p.state == "ACTIVE" and p.phys_state == "LinkUp"]
    if expect_nics is not None and len(active) < expect_nics:
        findings.failures.append(
            Cause(
                f"{len(active)} ACTIVE InfiniBand/RoCE rail port(s), {expect_nics} expected "
                "(--expect-nics or the node profile's nics)",
                "cause",
                "port-down",
            )
        )
    ib = [p for p in ports if p.link_layer == "InfiniBand"]
    tables = Counter(p.pkeys for p in ib)
    if len(tables) > 1:
        common, _ = tables.most_common(1)[0]
        findings.warnings += [
            f"{p.name} has PKeys {', '.join(p.pkeys) or 'none'}, the node's other ports "
            f"{', '.join(common)}"
            for p in ib
            if p.pkeys != common
        ]
    return roles


def _same_switch(a: tuple[str, ...], b: tuple[str, ...]) -> bool:
    """Whether two devices share a bridge below their root port (a PCIe switch)."""
    return len(a) > 1 and len(b) > 1 and a[0] == b[0] and a[1] == b[1]


def affinity_map(inventory: NodeInventory) -> list[dict[str, Any]]:
    """Each GPU's nearest RDMA port: on its PCIe switch, else on its NUMA node, else none.

    A node of one NUMA node (or none in sysfs) has every device local to its one memory. The
    kernel shows `numa_node` -1 (NUMA_NO_NODE: "we don't know what node this is on", torvalds/
    linux 8a3d01c) where the firmware gives a device no proximity domain ("many BIOSes don't
    implement _PXM", 63692df, which made the file writable), as single-socket nodes commonly
    do, so -1 there is not "far" (issue #50 §7: a single-socket node warned on every GPU).
    With several NUMA nodes, -1 on a GPU leaves its locality unknown, and that is said."""
    rows = []
    one_memory = len(inventory.numa_cpus) <= 1
    ports = [(p, p.place) for p in inventory.ports if p.place is not None]
    for gpu in inventory.gpus:
        switch = [p.name for p, place in ports if _same_switch(gpu.place.bridges, place.bridges)]
        if gpu.place.numa_node is not None:
            numa = [p.name for p, place in ports if place.numa_node == gpu.place.numa_node]
        elif one_memory:
            numa = [p.name for p, _ in ports]
        else:
            numa = []  # its locality is unknown: no port can be said to be near it
        numa_via = "NUMA node" if gpu.place.numa_node is not None else "the node's one NUMA node"
        nearest, via = (
            (switch, "PCIe switch") if switch else (numa, numa_via) if numa else ([], "none")
        )
        rows.append(
            {"gpu": gpu.address, "numa_node": gpu.place.numa_node, "nics": nearest, "via": via}
        )
    return rows


def judge_topology(
    inventory: NodeInventory, findings: Findings, dmabuf: bool | None = None
) -> list[dict[str, Any]]:
    """Where each GPU's nearest RDMA port is, and whether GPUDirect RDMA has a route:
    `dmabuf` is the CUDA driver's answer (probe/dmabuf.py; None: not asked or no answer)."""
    rows = affinity_map(inventory)
    if not inventory.ports or not inventory.gpus:
        return rows
    findings.warnings += [
        f"GPU {row['gpu']} (NUMA node {row['numa_node']}) has no RDMA port on its PCIe switch or "
        "NUMA node"
        if row["numa_node"] is not None
        else f"GPU {row['gpu']} has no RDMA port on its PCIe switch, and its NUMA node is "
        f"unknown (numa_node -1 on a node of {len(inventory.numa_cpus)} NUMA nodes)"
        for row in rows
        if row["via"] == "none"
    ]
    gpu_nodes = {g.place.numa_node for g in inventory.gpus}
    # a GPU of unknown NUMA node (numa_node -1) may be on any: no port can be said to be alone
    findings.warnings += [
        f"{p.name} is on NUMA node {p.place.numa_node}, where no GPU is"
        for p in inventory.ports
        if p.place is not None
        and p.place.numa_node is not None
        and p.place.numa_node not in gpu_nodes
        and None not in gpu_nodes
    ]
    if not inventory.peermem_loaded and dmabuf is not True:
        why = (
            "a GPU does not support dma-buf (the CUDA driver says so)"
            if dmabuf is False
            else "dma-buf not checked"
        )
        findings.warnings.append(
            f"GPUDirect RDMA: the nvidia_peermem module is not loaded ({why}): NCCL may stage GPU "
            "data through host memory"
        )
    return rows


FLAP_WINDOW_SECONDS = 24 * 3600.0
FLAP_THRESHOLD = 5
FLAP_CLOCK_SKEW_SECONDS = 300.0  # a line a little ahead of this clock is still recent


def judge_link_flaps(
    scan: KernelLogScan, findings: Findings, now: float | None = None
) -> dict[str, int]:
    """Count each interface's link flaps of the last 24 hours; 5 or more fail, fewer warn. A
    line without a time stamp is counted apart: it warns, it never fails a node."""
    import time

    now = time.time() if now is None else now
    counts: dict[str, int] = {}
    undated: dict[str, int] = {}
    for flap in scan.flaps:
        age: float | None = None
        if flap.at is not None:
            age = now - flap.at
        elif flap.seconds_since_boot is not None and scan.uptime_seconds is not None:
            age = scan.uptime_seconds - flap.seconds_since_boot
        if age is None or age < -FLAP_CLOCK_SKEW_SECONDS:  # no stamp, or dated in the future
            undated[flap.interface] = undated.get(flap.interface, 0) + 1
        elif age <= FLAP_WINDOW_SECONDS:
            counts[flap.interface] = counts.get(flap.interface, 0) + 1
    for interface, count in sorted(counts.items()):
        text = f"{interface}: {count} link flap(s) (lost carrier) in the kernel log in 24 h"
        if count >= FLAP_THRESHOLD:
            findings.failures.append(
                Cause(f"{text}, aznhc fails at {FLAP_THRESHOLD}", "cause", "port-errors")
            )
        else:
            findings.warnings.append(text)
    for interface, count in sorted(undated.items()):
        findings.warnings.append(
            f"{interface}: {count} lost-carrier line(s) in {scan.source} with no time stamp "
            "(or one in the future): their age is unknown, so they are not judged"
        )
    return counts


def _expectations(context: CheckContext) -> tuple[int | None, float | None, int | None]:
    expect = context.node
    if expect is None:
        return None, None, None
    return expect.nics, expect.nic_rate_gbps, expect.nvme


def run(context: CheckContext) -> CheckResult:
    inventory = read_inventory()
    findings = Findings("fabric", "FABRIC")
    nics, rate, nvme = _expectations(context)
    if not inventory.ports and nics is None and nvme is None:
        return CheckResult(
            name="fabric",
            area="FABRIC",
            status=Status.SKIP,
            message="no InfiniBand/RoCE port in /sys/class/infiniband (an expected count, from "
            "--expect-nics or the node profile's nics, requires some)",
            details={"inventory": asdict(inventory)},
        )
    roles = judge_ports(
        inventory,
        findings,
        expect_nics=nics,
        nic_rate_gbps=rate,
        rails=context.node.rails if context.node is not None else None,
    )
    flaps = judge_link_flaps(scan_kernel_log(), findings) if inventory.ports else {}
    if nvme is not None and len(inventory.nvme) < nvme:
        findings.failures.append(
            f"{len(inventory.nvme)} NVMe controller(s), {nvme} expected (--expect-nvme or the "
            "node profile's nvme)"
        )
    dmabuf = None
    if inventory.ports and inventory.gpus and not inventory.peermem_loaded:
        from gpuaccept.probe.dmabuf import dmabuf_supported

        dmabuf = dmabuf_supported()  # the other route: asked only where it decides something
    rows = judge_topology(inventory, findings, dmabuf)
    unreadable = sysfs_problems(sysfs_root())
    if unreadable:
        path, why = next(iter(unreadable.items()))
        findings.warnings.append(
            f"{len(unreadable)} sysfs attribute(s) unreadable, e.g. {path}: {why} (read as "
            "unknown; see the details)"
        )
    findings.details = {
        "inventory": asdict(inventory),
        "affinity": rows,
        "link_flaps": flaps,
        "unreadable": unreadable,
        "rails": [p.name for p in roles.rails],
        "other_ports": [p.name for p in roles.others],
        "rails_told_by": roles.how,
        # GPUDirect RDMA's routes: the module, or dma-buf as the CUDA driver answers (None: the
        # module made the question moot, or the driver could not be asked)
        "gpudirect": {"nvidia_peermem": inventory.peermem_loaded, "dmabuf": dmabuf},
    }
    active = sum(1 for p in roles.rails if p.state == "ACTIVE")
    rates = sorted({p.rate_gbps for p in roles.rails if p.rate_gbps})
    said = ", ".join(f"{r:g}" for r in rates) or "no"
    others = (
        f"; {len(roles.others)} other port(s) (frontend, storage) not held to the rails'"
        if roles.others
        else ""
    )
    return findings.conclude(
        f"{active} of {len(roles.rails)} RDMA port(s) ACTIVE at {said} Gb/s{others}; "
        f"{len(inventory.nvme)} NVMe; every GPU has an RDMA port near it"
        if inventory.gpus
        else f"{active} of {len(roles.rails)} RDMA port(s) ACTIVE at {said} Gb/s{others}; "
        f"{len(inventory.nvme)} NVMe"
    )


def _counter_maximum(
    port: str, name: str, value: int, wraps: bool, within: str = "in the run"
) -> str:
    """What a counter read at the top of its width means, said the same for every width."""
    if wraps:
        # The Q counters are 32 bits (mlx5_ib_query_q_counters copies a be32); whether the
        # firmware wraps them round or holds them at the top is not published, and mlx4 held its
        # 32-bit counters there (ASSIGN_32BIT_COUNTER, drivers/infiniband/hw/mlx4/mad.c, commit
        # 2fc800f "Counters should be saturate once they reach their maximum value"). Read at
        # the top at both ends, growth cannot be told from a counter that stopped.
        return (
            f"{port} {name} is at its maximum ({value}, 32 bits): it may no longer count, so its "
            f"growth {within} is unknown (the driver clears it when the port's counters are "
            "reallocated, e.g. on a driver reload)"
        )
    return (
        f"{port} {name} is at its maximum ({value}): it no longer counts (reset the port "
        "counters, e.g. perfquery -R)"
    )


# How the findings of judge_counter_growth name the span they judge: accept's and a burn-in
# window's run, or the watch's two polls
_SPANS = {
    "run": (
        "in the run",
        "during the run",
        "at the start or the end of the run",
        "at the start but not at the end",
    ),
    "polls": (
        "since it was last read",
        "since it was last read",
        "at the last poll or this one",
        "at the last poll but not at this one",
    ),
}


# What a reading cannot say, as against what happened: such a finding holds for as long as the
# reading does (a counter unread, at its top at both ends, a port without a PMA). The watch keeps
# these as states, the rest (growth, a reset, a port gone) as events.
_UNSAID = ("is at its maximum (", "error counter(s) unreadable", "without a readable error counter")


def says_what_a_reading_cannot(text: str) -> bool:
    return any(phrase in text for phrase in _UNSAID)


def shown_ports(ports: Sequence[str]) -> str:
    """Up to four ports by name, the rest counted (a p5's 32 EFA devices in one line)."""
    more = f" and {len(ports) - 4} more" if len(ports) > 4 else ""
    return ", ".join(ports[:4]) + more


def judge_counter_growth(
    start: dict[str, dict[str, int | None]],
    end: dict[str, dict[str, int | None]],
    findings: Findings,
    span: Literal["run", "polls"] = "run",
) -> list[dict[str, Any]]:
    """Each port's error counters now against the start; the growth per port for the report.

    A counter that could not be read at the start or the end ("N/A (no PMA)", a file gone or
    refused) is not a clean one: its growth is unknown, and the port is named in a warning
    (issue #50 §7). Not a failure, since an unreadable attribute is the reader's or the driver's
    trouble and never a hardware verdict (probe/sysfs.py); not silence either, since "no counter
    grew" would then claim what was never seen. A Q counter the driver exposes at neither end
    is simply not there (an older driver), and is not listed. Ports with no readable counter at
    all (no PMA: an EFA device) are said once, together, not once each: a burn-in judges every
    window with this, and a p5's 32 EFA devices would fill each window with 32 lines."""
    within, during, ends, first = _SPANS[span]
    growth = []
    blind = [
        port
        for port, before in sorted(start.items())
        if port in end
        and all(v is None for v in before.values())
        and all(v is None for v in end[port].values())
    ]
    if blind:
        findings.warnings.append(
            f"{len(blind)} port(s) without a readable error counter (no PMA), their errors not "
            f"judged: {shown_ports(blind)}"
        )
    for port, before in sorted(start.items()):
        if port in blind:
            continue
        after = end.get(port)
        if after is None:
            findings.failures.append(
                Cause(f"{port} was read {first} (gone?)", "cause", "port-down")
            )
            continue
        grew: dict[str, int] = {}
        unread: list[str] = []
        for name, bits in _WIDTHS.items():
            wraps = name in Q_COUNTERS
            if name not in before and name not in after:
                continue  # not exposed (read_port_counters keeps every PortCounter, None or not)
            was, now = before.get(name), after.get(name)
            if was is None or now is None:
                unread.append(name)
                continue
            top = (1 << bits) - 1
            # at the top at both ends, it may have stopped counting; read below it now, a counter
            # at the top before was reset (the fix its maximum's message advises) or wrapped
            if was >= top and now >= top:
                findings.warnings.append(_counter_maximum(port, name, was, wraps, within))
                continue
            if now > was:
                grew[name] = now - was
            elif now < was and wraps and was >= 1 << (bits - 1):
                grew[name] = (1 << bits) - was + now  # wrapped round once
            elif now < was:
                findings.warnings.append(
                    f"{port} {name} went back from {was} to {now}: its counters were reset "
                    f"{during}, what they counted before the reset is unknown"
                )
                if now > 0:
                    grew[name] = now
            if now >= top and name in grew:
                findings.warnings.append(
                    f"{port} {name} reached its maximum ({now}) {within}: it grew by at least "
                    f"{grew[name]} and may no longer count"
                )
        if unread:
            findings.warnings.append(
                f"{port}: {len(unread)} error counter(s) unreadable {ends} "
                f"({', '.join(unread)}): their growth is unknown, not judged"
            )
        for name, delta in grew.items():
            text = Cause(f"{port} {name} grew by {delta} {within}", "cause", "port-errors")
            if name in FAILING_GROWTH:
                findings.failures.append(text)
            elif name in WARNING_GROWTH:
                findings.warnings.append(text)
        if grew:
            growth.append({"port": port, "grew": grew})
    return growth


def read_start() -> dict[str, dict[str, int | None]]:
    """The ports' counters as the run starts (the suite keeps them for `run_errors`)."""
    return read_port_counters()


def run_errors(context: CheckContext) -> CheckResult:
    start = context.start_fabric_counters
    end = read_port_counters()
    if not end and not start:
        return CheckResult(
            name="fabric-errors",
            area="FABRIC",
            status=Status.SKIP,
            message="no InfiniBand/RoCE port to read counters from",
        )
    readings = [*end.values(), *(start or {}).values()]
    if not any(v is not None for counters in readings for v in counters.values()):
        return CheckResult(
            name="fabric-errors",
            area="FABRIC",
            status=Status.SKIP,
            message=f"{len(end)} port(s), none with a readable error counter (N/A: no PMA)",
        )
    findings = Findings("fabric-errors", "FABRIC")
    if start is None:
        return CheckResult(
            name="fabric-errors",
            area="FABRIC",
            status=Status.SKIP,
            message="no port counters from the start of the run to compare with",
        )
    growth = judge_counter_growth(start, end, findings)
    findings.details = {"growth": growth, "ports": sorted(end)}
    return findings.conclude(f"{len(end)} port(s): no error counter grew in the run")
