"""`gpuaccept bench` as library calls: one module per benchmark (matmul, membw, transfer,
collectives, nbody), `every` for all of them with their defaults, and what they share (common):
a typed request in, `run(request, out, progress)`, a BenchResult (exit code, report) out."""
