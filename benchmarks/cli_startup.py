"""Measure `gpuaccept --help` and `--version` wall time (median of repeated cold processes).

Target (issue #2): under 0.3 s median on the 2-core CI machine. Reference in the same run: a
bare `python -c pass`, so the figure can be read as interpreter start plus our own cost.
Run: python benchmarks/cli_startup.py [repeats]
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import time

from fresh_bytecode import compile_gpuaccept


def median_seconds(argv: list[str], repeats: int) -> float:
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        subprocess.run(argv, check=True, capture_output=True)
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def main() -> None:
    repeats = int(sys.argv[1]) if len(sys.argv) > 1 else 15
    print(compile_gpuaccept())
    bare = median_seconds([sys.executable, "-c", "pass"], repeats)
    print(f"python -c pass          median {bare * 1000:7.1f} ms")
    for args in (["--help"], ["--version"], ["accept", "--help"]):
        took = median_seconds([sys.executable, "-m", "gpuaccept", *args], repeats)
        verdict = "ok" if took < 0.3 else "OVER 0.3 s TARGET"
        print(
            f"gpuaccept {' '.join(args):<14} median {took * 1000:7.1f} ms "
            f"({took / bare:4.1f}x bare python)  {verdict}"
        )


if __name__ == "__main__":
    main()
