"""A GPU's PCI address in full (issue #50 §5, probe.pci_address): the domain is part of the
address, compared as a number across NVML's 8-digit and the kernel's 4-digit spellings."""

from __future__ import annotations

import pytest

from gpuaccept.probe.pci_address import PciAddress, match_gpu, parse_pci_address

GB200_TRAY = ["00000008:01:00.0", "00000009:01:00.0", "00000018:01:00.0", "00000019:01:00.0"]


@pytest.mark.parametrize(
    ("text", "address"),
    [
        ("00000008:01:00.0", PciAddress(8, 1, 0)),  # NVML's busId (%08X:%02X:%02X.0)
        ("0008:01:00.0", PciAddress(8, 1, 0)),  # the kernel's device name
        ("PCI 0018:01:00", PciAddress(0x18, 1, 0)),  # an XID finding's name for its GPU
        ("NVRM: Xid (PCI:0019:01:00): 79, pid=1", PciAddress(0x19, 1, 0)),
        ("00000000:CB:00.0", PciAddress(0, 0xCB, 0)),
        ("PCI cb:00", PciAddress(None, 0xCB, 0)),  # no domain written
        ("no address", None),
        ("", None),
    ],
)
def test_every_spelling_of_an_address_is_read_with_its_domain(
    text: str, address: PciAddress | None
) -> None:
    assert parse_pci_address(text) == address


def test_the_domain_is_compared_as_a_number_across_spellings() -> None:
    nvml, kernel = parse_pci_address("00000008:01:00.0"), parse_pci_address("PCI 0008:01:00")
    assert nvml is not None
    assert kernel is not None
    assert nvml.same_gpu(kernel)
    assert kernel.same_gpu(nvml)
    assert str(nvml) == str(kernel) == "0008:01:00"


def test_a_gb200_trays_four_gpus_stay_four() -> None:
    """The four GPUs of a tray differ only by domain: each XID names its own GPU."""
    tray = [parse_pci_address(a) for a in GB200_TRAY]
    for position, xid in enumerate(["0008:01:00", "0009:01:00", "0018:01:00", "0019:01:00"]):
        named = parse_pci_address(f"PCI {xid}")
        assert named is not None
        assert match_gpu(named, tray) == position
    other = parse_pci_address("PCI 0010:01:00")
    assert other is not None
    assert match_gpu(other, tray) is None


def test_an_address_without_a_domain_matches_only_when_one_gpu_has_it() -> None:
    bare = parse_pci_address("PCI 01:00")
    assert bare is not None
    tray = [parse_pci_address(a) for a in GB200_TRAY]
    assert match_gpu(bare, tray) is None  # four GPUs have bus 01 device 00: none is guessed
    assert match_gpu(bare, [parse_pci_address("00000000:cb:00.0"), tray[2]]) == 1
    assert match_gpu(bare, [None, parse_pci_address("garbage")]) is None


def test_the_network_check_finds_each_ports_gpu_by_its_whole_address(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """checks.network matched torch's and sysfs's spellings by their last 12 characters, which
    drops a domain's digits past four: VMD's domain 10000 and domain 0 were one GPU."""
    import gpuaccept.probe.hardware
    from gpuaccept.checks import network
    from gpuaccept.probe.fabric import NodeInventory
    from gpuaccept.probe.hardware import GpuInfo

    def gpu(index: int, bus_id: str) -> GpuInfo:
        return GpuInfo(index, "GPU", (10, 0), 2**30, 1, f"GPU-{index}", bus_id)

    cuda = [gpu(0, "00000000:01:00.0"), gpu(1, "00010000:01:00.0"), gpu(2, "00000018:01:00.0")]
    rows = [
        {"gpu": "10000:01:00.0", "nics": ["mlx5_1"]},
        {"gpu": "0000:01:00.0", "nics": ["mlx5_0"]},
        {"gpu": "0018:01:00.0", "nics": ["mlx5_2"]},
        {"gpu": "0019:01:00.0", "nics": ["mlx5_3"]},  # no CUDA GPU there: no port named for one
    ]
    monkeypatch.setattr(gpuaccept.probe.hardware, "list_cuda_gpus", lambda: cuda)
    monkeypatch.setattr(network, "affinity_map", lambda inventory: rows)
    nearest = network._nearest_cuda(NodeInventory(), cpu_mode=False)
    assert nearest == {"mlx5_1": 1, "mlx5_0": 0, "mlx5_2": 2}


def test_one_name_per_gpu_joins_spellings_and_keeps_gb200_domains_apart() -> None:
    from gpuaccept.probe.pci_address import one_name_per_gpu

    named = one_name_per_gpu(
        ["00000008:01:00.0", "0008:01:00", "0009:01:00", "0018:01:00", "10000:01:00", "cb:00.0"]
    )
    assert named == {
        "00000008:01:00.0": "0008:01:00",  # NVML's spelling and the driver's: one GPU
        "0008:01:00": "0008:01:00",
        "0009:01:00": "0009:01:00",  # GB200: each GPU of the tray in its own domain
        "0018:01:00": "0018:01:00",
        "10000:01:00": "10000:01:00",  # VMD's 5-digit domain
        "cb:00.0": "cb:00",  # no domain, and no GPU with one at cb:00
    }
    # an address without a domain joins the one GPU with its bus and device, never one of many
    assert one_name_per_gpu(["0000:cb:00", "cb:00"])["cb:00"] == "0000:cb:00"
    assert one_name_per_gpu(["0008:01:00", "0009:01:00", "01:00"])["01:00"] == "01:00"
