"""A command's options, declared once: on the request's field that holds each (issue #51).

A request's field says what the command takes (its name, type and default); its `Opt` says how
a person gives it on the command line (the flag, the help, the panel, the bounds). cli.declared
builds Typer's options from them, so an option is a field and a field is an option: there is no
second list to keep equal, and a caller without Typer is held to the same bounds by
`check_bounds`, each refused in one line naming the option. As torchtitan declares its job config (a
field with its help, read by tyro), not as click declares options (a decorator per option).
"""

from __future__ import annotations

import dataclasses
import inspect
import math
import typing
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from gpuaccept.errors import InputError


@dataclass(frozen=True)
class Opt:
    """How a request's field is given on the command line.

    `flags`: "--level", or "--x/--no-x" for a flag with both forms, or several ("--warmup",
    "-w"); `metavar`: the value's word in help (a choice's is its texts, [a|b], unless given);
    `choices`: the texts the parser accepts (the field holds the text; a repeated option, a
    tuple of them); `least`/`most`: the bounds, checked by the parser and by
    `check_bounds`; `finite`: refuse inf and NaN, said as "a finite <finite>" ("number",
    "number of seconds"); `argument`: a positional argument, not an option."""

    flags: tuple[str, ...]
    metavar: str | None = None
    help: str = ""
    panel: str | None = None
    least: float | None = None
    most: float | None = None
    choices: tuple[str, ...] = ()
    finite: str | None = None
    show_default: bool | str = True
    argument: bool = False


def opt(
    flags: str | tuple[str, ...],
    metavar: str | None = None,
    text: str = "",
    *,
    panel: str | None = None,
    least: float | None = None,
    most: float | None = None,
    choices: tuple[str, ...] = (),
    finite: str | None = None,
    show_default: bool | str = True,
) -> Opt:
    """An option: its flag(s), the word for its value, its help; the rest by name."""
    return Opt(
        (flags,) if isinstance(flags, str) else flags,
        metavar=metavar,
        help=text,
        panel=panel,
        least=least,
        most=most,
        choices=choices,
        finite=finite,
        show_default=show_default,
    )


def arg(text: str) -> Opt:
    """A positional argument and its help (its word in help is the field's name)."""
    return Opt((), help=text, argument=True)


@dataclass(frozen=True)
class Declared:
    """One option of a request, in the order the command line shows them: the field's `name`
    (`part`: the nested dataclass field holding it, as act's `guarding`), its resolved `type`,
    its `default` (dataclasses.MISSING: required) and its `option`."""

    name: str
    type: Any
    default: Any
    option: Opt
    part: str | None = None


def _own_names(cls: type) -> list[str]:
    return list(inspect.get_annotations(cls))


_DECLARED: dict[type, tuple[Declared, ...]] = {}


def declared(request_type: type) -> tuple[Declared, ...]:
    """Every option of a request: its fields with an `Opt`, and those of a field that holds a
    dataclass of them (a part, flattened), in command-line order: the class's own fields first,
    then each base's (a benchmark's own options above the options every benchmark takes). A
    field without an `Opt` is the library's alone."""
    if request_type not in _DECLARED:
        _DECLARED[request_type] = _declared(request_type)
    return _DECLARED[request_type]


def _declared(request_type: type) -> tuple[Declared, ...]:
    hints = typing.get_type_hints(request_type, include_extras=True)
    fields = {field.name: field for field in dataclasses.fields(request_type)}
    order: list[str] = []
    for cls in request_type.__mro__:
        order += [name for name in _own_names(cls) if name in fields and name not in order]
    found: list[Declared] = []
    for name in order:
        field, hint = fields[name], hints[name]
        option = _option_of(hint)
        if option is not None:
            found.append(Declared(name, typing.get_args(hint)[0], _default(field), option))
        elif dataclasses.is_dataclass(hint) and isinstance(hint, type):
            # the part's options, with the defaults this request gives it (its default_factory)
            given = _default(field)
            found += [
                dataclasses.replace(
                    inner,
                    part=name,
                    default=inner.default
                    if given is dataclasses.MISSING
                    else getattr(given, inner.name),
                )
                for inner in declared(hint)
            ]
    _refuse_ambiguity(request_type, found)
    return tuple(found)


def _refuse_ambiguity(request_type: type, found: list[Declared]) -> None:
    """A flag two fields claim, or a repeated option that may be None: either would be parsed
    into something the request did not mean, silently. Said when the request is first read (the
    CLI's import), naming the fields."""
    claimed: dict[str, str] = {}
    for item in found:
        where = f"{request_type.__name__}.{item.part + '.' if item.part else ''}{item.name}"
        for flag in (part for flags in item.option.flags for part in flags.split("/")):
            if flag in claimed:
                raise TypeError(f"{where} and {claimed[flag]} both declare {flag}")
            claimed[flag] = where
        union = typing.get_args(item.type)
        if type(None) in union and any(repeated(kind) for kind in union):
            raise TypeError(f"{where}: a repeated option holds a tuple, () when not given")


def repeated(kind: Any) -> bool:
    """A type a repeated option is held in: a tuple, a list, a Sequence."""
    return typing.get_origin(kind) in (tuple, list, Sequence)


def _option_of(hint: Any) -> Opt | None:
    if typing.get_origin(hint) is typing.Annotated:
        return next((extra for extra in hint.__metadata__ if isinstance(extra, Opt)), None)
    return None


def _default(field: dataclasses.Field[Any]) -> Any:
    if field.default is not dataclasses.MISSING:
        return field.default
    if field.default_factory is not dataclasses.MISSING:
        return field.default_factory()
    return dataclasses.MISSING


def flag_of(name: str, option: Opt) -> str:
    """The option as a person types it: its first long flag (the field's name for an argument)."""
    if option.argument:
        return name.upper()
    return next((flag for flag in option.flags if flag.startswith("--")), option.flags[0]).split(
        "/"
    )[0]


def _values(request: object) -> Iterator[tuple[Declared, Any]]:
    for item in declared(type(request)):
        holder = getattr(request, item.part) if item.part else request
        yield item, getattr(holder, item.name)


def check_bounds(request: object) -> None:
    """Hold a request's numbers to their options' bounds, in one line naming the option: a
    library caller gets the parser's bounds (InputError, exit 2), NaN refused, inf where the
    option says `finite`. Choices are the plan's to refuse, as they were before the bounds
    were declared here."""
    for item, value in _values(request):
        option, flag = item.option, flag_of(item.name, item.option)
        bounded = option.least is not None or option.most is not None or option.finite
        if value is None or not bounded:
            continue
        whole = _whole(item.type)
        # a bool as a count is a caller's slip; a 0/1 whole number (nccl-tests' -c) is a switch
        switch = whole and option.least == 0 and option.most == 1
        if (isinstance(value, bool) and not switch) or not isinstance(value, int | float):
            raise InputError(f"{flag}: a number, not {value!r}")
        if whole and not isinstance(value, int):
            raise InputError(f"{flag}: a whole number, not {value!r}")
        # NaN is within no bounds; inf only where the option says finite (else the command's
        # own check says it, in its words: train mnist's --lr)
        if math.isnan(value) or (option.finite and not math.isfinite(value)):
            raise InputError(f"{flag}: must be a finite number (got {value})")
        least, most = option.least, option.most
        if (least is not None and value < least) or (most is not None and value > most):
            if most is None:
                within = f"at least {_bound(least)}"
            elif least is None:
                within = f"at most {_bound(most)}"
            else:
                within = f"{_bound(least)} to {_bound(most)}"
            shown = f"{value}" if isinstance(value, int) else f"{value:g}"
            raise InputError(f"{flag} {shown}: give {within}")


def _whole(kind: Any) -> bool:
    """An int option (int, or int | None)."""
    return kind is int or (kind is not None and set(typing.get_args(kind)) == {int, type(None)})


def _bound(value: float | None) -> str:
    """A bound as the parser says it: 1,000,000 (a whole number), 0.1."""
    assert value is not None
    return f"{int(value):,}" if float(value).is_integer() else f"{value:g}"


# -- options several commands take, declared once -------------------------------------------

HISTORY = opt(
    "--history",
    "FILE|postgresql://...",
    "History to record the run in: an SQLite file or a PostgreSQL URI (default: "
    "$GPUACCEPT_HISTORY, else ~/.local/share/gpuaccept/history.sqlite). A server that cannot "
    "be reached keeps the run in the spool ($GPUACCEPT_SPOOL) for `gpuaccept history push`.",
    panel="History",
)
NO_HISTORY = opt(
    "--no-history",
    text="Do not record this run in the history (nor compare it with the node's past).",
    panel="History",
)
DROP_TOLERANCE = opt(
    "--drop-tolerance",
    "PERCENT",
    "Warn when a figure is more than PERCENT worse than the median of this node's last "
    "comparable runs in the history (docs/accept.md, 'Slower than it was').",
    panel="History",
    show_default="20 on a GPU, 50 on the CPU twins",
)
FAIL_ON_DROP = opt(
    "--fail-on-drop",
    text="Fail the run (exit 1), not only warn, when a figure dropped past --drop-tolerance.",
    panel="History",
)


def rules_opt(panel: str | None = None) -> Opt:
    """--rules of every command that plans actions (accept, burnin, watch, preflight)."""
    said = "TOML of the site's action tables over the built-in ones: what each XID, DCGM error "
    said += "or finding recommends (docs/actions.md)."
    return opt("--rules", "FILE", said, panel=panel)


RULES = rules_opt()
DEVICES = ("auto", "cuda", "cpu")


def device_opt(text: str, panel: str | None = None) -> Opt:
    """Every command's --device: one choice, refused by the parser in one line, each command
    saying it its way."""
    return opt("--device", None, text, panel=panel, choices=DEVICES)


# accept's and burnin's, in the help panel "What to run"
DEVICE = device_opt("auto (GPU when usable), cuda, or cpu (the CPU twins).", "What to run")
JUNIT = opt("--junit", "FILE", "Write JUnit XML.", panel="Outputs")


def report_dir_opt(holding: str) -> Opt:
    """accept's and burnin's --report-dir: the same option, each saying what its report holds."""
    return opt(
        "--report-dir",
        "DIR",
        f"Write the JSON report ({holding}) here, as a new file.",
        panel="Outputs",
    )


# where a training run's report goes: `train mnist` and `train llm` (commands.train_*)
TRAIN_REPORT_DIR = opt(
    "--report-dir", text="Write the JSON report (with environment capture) here."
)
