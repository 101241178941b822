"""How ``--help`` shows flags: a flag takes no value, so no ``<bool>`` type is printed beside it."""

from __future__ import annotations

from typing import TYPE_CHECKING

from typer.core import TyperCommand, TyperGroup, TyperOption

if TYPE_CHECKING:  # typer ships its own copy of click: these are its types, not the click package's
    from typer._click import Context, Parameter


def _untyped_flags(params: list[Parameter]) -> list[Parameter]:
    """``params`` with every flag's metavar blank: typer's rich help prints a flag's type (``<bool>``) unless it
    has a metavar, and the ``--help`` option it adds to every command has none."""
    for param in params:
        if isinstance(param, TyperOption) and param.is_flag and param.metavar is None:
            param.metavar = ""
    return params


class Command(TyperCommand):
    """A ``guimem`` sub-command: its help lists flags (``--help`` too) without a type."""

    def get_params(self, ctx: Context) -> list[Parameter]:
        """The parameters, ``--help`` included, flags untyped."""
        return _untyped_flags(super().get_params(ctx))


class Group(TyperGroup):
    """A ``guimem`` command group (``guimem``, ``guimem memory``): flags shown without a type."""

    def get_params(self, ctx: Context) -> list[Parameter]:
        """The parameters, ``--help`` included, flags untyped."""
        return _untyped_flags(super().get_params(ctx))
