"""Typer's options built from a request's fields (commands.options): a command's CLI function
takes its request, whole, and only calls the library and renders.

    @command_of(WatchRequest)
    def watch(request: WatchRequest) -> None:
        "Poll NVML ... (the command's help)"
        result = run(request, CONSOLE)

Typer reads the parameters of the function it is given; here that function's signature is made
from the request's declared options (name, type, default, flag, help, panel, bounds), and its
body builds the request from what was parsed: a choice as its text, a repeated option as a tuple,
a part (act's `guarding`) as its dataclass.
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import inspect
import math
import typing
from collections.abc import Callable
from typing import Any, TypeVar

import typer

from gpuaccept.commands.options import Declared, declared, repeated

Request = TypeVar("Request")


def _finite(noun: str) -> Callable[[Any], Any]:
    def refuse_infinite(value: Any) -> Any:
        if value is not None and not math.isfinite(value):
            raise typer.BadParameter(f"must be a finite {noun} (got {value})")
        return value

    return refuse_infinite


@functools.cache
def _choice(choices: tuple[str, ...]) -> type[enum.Enum]:
    # click's own refusal ("'x' is not one of 'a', 'b'") comes with an enum of the texts
    return enum.StrEnum("Choice", {text: text for text in choices})  # type: ignore[return-value]


def _repeated(item: Declared) -> bool:
    return repeated(item.type)


def _typer_type(item: Declared) -> Any:
    """The annotation Typer parses the option by: a choice's enum, a repeated option's list."""
    element = typing.get_args(item.type)[0] if _repeated(item) else item.type
    if item.option.choices:
        choice = _choice(item.option.choices)
        element = choice | None if item.default is None else choice
    return list[element] if _repeated(item) else element  # type: ignore[valid-type]


def _typer_default(item: Declared) -> Any:
    if item.default is dataclasses.MISSING:
        return ...
    choice = _choice(item.option.choices) if item.option.choices else None
    if _repeated(item):
        return [choice(value) if choice else value for value in item.default]
    if choice is not None and item.default is not None:
        return choice(item.default)
    return item.default


def _parameter(item: Declared) -> inspect.Parameter:
    option, default = item.option, _typer_default(item)
    if option.argument:
        declaration = typer.Argument(default, help=option.help, show_default=option.show_default)
    else:
        choices = "[" + "|".join(option.choices) + "]" if option.choices else None
        declaration = typer.Option(
            default,
            *option.flags,
            metavar=option.metavar or choices,
            help=option.help,
            rich_help_panel=option.panel,
            min=option.least,
            max=option.most,
            callback=_finite(option.finite) if option.finite else None,
            show_default=option.show_default,
        )
    return inspect.Parameter(
        item.name,
        inspect.Parameter.KEYWORD_ONLY,
        default=declaration,
        annotation=_typer_type(item),
    )


def _plain(value: Any) -> Any:
    if isinstance(value, enum.Enum):
        return value.value
    return tuple(value) if isinstance(value, list) else value


def build(request_type: type[Request], parsed: dict[str, Any]) -> Request:
    """The request from the options as Typer parsed them."""
    values: dict[str, Any] = {}
    parts: dict[str, dict[str, Any]] = {}
    for item in declared(request_type):
        value = _plain(parsed[item.name])
        (parts.setdefault(item.part, {}) if item.part else values)[item.name] = value
    hints = typing.get_type_hints(request_type)
    for part, inner in parts.items():
        values[part] = hints[part](**inner)
    return request_type(**values)


def command_of(
    request_type: type[Request], *, context: bool = False
) -> Callable[[Callable[..., None]], Callable[..., None]]:
    """A Typer command whose options are `request_type`'s declared fields, running `body` with
    the request they make (its docstring is the command's help); with `context`, `body` also
    gets click's context (a group's callback asks which subcommand follows)."""
    parameters = [_parameter(item) for item in declared(request_type)]
    if context:
        ctx = inspect.Parameter("ctx", inspect.Parameter.KEYWORD_ONLY, annotation=typer.Context)
        parameters.insert(0, ctx)

    def wrap(body: Callable[..., None]) -> Callable[..., None]:
        def command(**parsed: Any) -> None:
            if context:
                ctx = parsed.pop("ctx")
                body(build(request_type, parsed), ctx)
            else:
                body(build(request_type, parsed))

        functools.update_wrapper(command, body)  # its name and docstring: the command's help
        command.request_type = request_type  # type: ignore[attr-defined]
        # what Typer reads: the options, not the body's one parameter
        command.__signature__ = inspect.Signature(parameters, return_annotation=None)  # type: ignore[attr-defined]
        command.__annotations__ = {p.name: p.annotation for p in parameters}
        return command

    return wrap
