"""network: the write bandwidth of every ACTIVE InfiniBand/RoCE port, loopback with perftest
(issue #24), when perftest is installed; SKIP with the reason when it is not, never a pass.

A port fails below 0.90 x its line rate, the lowest fraction aznhc's per-SKU confs accept
(Azure/azurehpc-health-checks: `check_ib_bw_gdr 360` of 400 Gb/s NDR in
conf/nd96isr_h200_v5.conf at 13fa400; 375 of 400 in conf/nd96isr_h100_v5.conf at 0611432; 185
of 200 Gb/s HDR in conf/nd96asr_v4.conf at 1200952): a floor above the lowest fails ports those
confs pass. The line rate is the data rate, less the line coding (`probe.fabric.data_rate_gbps`:
QDR's "40 Gb/sec" carries 32). A port whose rate cannot be read (no `rate` file, or one that
does not parse) is held to the line rate it should have (issue #50 §7): the fastest readable
data rate among the node's other ACTIVE ports of its link layer, else the node profile's
`nic_rate_gbps`, else the best figure measured on a port of its link layer; a slow figure then
fails. With nothing to hold it to it warns, never passes in silence. An average perftest prints
as `inf` or non-positive is a failed measurement.
On a GPU node each port's buffers live on its nearest GPU (`--use_cuda`, GPUDirect RDMA, as
aznhc's check_ib_bw_gdr runs it), so the path measured is the one NCCL takes.
"""

from __future__ import annotations

from collections.abc import Mapping

from gpuaccept.checks.context import CheckContext
from gpuaccept.checks.fabric import affinity_map
from gpuaccept.checks.judging import Findings
from gpuaccept.measure.perftest import PerftestError, ib_write_bw_path, loopback
from gpuaccept.probe.fabric import IbPort, NodeInventory, read_inventory
from gpuaccept.probe.pci_address import match_gpu, parse_pci_address
from gpuaccept.results import CheckResult, Status

LINE_RATE_FRACTION = 0.90


def _nearest_cuda(inventory: NodeInventory, cpu_mode: bool) -> dict[str, int]:
    """Port name -> the CUDA index of the first GPU that has it as its nearest port."""
    if cpu_mode:
        return {}
    from gpuaccept.probe.hardware import list_cuda_gpus

    # by domain, bus and device, the domain as a number (probe.pci_address): torch's 8-digit
    # domain and sysfs's 4-digit one name one GPU, and domains past ffff (VMD's 10000:...) stay
    # apart, which the last 12 characters of each spelling did not keep
    cuda = list_cuda_gpus()
    addresses = [parse_pci_address(gpu.pci_bus_id or "") for gpu in cuda]
    nearest: dict[str, int] = {}
    for row in affinity_map(inventory):
        address = parse_pci_address(str(row["gpu"]))
        found = match_gpu(address, addresses) if address is not None else None
        if found is not None:
            for port in row["nics"]:
                nearest.setdefault(port, cuda[found].index)
    return nearest


def _stand_in_rate(
    port: IbPort, active: list[IbPort], measured: Mapping[str, float], context: CheckContext
) -> tuple[float, str] | None:
    """The line rate a port whose own rate is unreadable should run at, and where it comes
    from; None when nothing on the node says."""
    layer = port.link_layer
    peers = [
        p.data_rate_gbps
        for p in active
        if p.name != port.name and p.link_layer == layer and p.data_rate_gbps
    ]
    if peers:
        return max(peers), f"the line rate of the node's other {layer or 'unknown-layer'} ports"
    if context.node is not None and context.node.nic_rate_gbps is not None:
        return context.node.nic_rate_gbps, "the node profile's nic_rate_gbps"
    figures = [
        gbps
        for p in active
        if p.name != port.name and p.link_layer == layer and (gbps := measured.get(p.name))
    ]
    if figures:
        return max(figures), f"the best figure measured on the node's other {layer} ports"
    return None


def run(context: CheckContext) -> CheckResult:
    def skip(why: str) -> CheckResult:
        return CheckResult(name="network", area="FABRIC", status=Status.SKIP, message=why)

    if ib_write_bw_path() is None:
        return skip("perftest's ib_write_bw is not on PATH: the network was not measured")
    inventory = read_inventory()
    active = [p for p in inventory.ports if p.state == "ACTIVE" and p.phys_state == "LinkUp"]
    if not active:
        return skip("no ACTIVE InfiniBand/RoCE port to measure")
    cuda = _nearest_cuda(inventory, context.cpu_mode)
    findings = Findings("network", "FABRIC")
    measured: dict[str, float] = {}
    for port in active:
        try:
            result = loopback(
                port.device,
                port.port,
                infiniband=port.link_layer == "InfiniBand",
                cuda_index=cuda.get(port.name),
            )
        except PerftestError as error:
            findings.failures.append(str(error))
            continue
        findings.record_node(f"ib_write_bw_{port.device}_p{port.port}_gbps", result.gbps, "Gb/s")
        measured[port.name] = result.gbps
        line = port.data_rate_gbps
        if line is None:
            continue  # held, once every port is measured, to the rate it should have
        if result.gbps < LINE_RATE_FRACTION * line:
            coded = (
                f" ({port.rate_gbps:g} Gb/s signalling, less its line coding)"
                if port.rate_gbps and abs(port.rate_gbps - line) > 1e-9
                else ""
            )
            findings.failures.append(
                f"{port.name} ib_write_bw {result.gbps:.4g} Gb/s, below {LINE_RATE_FRACTION:g} x "
                f"its {line:.4g} Gb/s line rate{coded}"
            )
    for port in active:
        gbps = measured.get(port.name)
        if port.data_rate_gbps is not None or gbps is None:
            continue
        stand_in = _stand_in_rate(port, active, measured, context)
        if stand_in is None:
            findings.warnings.append(
                f"{port.name} ib_write_bw {gbps:.4g} Gb/s not judged: its rate is unreadable "
                "and no other port or profile says what it should be"
            )
        elif gbps < LINE_RATE_FRACTION * stand_in[0]:
            findings.failures.append(
                f"{port.name} ib_write_bw {gbps:.4g} Gb/s, below {LINE_RATE_FRACTION:g} x "
                f"{stand_in[0]:.4g} Gb/s, {stand_in[1]} (its own rate is unreadable)"
            )
    findings.details = {
        "gpudirect": {name: index for name, index in sorted(cuda.items())},
        "line_rate_fraction": LINE_RATE_FRACTION,
    }
    return findings.conclude(
        f"{len(active)} port(s) at {LINE_RATE_FRACTION:g} x line rate or above (ib_write_bw, "
        "loopback)"
    )


# A rail: (device, port, InfiniBand?, line rate in Gb/s), in the node's port order.
Rail = tuple[str, int, bool, float | None]


def pair_ports() -> list[Rail]:
    """This node's ACTIVE InfiniBand/RoCE ports, as the pairwise test pairs them by order."""
    return [
        (p.device, p.port, p.link_layer == "InfiniBand", p.data_rate_gbps)
        for p in read_inventory().ports
        if p.state == "ACTIVE" and p.phys_state == "LinkUp"
    ]


def judge_ib_pairs(
    measured: Mapping[tuple[int, int, str], float | str],
    names: list[str],
    rails: Mapping[int, list[Rail]],
) -> CheckResult:
    """ib_write_bw between every pair of nodes, rail by rail: a pair's rail below 0.90 x the
    slower end's line rate fails, named by both nodes and the port; a node slow on a rail with
    every peer (three nodes or more) is named as the slow one."""
    if not measured:
        why = (
            "perftest's ib_write_bw missing, or no ACTIVE InfiniBand/RoCE port, on "
            + ", ".join(names[n] for n, ports in sorted(rails.items()) if not ports)
            if any(not ports for ports in rails.values())
            else "no pair of nodes"
        )
        return CheckResult(
            name="pairwise-ib", area="FABRIC", status=Status.SKIP, message=f"not measured: {why}"
        )
    failures: list[str] = []
    rows: list[dict[str, object]] = []
    slow: dict[tuple[int, str], int] = {}
    for (a, b, rail), figure in sorted(measured.items()):
        pair = f"{names[a]} {rail} <- {names[b]}"
        index = next((k for k, r in enumerate(rails.get(a, [])) if f"{r[0]}:{r[1]}" == rail), 0)
        line = [r[3] for n in (a, b) for r in rails.get(n, [])[index : index + 1] if r[3]]
        if isinstance(figure, str):
            failures.append(f"{pair}: {figure}")
            rows.append({"pair": pair, "gbps": None, "error": figure})
            continue
        rows.append({"pair": pair, "gbps": figure, "error": ""})
        if line and figure < LINE_RATE_FRACTION * min(line):
            failures.append(
                f"{pair}: {figure:.4g} Gb/s, below {LINE_RATE_FRACTION:g} x {min(line):g} Gb/s"
            )
            for node in (a, b):
                slow[(node, rail.split(":")[0])] = slow.get((node, rail.split(":")[0]), 0) + 1
    peers = len(names) - 1
    if len(names) >= 3:
        failures += [
            f"{names[node]} is slow on rail {rail} with all {peers} peers"
            for (node, rail), count in sorted(slow.items())
            if count >= peers
        ]
    details = {
        "columns": [["pair", "pair (server <- client)"], ["gbps", "Gb/s"], ["error", "error"]],
        "rows": rows,
        "line_rate_fraction": LINE_RATE_FRACTION,
    }
    if failures:
        return CheckResult(
            name="pairwise-ib",
            area="FABRIC",
            status=Status.FAIL,
            message="; ".join(failures),
            details=details,
        )
    return CheckResult(
        name="pairwise-ib",
        area="FABRIC",
        status=Status.PASS,
        message=f"{len(rows)} rail(s) between node pairs at {LINE_RATE_FRACTION:g} x line rate or "
        "above (ib_write_bw)",
        details=details,
    )
