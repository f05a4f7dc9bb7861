#!/usr/bin/env python3
"""Mutation testing of references.toml (issue #30 §9): mutmut mutates Python only, so the data a
verdict reads is mutated here. Each value a verdict or a floor reads is changed in turn (an
integer fact by one, a figure, a fraction or a peak by a quarter, a PCI id by one, a flag
flipped, a name pattern emptied of matches) in a copy of the package, and the selected tests run
against the copy, fast files first and stopping at the first failure. A mutant no test fails is
a survivor: a row no test holds.

Usage: scripts/data_mutation.py [--floor PERCENT] [--jobs N] [--limit N] [--skip N] [TEST ...]
Prints every survivor (line, key, change) and the progress as it goes, then the score; exits 1
below the floor (default 90). --skip N resumes a run that stopped after N mutants.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DATA = Path("src/gpuaccept/data/references.toml")
TESTS = [
    "tests/test_reference_fractions.py",
    "tests/test_reference_sources.py",
    "tests/test_references.py",
    "tests/checks/test_health.py",
    "tests/checks/test_measurement_checks.py",
    # a real H200's link under load holds the H200's PCIe row (its measured report)
    "tests/checks/test_load.py",
]
_SECTION = re.compile(r"^\[models\.(?P<model>[\w-]+)(?P<metrics>\.metrics)?\]\s*$")
_FACT = re.compile(
    r"^(?P<key>nvlink_links|pcie_gen|pcie_width|power_load_fraction|clock_load_fraction"
    r"|switch_fabric)\s*=\s*(?P<value>\S+)"
)
_NUMBER = re.compile(r"(?P<key>\b[a-z0-9_]+)\s*=\s*(?P<value>-?[0-9]+(?:\.[0-9]+)?)\b")
_HEX_ID = re.compile(r'"0x(?P<hex>[0-9a-fA-F]{4})"')
_PATTERN = re.compile(r"'(?P<text>[^']*)'")


@dataclass(frozen=True)
class Mutant:
    line: int  # 1-based
    where: str  # model and key
    change: str
    text: str  # the whole mutated file


_COUNTS = ("nvlink_links", "pcie_gen", "pcie_width")


def _number(value: str, key: str) -> str:
    """A count by one; a figure or a peak up by a quarter; a fraction down by a quarter (it stays
    a valid fraction)."""
    if key in _COUNTS:
        return str(int(float(value)) + 1)
    scaled = float(value) * (0.75 if key.endswith("fraction") else 1.25)
    return f"{scaled:.6g}"


def mutants(text: str) -> list[Mutant]:
    lines = text.splitlines(keepends=True)
    found: list[Mutant] = []

    def add(index: int, where: str, change: str, new_line: str) -> None:
        found.append(
            Mutant(
                index + 1, where, change, "".join([*lines[:index], new_line, *lines[index + 1 :]])
            )
        )

    model, in_metrics = None, False
    for index, line in enumerate(lines):
        section = _SECTION.match(line)
        if section:
            model, in_metrics = section["model"], bool(section["metrics"])
            continue
        if line.startswith("[") or model is None or line.lstrip().startswith("#"):
            if line.startswith("["):
                model = None
            continue
        head = line.split("=", 1)[0].strip()
        fact = _FACT.match(line)
        if fact and fact["value"] in ("true", "false"):
            flipped = "false" if fact["value"] == "true" else "true"
            add(
                index,
                f"{model}.{head}",
                f"{fact['value']} -> {flipped}",
                line.replace(fact["value"], flipped, 1),
            )
            continue
        # a PCI id one higher in its last digit; a name pattern that matches no GPU
        swaps = {
            "pci_device_ids": (
                _HEX_ID,
                lambda hit: f'"0x{hit["hex"][:-1]}{(int(hit["hex"][-1], 16) + 1) % 16:x}"',
            ),
            "match": (_PATTERN, lambda hit: "'^no such GPU$'"),
        }
        if head in swaps:
            pattern, new_of = swaps[head]
            for hit in pattern.finditer(line):
                new = new_of(hit)
                changed = line[: hit.start()] + new + line[hit.end() :]
                add(index, f"{model}.{head}", f"{hit.group(0)} -> {new}", changed)
            continue
        if head in ("display", "form_factor", "source"):
            continue
        metric = head if in_metrics else None
        for hit in _NUMBER.finditer(line):
            key = hit["key"]
            if key in ("source", "unit"):
                continue
            new = _number(hit["value"], key)
            where = (
                f"{model}.{metric}.{key}"
                if metric
                else f"{model}.{head}.{key}"
                if head == "peaks"
                else f"{model}.{key}"
            )
            start, end = hit.span("value")
            add(index, where, f"{hit['value']} -> {new}", line[:start] + new + line[end:])
    return found


def _run(mutant: Mutant, work: Path, tests: list[str]) -> bool:
    """Whether a test failed against the mutant (killed). The tests run from the work copy:
    the tree as it was at the start, never the working tree someone edits meanwhile."""
    (work / DATA).write_text(mutant.text, encoding="utf-8")
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-x", "-q", "-n", "0", "-p", "no:cacheprovider", *tests],
        cwd=work,
        env={**os.environ, "PYTHONPATH": f"{work / 'src'}{os.pathsep}{work}"},
        capture_output=True,
        timeout=600,
        check=False,
    )
    return done.returncode != 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("tests", nargs="*", default=TESTS)
    parser.add_argument("--floor", type=float, default=90.0)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--limit", type=int, default=0, help="only the first N mutants")
    parser.add_argument("--skip", type=int, default=0, help="start after the first N mutants")
    args = parser.parse_args()
    found = mutants((ROOT / DATA).read_text(encoding="utf-8"))
    if args.limit:
        found = found[: args.limit]
    with tempfile.TemporaryDirectory(prefix="gpuaccept-data-mutation-") as scratch:
        works = []
        for job in range(args.jobs):
            work = Path(scratch) / f"w{job}"
            skip = shutil.ignore_patterns("__pycache__")
            shutil.copytree(ROOT / "src", work / "src", ignore=skip)
            shutil.copytree(ROOT / "tests", work / "tests", ignore=skip)
            shutil.copy2(ROOT / "pyproject.toml", work / "pyproject.toml")
            works.append(work)
        # the copy unmutated must pass: else every mutant would count as killed
        unmutated = Mutant(0, "none", "none", (ROOT / DATA).read_text(encoding="utf-8"))
        if _run(unmutated, works[0], args.tests):
            print("data-mutation: the tests fail on the unmutated copy", file=sys.stderr)
            return 2

        def one(item: tuple[int, Mutant]) -> tuple[Mutant, bool]:
            number, mutant = item
            return mutant, _run(mutant, works[number % args.jobs], args.tests)

        # one worker per copy: mutant n runs in copy n % jobs, so copies are never shared
        results: list[tuple[Mutant, bool]] = []
        numbered = list(enumerate(found))[args.skip :]
        for start in range(0, len(numbered), args.jobs):
            batch = numbered[start : start + args.jobs]
            with ThreadPoolExecutor(max_workers=args.jobs) as pool:
                done = list(pool.map(one, batch))
            results += done
            # said as it goes: a run of hundreds of mutants takes an hour and more, and one
            # stopped part-way still tells which rows no test holds
            for mutant, killed in done:
                if not killed:
                    print(f"  survived: line {mutant.line} {mutant.where}: {mutant.change}")
            ran = args.skip + start + len(batch)
            print(f"data-mutation: {ran} of {len(found)} run", flush=True)
    survivors = [m for m, killed in results if not killed]
    total = len(results)
    score = 100.0 * (total - len(survivors)) / total if total else 0.0
    killed = total - len(survivors)
    print(f"data-mutation: {killed} of {total} mutants of {DATA} killed ({score:.1f}%)")
    return 0 if score >= args.floor else 1


if __name__ == "__main__":
    sys.exit(main())
