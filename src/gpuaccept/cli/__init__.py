"""The `gpuaccept` command line: assembles one Typer app from one module per command group.

Only Typer is imported here; every command imports the library (and torch) inside its body,
so `gpuaccept --help` and `gpuaccept --version` stay fast and torch-free. Help is click's plain
layout (`rich_markup_mode=None`), with explicit metavars: it reads the same whichever Typer pip
installs (Typer 0.29's rich help would print `<bool>` after every flag).

Every error a user can cause ends as one line on stderr and an exit code: library errors
(GpuacceptError), usage errors from the parser, and a standard output that is closed or full.
"""

from __future__ import annotations

import errno
import io
import os
import sys
from typing import Any

import typer
import typer.core

from gpuaccept import __version__
from gpuaccept.cli import (
    accept,
    act,
    bench,
    burnin,
    env,
    history,
    node_verdict,
    preflight,
    report,
    sweep,
    train,
    watch,
)
from gpuaccept.cli.help_panels import PanelledCommand
from gpuaccept.errors import GpuacceptError, Interrupted
from gpuaccept.interrupts import interrupted_cause
from gpuaccept.suite.selection import check_names, levels_text


class _ErrorMappingGroup(typer.core.TyperGroup):
    """Root group: a library error becomes one line on stderr and the error's exit code; every
    option and argument below it gets a plain metavar (see _plain_metavars)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        _plain_metavars(self)

    def invoke(self, ctx: Any) -> Any:
        # the words after `gpuaccept`, read now: the parser consumes them as it goes
        words = [*getattr(ctx, "_protected_args", []), *getattr(ctx, "args", [])]
        try:
            return super().invoke(ctx)
        except (GpuacceptError, Interrupted, RuntimeError) as raised:
            # a signal inside a class being built comes out as a RuntimeError (interrupted_cause)
            error = raised if not isinstance(raised, RuntimeError) else interrupted_cause(raised)
            if error is None:
                raise
            # prefixed with the command as typed, as the parser's own usage errors are
            typer.echo(f"{self._command_path(ctx, words)}: error: {error}", err=True)
            raise typer.Exit(error.exit_code) from None

    def _command_path(self, ctx: Any, words: list[str]) -> str:
        """`gpuaccept bench matmul`: the root's name and the subcommands named on the line."""
        path, command = [ctx.command_path or "gpuaccept"], self
        for word in words:
            commands = getattr(command, "commands", None)
            if not isinstance(commands, dict) or word not in commands:
                break
            path.append(word)
            command = commands[word]
        return " ".join(path)


_ROOT_HELP = f"""Is this GPU machine fit to run real PyTorch work, and as fast as it should be?

Start with `gpuaccept accept --level [quick|standard|full]`; its checks:
{", ".join(check_names())}.
"""
_EXIT_CODES = """Exit codes (every command): 0 pass (warnings allowed); 1 a check or gate failed, or
nothing could be judged; 2 usage or input error; 3 environment error (a required component is
missing); 4 a guard refused an action (`act`'s circuit breaker); 130 / 143 interrupted by
SIGINT / SIGTERM (the report is still written)."""

# \b keeps click from re-wrapping the lines of the table
_ACCEPT_LEVELS = "\b\nLevels (--level) and their checks:\n" + levels_text()

app = typer.Typer(
    cls=_ErrorMappingGroup,
    name="gpuaccept",
    help=_ROOT_HELP,
    epilog=_EXIT_CODES,
    no_args_is_help=True,
    # Typer's own --install-completion/--show-completion ignore a shell named after them (zsh
    # got bash's script, tcsh was installed as bash) and trace back on a HOME that is a file:
    # gpuaccept's own, below, serve the shell named or refuse in one line
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _print_version(value: bool) -> None:
    if value:
        typer.echo(f"gpuaccept {__version__}")
        raise typer.Exit(0)


_SHELLS = ("bash", "zsh", "fish")
_COMPLETE_VAR = "_GPUACCEPT_COMPLETE"


def _register_completion_shells() -> None:
    """What Typer does when it adds its own completion options: make the shells known to its
    click, so `_GPUACCEPT_COMPLETE=complete_bash gpuaccept` (the installed script) completes."""
    from typer._completion_classes import completion_init

    completion_init()


_register_completion_shells()


def _refuse(text: str) -> None:
    typer.echo(f"gpuaccept: error: {text}", err=True)
    raise typer.Exit(2)


def _named_shell(value: str, flag: str) -> str:
    if value not in _SHELLS:
        _refuse(f"{flag} {value!r}: completion is served for {', '.join(_SHELLS)}")
    return value


def _show_completion(value: str | None) -> None:
    if value is None:
        return
    from typer._completion_shared import get_completion_script

    shell = _named_shell(value, "--show-completion")
    script = get_completion_script(prog_name="gpuaccept", complete_var=_COMPLETE_VAR, shell=shell)
    typer.echo(script)
    raise typer.Exit(0)


def _install_completion(value: str | None) -> None:
    if value is None:
        return
    from pathlib import Path

    from typer._completion_shared import install

    shell = _named_shell(value, "--install-completion")
    home = os.environ.get("HOME")
    if not home:
        _refuse("--install-completion: HOME is not set: there is no home to install it in")
    elif not Path(home).is_dir():
        _refuse(f"--install-completion: HOME={home} is not a directory")
    try:
        _, path = install(shell=shell, prog_name="gpuaccept", complete_var=_COMPLETE_VAR)
    except OSError as error:
        where = f" {error.filename}" if error.filename else ""
        _refuse(f"--install-completion {shell}: cannot write{where}: {error.strerror or error}")
    typer.echo(f"{shell} completion installed in {path}; a new shell will use it")
    raise typer.Exit(0)


@app.callback()
def _root(
    version: bool = typer.Option(
        False,
        "--version",
        callback=_print_version,
        is_eager=True,
        help="Print the version and exit.",
    ),
    install_completion: str | None = typer.Option(
        None,
        "--install-completion",
        metavar="[bash|zsh|fish]",
        callback=_install_completion,
        is_eager=True,
        expose_value=False,
        help="Install completion for the shell named.",
    ),
    show_completion: str | None = typer.Option(
        None,
        "--show-completion",
        metavar="[bash|zsh|fish]",
        callback=_show_completion,
        is_eager=True,
        expose_value=False,
        help="Print the completion script of the shell named.",
    ),
) -> None:
    """Acceptance checks, benchmarks and workloads for GPU nodes and pools.

    Exit codes (every command): 0 pass (warnings allowed); 1 a check or gate failed, or nothing
    could be judged; 2 usage or input error; 3 environment error (a required component is
    missing); 4 a guard refused an action; 130 / 143 interrupted by SIGINT / SIGTERM.
    """


# Each command's line in `gpuaccept --help`, short enough that click does not cut it off.
app.command(
    "accept",
    cls=PanelledCommand,
    epilog=_ACCEPT_LEVELS,
    short_help="The acceptance suite on this process's GPUs.",
)(accept.accept)
app.command(
    "burnin",
    cls=PanelledCommand,
    short_help="Hours of load on every GPU, judged window by window.",
)(burnin.burnin)
app.add_typer(
    bench.app, name="bench", short_help="Benchmarks: matmul, memory, transfers, NCCL, n-body."
)
app.add_typer(train.app, name="train", short_help="Train MNIST: a real PyTorch workload.")
app.command("env", short_help="The stack, GPUs and scheduler this runs in.")(env.env)
app.add_typer(history.app, name="history", short_help="Past runs of this node and a fleet.")
app.command("report", short_help="A run as HTML, Markdown or Prometheus metrics.")(report.report)
app.command("node-verdict", short_help="kubectl label/taint commands from reports.")(
    node_verdict.node_verdict
)
app.add_typer(act.app, name="act", short_help="Drain or resume a node in Slurm, with guards.")
app.command("preflight", short_help="A verdict in seconds before a job starts.")(
    preflight.preflight
)
app.command("sweep", short_help="Accept idle nodes on a cadence, under a cap.")(sweep.sweep)
app.command("watch", short_help="A daemon between jobs: NVML, kernel log, metrics.")(watch.watch)

_OUTPUT_GONE = (errno.EPIPE, errno.ENOSPC, errno.EBADF, errno.EIO)


def _silence_stdout() -> None:
    """Point fd 1 at /dev/null so Python's flush at exit does not fail a second time."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 1)
    except OSError:
        pass


# Typer 0.29 carries its own copy of click; older Typer uses click itself. Take the exception
# classes from wherever this Typer's BadParameter lives, so both are handled alike.
_CLICK_ERRORS = sys.modules[typer.BadParameter.__module__]
_ClickException: type[Exception] = _CLICK_ERRORS.ClickException
_UsageError: type[Exception] = _CLICK_ERRORS.UsageError
_NoArgsIsHelp: type[Exception] | None = getattr(_CLICK_ERRORS, "NoArgsIsHelpError", None)


# Words for values where an option names no metavar itself.
_METAVARS = {"path": "PATH", "int": "N", "float": "NUMBER", "str": "TEXT"}


def _value_kind(param: Any) -> str:
    """'path', 'int', 'float' or 'str' for a parameter, from Typer's annotation (Typer 0.29) or
    click's type name (older Typer)."""
    descriptor = getattr(param, "type_descriptor", None)
    annotation = getattr(descriptor, "annotation", None)
    if annotation is not None:
        inner = getattr(annotation, "__args__", None)
        if inner:  # list[str], Path | None: the element type tells
            annotation = next((arg for arg in inner if arg is not type(None)), annotation)
        return str(getattr(annotation, "__name__", annotation)).lower()
    name = str(getattr(getattr(param, "type", None), "name", "")).lower()
    return {"integer": "int", "integer range": "int", "float range": "float", "text": "str"}.get(
        name, name
    )


def _plain_metavars(command: Any) -> None:
    """Give every option a plain metavar (PATH, N, NUMBER, TEXT) and every argument just its name,
    so help reads the same whichever Typer pip installs: Typer 0.29 prints `<path>`,
    `<int range>` and `<list[str]>` where no metavar was set."""
    for param in getattr(command, "params", []):
        if getattr(param, "is_flag", False) or param.metavar is not None:
            continue
        if param.param_type_name == "argument":
            # the argument's own NAME says it; Typer 0.29 would add `<str>` after it
            param.metavar = (param.name or "value").upper()
            if hasattr(param, "display_type_rich"):
                param.display_type_rich = lambda ctx=None: None
            # and the usage line as click and man pages write it: `RUN`, `[RUN]`, `REPORT...`
            # (Typer 0.29 writes a required argument `{RUN}`)
            shown = param.metavar if param.required else f"[{param.metavar}]"
            shown += "..." if param.nargs != 1 else ""
            param._usage_display_name = lambda shown=shown: shown
        else:
            param.metavar = _METAVARS.get(_value_kind(param), "VALUE")
    for sub in getattr(command, "commands", {}).values():
        _plain_metavars(sub)


class _ReaderGone(io.TextIOBase):
    """stdout that outlives its reader: `gpuaccept accept | head -1` closes the pipe after one
    line, and the run must still write its report and history and exit with its verdict. The
    first broken pipe points fd 1 at /dev/null and says so once on stderr; the rest is dropped."""

    def __init__(self, stream: Any) -> None:
        self._stream = stream
        self.gone = False

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return str(getattr(self._stream, "encoding", "utf-8"))

    @property
    def errors(self) -> str | None:  # type: ignore[override]
        return getattr(self._stream, "errors", None)

    def _lost(self) -> None:
        if not self.gone:
            self.gone = True
            _silence_stdout()
            print(
                "gpuaccept: standard output closed (broken pipe): the run goes on, its report "
                "and history are still written",
                file=sys.stderr,
            )

    def write(self, text: str) -> int:
        if not self.gone:
            try:
                self._stream.write(text)
            except BrokenPipeError:
                self._lost()
        return len(text)

    def flush(self) -> None:
        if not self.gone:
            try:
                self._stream.flush()
            except BrokenPipeError:
                self._lost()

    def isatty(self) -> bool:
        return bool(self._stream.isatty())

    def fileno(self) -> int:
        return int(self._stream.fileno())

    def writable(self) -> bool:
        return True


def main() -> None:
    """Console-script entry point."""
    if sys.stdout is None:  # started with file descriptor 1 closed
        typer.echo("gpuaccept: error: cannot write output: standard output is closed", err=True)
        sys.exit(2)
    if not sys.stdout.isatty():
        sys.stdout = _ReaderGone(sys.stdout)
    command = typer.main.get_command(app)
    try:
        # Without standalone mode, click returns the code of typer.Exit instead of exiting.
        code = command.main(prog_name="gpuaccept", standalone_mode=False)
    except typer.Exit as done:
        _flush_or_report()
        sys.exit(done.exit_code)
    except typer.Abort:
        typer.echo("gpuaccept: error: aborted", err=True)
        sys.exit(130)
    except _ClickException as error:
        context: Any = getattr(error, "ctx", None)
        if _NoArgsIsHelp is not None and isinstance(error, _NoArgsIsHelp):
            typer.echo(context.get_help() if context else "", err=True)
            sys.exit(2)
        where = context.command_path if isinstance(error, _UsageError) and context else "gpuaccept"
        # Typer 0.29 words its choice errors through pydantic ("Value error, ..."): drop that.
        message = _plain_range(error, error.format_message().replace("Value error, ", ""))  # type: ignore[attr-defined]
        typer.echo(f"{where}: error: {message}", err=True)
        sys.exit(int(getattr(error, "exit_code", 2)))
    except OSError as error:
        _exit_if_output_gone(error)
        raise
    _flush_or_report()
    sys.exit(code if isinstance(code, int) else 0)


_BOUNDS = {
    "greater_than_equal": ("ge", "at least"),
    "less_than_equal": ("le", "at most"),
    "greater_than": ("gt", "above"),
    "less_than": ("lt", "below"),
}


def _plain_range(error: Exception, message: str) -> str:
    """Typer 0.29 checks an option's range through pydantic, which read "Input should be greater
    than or equal to 2" and named no value, and for `nan` read as if the number were too small
    (the range is checked before the option's own callback could refuse NaN): say it as the
    other refusals do, "must be at least 2 (got 1)", "must be a number (got nan)"."""
    errors = getattr(error.__cause__, "errors", None)
    for item in errors() if callable(errors) else ():
        raw, said = item.get("input"), str(item.get("msg", ""))
        if not said or not isinstance(raw, str):
            continue
        if raw.strip().lower() in ("nan", "+nan", "-nan"):
            return message.replace(said, f"must be a number (got {raw})")
        key, words = _BOUNDS.get(str(item.get("type")), ("", ""))
        bound = (item.get("ctx") or {}).get(key)
        if isinstance(bound, int | float):
            shown = f"{int(bound):,}" if float(bound).is_integer() else f"{bound}"
            return message.replace(said, f"must be {words} {shown} (got {raw})")
    return message


def _exit_if_output_gone(error: OSError) -> None:
    """A closed or full stdout is one line on stderr and exit 2; other OS errors go on up."""
    if error.errno in _OUTPUT_GONE:
        _silence_stdout()
        typer.echo(f"gpuaccept: error: cannot write output: {error.strerror}", err=True)
        sys.exit(2)


def _flush_or_report() -> None:
    try:
        sys.stdout.flush()
    except OSError as error:
        _exit_if_output_gone(error)
        raise
