"""The floors of gpuaccept (issue #51 §2, docs/design.md): no import cycle among its modules, and
every import goes to its own floor or one below.

An AST walk over src/gpuaccept, no import executed and no dependency added: every `import` and
`from ... import`, at module level or inside a function, counts; only those under
`if TYPE_CHECKING:` do not (they never run). A cycle is named module by module with the line of
each import; an import that climbs is named with its file and line. The walk runs on a planted
tree too, so the check is seen to fail on a cycle and on a climb: it cannot pass by finding
nothing.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

import pytest

SOURCE = Path(__file__).resolve().parents[1] / "src"
PACKAGE = "gpuaccept"

# Each top-level module or package of gpuaccept and its floor, bottom to top. "" is
# gpuaccept/__init__.py. A module may import its own floor and those below, never above.
FLOORS: dict[str, int] = {
    # 0 ground: the errors, the verdict's rules, signals, files in and out, the user's data home,
    # the package's data files
    "": 0,
    "errors": 0,
    "verdict": 0,
    "interrupts": 0,
    "input_files": 0,
    "output_files": 0,
    "data_home": 0,
    "data": 0,
    # 1 probe: what the machine says (NVML, sysfs, the kernel log, DCGM), judged by nobody here
    "probe": 1,
    # 2 model: the report and its figures, the action tables and plan, the references, the node
    # profile; naming reads only the results model (it was proposed for the ground floor: it
    # imports results, so it stands beside it)
    "results": 2,
    "actions": 2,
    "references": 2,
    "node_profile": 2,
    "naming": 2,
    # 3 measure: the kernels and their sweeps, the processes that run them
    "measure": 3,
    "sweeps": 3,
    "distributed": 3,
    # 4 checks: a measurement judged into a CheckResult
    "checks": 4,
    "llm": 4,
    "mnist": 4,
    # 5 run: the suite and the burn-in, which run checks
    "suite": 5,
    "burnin": 5,
    # the watch polls and judges readings between jobs as the burn-in judges its windows; the
    # history and the guards are its command's (commands.watch)
    "watch": 5,
    # 6 after a run: its record, the history's stores, the comparisons with it, the evidence,
    # the writers, the guards that act on a verdict
    "record": 6,
    "store": 6,
    "compare": 6,
    "evidence": 6,
    "report": 6,
    "act": 6,
    # 7 commands: a request and a function per command (issue #51)
    "commands": 7,
    # 8 the command line
    "cli": 8,
    "__main__": 8,
}

# Imports that climb today because a caller on a floor being rewritten now still reaches the
# old place, each with the call site that moves it (docs/design.md). An entry that no longer
# climbs fails the test below: remove it then.
PENDING: dict[tuple[str, str], str] = {}


@dataclass(frozen=True)
class Import:
    source: str  # the importing module
    target: str  # the module imported (a package's __init__ for a package)
    path: Path
    line: int

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.source} imports {self.target}"


def _module_name(root: Path, path: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


# A line that begins an import statement, and a guard whose body never runs
_STATEMENT = re.compile(r"[ \t]*(?:from[ \t]+[.\w]+[ \t]+import|import[ \t]+\w)")
_GUARD = re.compile(r"([ \t]*)if[ \t]+(?:typing\.)?TYPE_CHECKING[ \t]*:[ \t]*(?:#.*)?$")
_TRIPLE = re.compile(r'"""|\'\'\'')


def _import_statements(text: str) -> Iterator[ast.Import | ast.ImportFrom]:
    """Every import statement of a module's source, at any depth, but those an
    `if TYPE_CHECKING:` guards (its `else:` runs, so it counts), each with its line.

    Found line by line and parsed one statement at a time (parsing every module whole takes
    most of a second on two cores): outside triple-quoted strings, a line that begins
    `import` or `from ... import`, with its continuation lines, is one statement."""
    lines = text.splitlines()
    quote: str | None = None  # the triple quote of a string this line is inside
    guard: int | None = None  # the indentation of the TYPE_CHECKING guard whose body this is
    number = 0
    while number < len(lines):
        line = lines[number]
        number += 1
        if quote is not None:
            if line.count(quote) % 2:
                quote = None
            continue
        stripped = line.lstrip()
        indent = len(line) - len(stripped)
        if guard is not None and stripped and not stripped.startswith("#") and indent <= guard:
            guard = None  # the guard's body ended; its `else:` body counts
        if guard is None and (opened := _GUARD.match(line)):
            guard = len(opened.group(1))
            continue
        if guard is None and _STATEMENT.match(line):
            first = number
            statement = stripped
            while (statement.count("(") > statement.count(")")) or statement.endswith("\\"):
                statement += "\n" + lines[number]
                number += 1
            for node in ast.parse(statement).body:
                if isinstance(node, ast.Import | ast.ImportFrom):
                    node.lineno = first
                    yield node
            continue
        opening = _TRIPLE.search(line)
        if opening and line.count(opening.group()) % 2:
            quote = opening.group()


def import_graph(root: Path, package: str = PACKAGE) -> dict[str, list[Import]]:
    """Each module of `package` under `root` and the imports of the package's own modules it
    makes. Importing a module runs its packages' __init__ first: those count as imported too
    (but the importer's own packages, which are running already)."""
    paths = {_module_name(root, path): path for path in sorted((root / package).rglob("*.py"))}
    graph: dict[str, list[Import]] = {}
    for module, path in paths.items():
        is_package = path.name == "__init__.py"
        shown = path.relative_to(root.parent)  # src/gpuaccept/...: as a reader finds it
        found: list[Import] = []
        for node in _import_statements(path.read_text(encoding="utf-8")):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            else:
                if node.level:
                    base = module.split(".") if is_package else module.split(".")[:-1]
                    base = base[: len(base) - node.level + 1]
                    stem = ".".join([*base, *([node.module] if node.module else [])])
                else:
                    stem = node.module or ""
                # `from a import b`: the module a.b when there is one, else a's name b
                names = [
                    f"{stem}.{alias.name}" if f"{stem}.{alias.name}" in paths else stem
                    for alias in node.names
                ]
            for name in names:
                if name != package and not name.startswith(package + "."):
                    continue
                while name not in paths and "." in name:
                    name = name.rsplit(".", 1)[0]  # a name inside a module: the module
                if name not in paths:
                    continue
                parts = name.split(".")
                running = {".".join(module.split(".")[:i]) for i in range(1, module.count(".") + 1)}
                for depth in range(1, len(parts) + 1):
                    target = ".".join(parts[:depth])
                    if target in paths and target != module and target not in running:
                        found.append(Import(module, target, shown, node.lineno))
        graph[module] = list({(i.target, i.line): i for i in found}.values())
    return graph


def _strongly_connected(graph: Mapping[str, list[Import]]) -> list[list[str]]:
    """Tarjan's components of more than one module (a module never imports itself here)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        on_stack.add(module)
        for edge in graph[module]:
            if edge.target not in index:
                visit(edge.target)
                low[module] = min(low[module], low[edge.target])
            elif edge.target in on_stack:
                low[module] = min(low[module], index[edge.target])
        if low[module] == index[module]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == module:
                    break
            if len(component) > 1:
                components.append(sorted(component))

    for module in sorted(graph):
        if module not in index:
            visit(module)
    return components


def _one_cycle(graph: Mapping[str, list[Import]], component: list[str]) -> list[Import]:
    """A cycle through the component's first module, import by import (breadth-first: the
    shortest way back)."""
    members = set(component)
    start = component[0]
    came_by: dict[str, Import] = {}
    frontier = [start]
    while frontier:
        following = []
        for module in frontier:
            for edge in graph[module]:
                if edge.target == start:
                    path = [edge]
                    while path[0].source != start:
                        path.insert(0, came_by[path[0].source])
                    return path
                if edge.target in members and edge.target not in came_by:
                    came_by[edge.target] = edge
                    following.append(edge.target)
        frontier = following
    raise AssertionError(f"{component} is no cycle")


def cycles(graph: Mapping[str, list[Import]]) -> list[str]:
    """Each import cycle, said as `a -> b -> a` with where each import is."""
    said = []
    for component in _strongly_connected(graph):
        path = _one_cycle(graph, component)
        chain = " -> ".join([path[0].source, *(edge.target for edge in path)])
        where = "; ".join(str(edge) for edge in path)
        more = f" (one of the {len(component)} modules that import each other)"
        said.append(f"{chain}{more if len(component) > len(path) else ''}: {where}")
    return said


def _floor_key(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def climbs(
    graph: Mapping[str, list[Import]], floors: Mapping[str, int]
) -> tuple[list[Import], list[str]]:
    """(imports that go to a higher floor, modules whose top-level name has no floor)."""
    upward = []
    unplaced = sorted({_floor_key(m) for m in graph if _floor_key(m) not in floors})
    for edges in graph.values():
        for edge in edges:
            source, target = _floor_key(edge.source), _floor_key(edge.target)
            if source in floors and target in floors and floors[target] > floors[source]:
                upward.append(edge)
    # one line per import: the module it names, not the packages above it as well
    deepest = [
        edge
        for edge in upward
        if not any(
            other.source == edge.source
            and other.line == edge.line
            and other.target.startswith(edge.target + ".")
            for other in upward
        )
    ]
    return deepest, unplaced


@pytest.fixture(scope="module")
def graph() -> dict[str, list[Import]]:
    return import_graph(SOURCE)


def test_no_module_imports_itself_round_a_cycle(graph: dict[str, list[Import]]) -> None:
    assert cycles(graph) == [], "import cycles:\n" + "\n".join(cycles(graph))


def test_every_import_goes_to_its_floor_or_below(graph: dict[str, list[Import]]) -> None:
    upward, unplaced = climbs(graph, FLOORS)
    assert unplaced == [], f"give these a floor in tests/test_layers.py FLOORS: {unplaced}"
    climbing = [edge for edge in upward if (edge.source, edge.target) not in PENDING]
    assert climbing == [], "imports that climb a floor:\n" + "\n".join(
        f"{edge} (floor {FLOORS[_floor_key(edge.source)]} -> {FLOORS[_floor_key(edge.target)]})"
        for edge in climbing
    )
    stale = set(PENDING) - {(edge.source, edge.target) for edge in upward}
    assert not stale, f"no longer climbs: remove it from PENDING: {sorted(stale)}"


def test_every_floor_names_a_module_that_exists() -> None:
    present = {path.stem for path in (SOURCE / PACKAGE).glob("*.py")} | {
        path.name for path in (SOURCE / PACKAGE).iterdir() if path.is_dir()
    }
    assert {name for name in FLOORS if name} <= present | {"__init__"}


# --- the check itself, on a planted tree -------------------------------------------------------


def _plant(root: Path, files: Mapping[str, str]) -> Path:
    for name, text in files.items():
        path = root / "src" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root / "src"


def test_the_check_names_a_planted_cycle_with_its_lines(tmp_path: Path) -> None:
    source = _plant(
        tmp_path,
        {
            "gpuaccept/__init__.py": "",
            "gpuaccept/low.py": "def f():\n    from gpuaccept.high import g\n",
            "gpuaccept/high.py": "from gpuaccept import low\n",
            # a docstring's line and a TYPE_CHECKING guard's body import nothing; its else does
            "gpuaccept/apart.py": '"""Not an import:\nfrom gpuaccept.low import f\n"""\n'
            "from typing import TYPE_CHECKING\n"
            "if TYPE_CHECKING:\n    from gpuaccept import low\n"
            "else:\n    from gpuaccept import (\n        high,\n    )\n",
        },
    )
    graph = import_graph(source)
    assert [(i.target, i.line) for i in graph["gpuaccept.apart"]] == [("gpuaccept.high", 8)]
    found = cycles(graph)
    assert len(found) == 1
    assert found[0].startswith("gpuaccept.high -> gpuaccept.low -> gpuaccept.high: ")
    assert "low.py:2: gpuaccept.low imports gpuaccept.high" in found[0]
    assert "high.py:1: gpuaccept.high imports gpuaccept.low" in found[0]


def test_the_check_names_a_planted_climb_and_a_module_without_a_floor(tmp_path: Path) -> None:
    source = _plant(
        tmp_path,
        {
            "gpuaccept/__init__.py": "",
            "gpuaccept/ground.py": "import os\n\n\ndef f():\n    from .top import main\n",
            "gpuaccept/top/__init__.py": "",
            "gpuaccept/top/main.py": "from .. import stray\n",
            "gpuaccept/top/side.py": "from gpuaccept.ground import f\n",
            "gpuaccept/stray.py": "",
        },
    )
    graph = import_graph(source)
    assert cycles(graph) == []
    upward, unplaced = climbs(graph, {"": 0, "ground": 0, "top": 1})
    assert [(e.source, e.target, e.line) for e in upward] == [
        ("gpuaccept.ground", "gpuaccept.top.main", 5)
    ]
    assert str(upward[0]).endswith("ground.py:5: gpuaccept.ground imports gpuaccept.top.main")
    assert unplaced == ["stray"]


# --- what moved down to keep the floors, held equal to where it came from ----------------------


def test_the_check_names_the_rules_know_are_the_suites_and_burn_ins() -> None:
    """actions holds the names a site's [check] rows may use, below the suite and burn-in."""
    from gpuaccept.actions import known_check_names
    from gpuaccept.burnin.checks import CHECK_NAMES
    from gpuaccept.suite.selection import check_names

    assert known_check_names() == frozenset(
        {"default", *check_names(), *CHECK_NAMES, "history", "pairwise", "pairwise-ib"}
        | {"isolation", "mnist", "burnin"}
    )


def test_the_probes_critical_xids_are_those_the_builtin_tables_fail() -> None:
    """probe.xid carries the built-in tables' failing XIDs as data (an NVML event's verdict);
    the judge's tables are where they come from."""
    from gpuaccept.actions import XID_RANGE, builtin_rules, xid_verdict
    from gpuaccept.probe.xid import BUILTIN_FAILING_XIDS

    assert (
        frozenset(xid for xid in XID_RANGE if xid_verdict(builtin_rules(), xid) == "fail")
        == BUILTIN_FAILING_XIDS
    )
