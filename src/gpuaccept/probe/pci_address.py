"""A GPU's PCI address in full (issue #50 §5): domain, bus, device, so that two GPUs that differ
only by domain stay two. GB200 puts each GPU of a tray in its own domain (`0008:01:00`,
`0009:01:00`, `0018:01:00`, `0019:01:00`): matched by bus and device alone, they are one GPU.

The spellings one GPU has:
- NVML's `busId`, `NVML_DEVICE_PCI_BUS_ID_FMT` = "%08X:%02X:%02X.0" (nvml.h; nvidia-ml-py's
  pynvml.py repeats it): an 8-digit domain, upper case, e.g. `00000008:01:00.0`; torch's own
  `pci_domain_id` formatted the same way by `probe.hardware`;
- the kernel's device name, "%04x:%02x:%02x.%d" (drivers/pci/probe.c, pci_setup_device:
  `dev_set_name(&dev->dev, "%04x:%02x:%02x.%d", pci_domain_nr(dev->bus), ...)`): a domain of at
  least 4 digits, lower case, as sysfs and `nvidia-smi -q`'s `Bus Id` of older tools show it;
- the driver's XID line, `NVRM: Xid (PCI:0008:01:00): 79, ...`: no function.

So the domain is compared as a number (0008 == 00000008) and the function is left out (the
driver's form has none; a GPU is function 0). An address written without a domain (`cb:00.0`)
matches a GPU only when no other GPU has that bus and device.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

# The last address in the text: `PCI 0000:cb:00`, `NVRM: Xid (PCI:0008:01:00)`, `00000008:01:00.0`
_ADDRESS = re.compile(
    r"(?:(?<![0-9A-Fa-f])([0-9A-Fa-f]{1,8}):)?([0-9A-Fa-f]{2}):([0-9A-Fa-f]{2})(?:\.[0-7])?"
    r"(?![0-9A-Fa-f:])"
)


@dataclass(frozen=True)
class PciAddress:
    """domain:bus:device of a PCI function; `domain` is None where the text gave none."""

    domain: int | None
    bus: int
    device: int

    def __str__(self) -> str:
        """The kernel's spelling, without the function: `0008:01:00` (or `01:00`)."""
        place = f"{self.bus:02x}:{self.device:02x}"
        return place if self.domain is None else f"{self.domain:04x}:{place}"

    def same_gpu(self, other: PciAddress) -> bool:
        """Whether both name one device: the same bus and device, and the same domain where both
        say one."""
        if (self.bus, self.device) != (other.bus, other.device):
            return False
        return self.domain is None or other.domain is None or self.domain == other.domain


def parse_pci_address(text: str) -> PciAddress | None:
    """The last PCI address in `text` in any of its spellings (see the module), or None."""
    every = _ADDRESS.findall(text)
    if not every:
        return None
    domain, bus, device = every[-1]
    return PciAddress(int(domain, 16) if domain else None, int(bus, 16), int(device, 16))


def match_gpu(address: PciAddress, candidates: Sequence[PciAddress | None]) -> int | None:
    """The position in `candidates` of the one GPU `address` names, or None: none has it, or
    the address has no domain and more than one GPU has its bus and device."""
    hits = [i for i, c in enumerate(candidates) if c is not None and address.same_gpu(c)]
    if address.domain is not None:
        same = [i for i in hits if getattr(candidates[i], "domain", None) == address.domain]
        if same:
            return same[0]
    return hits[0] if len(hits) == 1 else None


def one_name_per_gpu(printed: Iterable[str]) -> dict[str, str]:
    """Each printed address (any spelling) as the one name its GPU goes by, so that one GPU's
    lines and findings count together: NVML's `00000008:01:00.0` and the driver's `0008:01:00`
    are both `0008:01:00`, and GB200's `0008:01:00` and `0009:01:00` stay two. An address
    without a domain takes the name of the one GPU with its bus and device, and keeps its own
    where several have them; text that is no address keeps its text."""
    parsed = {text: parse_pci_address(text) for text in printed}
    full = sorted({str(a) for a in parsed.values() if a is not None and a.domain is not None})
    candidates: list[PciAddress | None] = [parse_pci_address(text) for text in full]
    named: dict[str, str] = {}
    for text, address in parsed.items():
        if address is None:
            named[text] = text
            continue
        index = match_gpu(address, candidates) if address.domain is None else None
        named[text] = full[index] if index is not None else str(address)
    return named
