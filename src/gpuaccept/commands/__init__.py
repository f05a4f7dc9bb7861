"""What each command does, as a library call: a typed request in, a result out.

One module per command (`accept`, `burnin`, `train_mnist`, ...): its request (validated once,
with the one-line errors users get) and `run(request, out)`, plan -> run -> write. The CLI builds
the request from its options, calls `run`, renders through `out` and maps errors and the
result's exit code to the process's exit (docs/design.md).
"""
