"""Options in named groups in plain help: each option's `rich_help_panel` (Typer's own field)
becomes a section, so a command with many options reads as a few groups, not one flat list.

The help stays click's plain layout (see cli/__init__.py for why); Typer's Rich panels would
need its Rich help, so the same field is rendered here.
"""

from __future__ import annotations

from typing import Any

import typer.core


class PanelledCommand(typer.core.TyperCommand):
    """A command whose --help lists its options in sections, in the order they first appear."""

    def format_options(self, ctx: Any, formatter: Any) -> None:
        arguments: list[tuple[str, str]] = []
        sections: dict[str, list[tuple[str, str]]] = {}
        for param in self.get_params(ctx):
            record = param.get_help_record(ctx)
            if record is None:
                continue
            if param.param_type_name == "argument":
                arguments.append(record)
            else:
                panel = getattr(param, "rich_help_panel", None) or "Other options"
                sections.setdefault(panel, []).append(record)
        if arguments:
            with formatter.section("Arguments"):
                formatter.write_dl(arguments)
        for name, rows in sections.items():
            with formatter.section(name):
                formatter.write_dl(rows)
