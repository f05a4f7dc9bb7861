"""The CLI only parses and renders (issue #51 §1, docs/design.md): what a command does lives in
gpuaccept.commands; cli/ holds option declarations, a short body that builds a request, calls the
library and renders, and the console. Held here so that the next command copies the right shape."""

from __future__ import annotations

import ast
from pathlib import Path

CLI = Path(__file__).resolve().parents[1] / "src" / "gpuaccept" / "cli"
# The target is 2,000 lines; about 880 of today's are option declarations (Typer
# signatures and the shared options). A ratchet: lowered as lines leave, never raised.
MAX_CLI_LINES = 2600
MAX_BODY_LINES = 60


def _body_lines(function: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    """Lines of a function's body: its option declarations (the signature) do not count, nor does
    its docstring."""
    body = function.body
    if (
        body
        and isinstance(body[0], ast.Expr)
        and isinstance(body[0].value, ast.Constant)
        and isinstance(body[0].value.value, str)
    ):
        body = body[1:]
    if not body:
        return 0
    return (body[-1].end_lineno or body[-1].lineno) - body[0].lineno + 1


def long_functions(root: Path, limit: int) -> list[str]:
    found = []
    for path in sorted(root.rglob("*.py")):
        tree = ast.parse(path.read_text(), str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                lines = _body_lines(node)
                if lines > limit:
                    found.append(
                        f"{path.relative_to(root.parent)}:{node.lineno} {node.name}: {lines}"
                    )
    return found


def test_no_cli_function_body_is_over_60_lines() -> None:
    assert long_functions(CLI, MAX_BODY_LINES) == []


def test_the_cli_does_not_grow() -> None:
    total = sum(len(path.read_text().splitlines()) for path in CLI.rglob("*.py"))
    assert total <= MAX_CLI_LINES, f"cli/ has {total} lines"


WORK_OWNERS = (
    "gpuaccept.store",
    "gpuaccept.compare",
    "gpuaccept.report.json_report",
    "gpuaccept.report.junit",
    "gpuaccept.output_files",
    "gpuaccept.suite.runner",
    "gpuaccept.suite.multinode",
)


def work_imports(root: Path) -> list[str]:
    """Imports under `root` of what writes reports, opens histories or runs the suite."""
    found = []
    for path in sorted(root.rglob("*.py")):
        for node in _runtime_nodes(ast.parse(path.read_text())):
            if (
                isinstance(node, ast.ImportFrom)
                and node.module
                and node.module.startswith(WORK_OWNERS)
            ):
                found.append(f"{path.relative_to(root.parent)}:{node.lineno} {node.module}")
    return found


def test_the_cli_writes_no_file_and_opens_no_history() -> None:
    """Writing reports and opening histories is the library's (commands/): a cli module that
    imports the writers or the stores has taken work back from it."""
    assert work_imports(CLI) == []


def test_the_import_check_finds_work_but_not_a_type(tmp_path: Path) -> None:
    (tmp_path / "cli").mkdir()
    (tmp_path / "cli" / "m.py").write_text(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n"
        "    from gpuaccept.store.history import History\n"
        "def f() -> None:\n"
        "    from gpuaccept.store.history import History\n"
    )
    assert work_imports(tmp_path / "cli") == ["cli/m.py:5 gpuaccept.store.history"]


def _runtime_nodes(tree: ast.AST) -> list[ast.AST]:
    """Every node but those under `if TYPE_CHECKING:` (a type named is not work done)."""
    kept: list[ast.AST] = []

    def visit(node: ast.AST) -> None:
        test = node.test if isinstance(node, ast.If) else None
        if isinstance(node, ast.If) and isinstance(test, ast.Name) and test.id == "TYPE_CHECKING":
            for child in node.orelse:
                visit(child)
            return
        kept.append(node)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    return kept


def test_the_shape_check_finds_a_long_body(tmp_path: Path) -> None:
    """The check itself: a body of 61 lines is found, one of 60 with a docstring is not."""
    (tmp_path / "cli").mkdir()
    long = "\n".join(f"    x{i} = {i}" for i in range(61))
    fine = '    """doc"""\n' + "\n".join(f"    y{i} = {i}" for i in range(60))
    signature = "def long(a: int = 1,\n        b: int = 2) -> None:\n"
    (tmp_path / "cli" / "m.py").write_text(f"{signature}{long}\n\n\ndef fine() -> None:\n{fine}\n")
    assert long_functions(tmp_path / "cli", MAX_BODY_LINES) == ["cli/m.py:1 long: 61"]
