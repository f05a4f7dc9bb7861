"""Which switch (or rack) each node hangs off, for `accept --isolate --topology FILE` (issue #33
§1): bisection splits a failing group along switches first, and a switch whose every node is a
suspect is named as the switch.

Two forms, told apart by their content:

- lines of `NODE SWITCH` (blank lines and `#` comments ignored);
- Slurm's topology.conf, or what `scontrol show topology` prints from it: one line per switch
  (topology/tree: `SwitchName=leaf1 Nodes=gpu[001-016]`; a switch of switches names
  `Switches=` and is not read) or per block (topology/block: `BlockName=b1 Nodes=...`), nodes
  in Slurm's hostlist form (`tux[0-3,12,18-20]`), parameter names in any case, `#` to the end
  of a line a comment (SchedMD/slurm doc/man/man5/topology.conf.5 at 033ad9c: DESCRIPTION,
  topology/tree, topology/block, EXAMPLE).
"""

from __future__ import annotations

import re
from pathlib import Path

from gpuaccept.errors import InputError

MAX_TOPOLOGY_BYTES = 4 * 1024 * 1024  # 100,000 nodes' lines with room to spare
# names a topology may give in all, over every line (a line's range alone once was the only
# bound: eight 40-byte lines of a million names each took 28 s and 0.8 GB here)
MAX_NODES = 1_000_000


def expand_hostlist(text: str, limit: int = MAX_NODES) -> list[str]:
    """Slurm's hostlist form: `gpu[001-003,007],cpu1` -> gpu001, gpu002, gpu003, gpu007, cpu1
    (ranges keep their zero padding; one bracket per name, as Slurm's node names have).
    ValueError past `limit` names, before they are made."""
    names: list[str] = []
    parts, depth, current = [], 0, ""
    for char in text:  # split at the commas outside brackets
        depth += {"[": 1, "]": -1}.get(char, 0)
        if depth not in (0, 1):
            raise ValueError(f"{text!r} is not a host list")
        if char == "," and depth == 0:
            parts.append(current)
            current = ""
        else:
            current += char
    if depth:
        raise ValueError(f"{text!r} is not a host list (a bracket left open)")
    parts.append(current)
    for part in parts:
        if not part:
            raise ValueError(f"{text!r} is not a host list (an empty name)")
        match = re.fullmatch(r"([^\[\]]*)\[([^\]]+)\]([^\[\]]*)", part)
        if match is None:
            if "[" in part or "]" in part:
                raise ValueError(f"{part!r} is not a host list")
            if len(names) >= limit:
                raise ValueError(f"more than {MAX_NODES} nodes in all")
            names.append(part)
            continue
        prefix, ranges, suffix = match.groups()
        for item in ranges.split(","):
            low, _, high = item.partition("-")
            digits = re.compile(r"[0-9]{1,9}")  # ASCII ('²'.isdigit() is true)
            if not digits.fullmatch(low) or (high and not digits.fullmatch(high)):
                raise ValueError(f"{part!r}: {item!r} is not a number or a range")
            first, last = int(low), int(high or low)
            if last < first or last - first >= MAX_NODES:
                raise ValueError(f"{part!r}: the range {item!r} is empty or too large")
            if len(names) + last - first + 1 > limit:
                raise ValueError(f"more than {MAX_NODES} nodes in all")
            width = len(low) if low.startswith("0") else 0
            names += [f"{prefix}{n:0{width}d}{suffix}" for n in range(first, last + 1)]
    return names


def parse_topology(text: str, source: str = "topology") -> dict[str, str]:
    """node -> switch from either form; InputError naming the line that is neither."""
    found: dict[str, str] = {}
    named = 0  # names given so far, a name given twice counted twice (each costs its making)

    def put(node: str, switch: str, line_number: int) -> None:
        if node in found and found[node] != switch:
            raise InputError(
                f"{source}:{line_number}: {node} is under {found[node]!r} and {switch!r}; a "
                "node hangs off one leaf switch"
            )
        found[node] = switch

    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        fields = {
            key.lower(): value
            for key, _, value in (item.partition("=") for item in line.split())
            if value and key
        }
        group = fields.get("switchname") or fields.get("blockname")
        if group is None and fields and len(fields) == len(line.split()):
            continue  # a parameter line (BlockSizes=...): no node of its own
        if group is not None:
            if "nodes" not in fields:
                continue  # a switch of switches: its children are switches
            try:
                nodes = expand_hostlist(fields["nodes"], MAX_NODES - named)
            except ValueError as error:
                raise InputError(f"{source}:{number}: Nodes={fields['nodes']}: {error}") from None
            named += len(nodes)
            for node in nodes:
                put(node, group, number)
            continue
        parts = line.split()
        if len(parts) != 2:
            raise InputError(
                f"{source}:{number}: give `NODE SWITCH` or a line of `scontrol show topology` "
                f"(got {raw.strip()[:80]!r})"
            )
        put(parts[0], parts[1], number)
    if not found:
        raise InputError(f"{source}: names no node (give `NODE SWITCH` lines)")
    return found


def read_topology(path: Path) -> dict[str, str]:
    """The node -> switch map of a --topology file, refused in one line when it cannot be."""
    from gpuaccept.input_files import read_input_bytes

    raw = read_input_bytes(path, "--topology", MAX_TOPOLOGY_BYTES)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise InputError(f"--topology {path}: not text (UTF-8)") from None
    if "\x00" in text:
        raise InputError(f"--topology {path}: not text (a NUL byte)")
    return parse_topology(text, f"--topology {path}")
