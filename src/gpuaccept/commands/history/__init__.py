"""`gpuaccept history`, one module per subcommand (list_runs, gpu, show, compare, trend,
import_reports, push, fleet): each a request, `run(request, out)` and its result.

Kept empty of imports: the CLI's option declarations read fleet.py's defaults, and
`gpuaccept --help` must stay light.
"""
