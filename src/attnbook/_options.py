"""Command-line options derived from a dataclass: one source for a setting's name, default,
type and help.

A field declared with :func:`option` carries its help text and how the command line reads it
in the field's ``metadata``; :func:`add_dataclass_arguments` turns every field into an
``argparse`` option. The library (the dataclass) and the command line therefore cannot
disagree on a default or forget an option.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
from typing import Any

__all__ = [
    "option",
    "cli_dest",
    "cli_flag",
    "cli_default",
    "add_dataclass_arguments",
    "positive_int",
    "natural_int",
    "positive_float",
    "fraction",
    "unit_interval",
    "float_pair",
    "values_from_options",
]


# --------------------------------------------------------------------------------------------
# argparse types: each names what it wants and what it got
# --------------------------------------------------------------------------------------------


def _number(text: str, kind, want: str, ok) -> Any:
    try:
        value = kind(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be {want}, got {text!r}") from None
    if not ok(value):
        raise argparse.ArgumentTypeError(f"must be {want}, got {text}")
    return value


def positive_int(text: str) -> int:
    return _number(text, int, "a positive integer", lambda v: v >= 1)


def natural_int(text: str) -> int:
    return _number(text, int, "an integer >= 0", lambda v: v >= 0)


def positive_float(text: str) -> float:
    return _number(text, float, "a positive number", lambda v: math.isfinite(v) and v > 0)


def fraction(text: str) -> float:
    return _number(text, float, "a number in [0, 1)", lambda v: 0.0 <= v < 1.0)


def unit_interval(text: str) -> float:
    return _number(text, float, "a number in [0, 1]", lambda v: 0.0 <= v <= 1.0)


def float_pair(text: str) -> tuple[float, float]:
    """``"0.9,0.98"`` -> ``(0.9, 0.98)``."""
    parts = text.split(",")
    try:
        pair = tuple(float(p) for p in parts)
    except ValueError:
        pair = ()
    if len(pair) != 2:
        raise argparse.ArgumentTypeError(f"must be two numbers such as 0.9,0.98, got {text!r}")
    return pair


# --------------------------------------------------------------------------------------------
# fields and the options made from them
# --------------------------------------------------------------------------------------------


def option(
    default,
    help: str,
    *,
    type=None,
    metavar: str | None = None,
    choices=None,
    flag: str | None = None,
    dest: str | None = None,
    invert: bool = False,
    group: str = "",
    exclusive: str = "",
    show_default: bool = True,
):
    """A dataclass field whose metadata says how the command line reads it.

    ``help``: the option's help (``(default: X)`` is added unless ``show_default`` is False);
    ``type``, ``metavar``, ``choices``: as in ``argparse``; a bool field becomes a flag
    (``--x`` / ``--no-x`` when its default is True or None). ``flag`` and ``dest``: the option
    and the key of the parsed options when they differ from the field's name; ``invert``: the
    option is a flag meaning ``field = False`` (``--quiet`` for ``progress``). ``group``: the
    help section; ``exclusive``: options sharing it are mutually exclusive."""
    meta = {
        "help": help,
        "type": type,
        "metavar": metavar,
        "choices": choices,
        "flag": flag,
        "dest": dest,
        "invert": invert,
        "group": group,
        "exclusive": exclusive,
        "show_default": show_default,
    }
    return dataclasses.field(default=default, metadata=meta)


def cli_dest(field: dataclasses.Field) -> str:
    """The key of ``field`` in the parsed options."""
    return field.metadata.get("dest") or field.name


def cli_flag(field: dataclasses.Field) -> str:
    """The command-line option of ``field``, e.g. ``--batch-size``."""
    return field.metadata.get("flag") or "--" + field.name.replace("_", "-")


def cli_default(field: dataclasses.Field):
    """The default of ``field`` as the command line holds it (``invert``: negated)."""
    value = field.default
    return (not value) if field.metadata.get("invert") else value


def _shown(value) -> str:
    if isinstance(value, tuple):
        return ",".join(str(v) for v in value)
    return str(value)


def add_dataclass_arguments(
    parser: argparse.ArgumentParser, cls, groups: dict | None = None
) -> dict[str, argparse.Action]:
    """Add one option per field of the dataclass ``cls`` to ``parser`` (in the argument groups
    ``groups`` names, made on the parser when missing). The options' own defaults are None, so
    a caller can tell an option given from one left out (``--resume`` keeps what was not
    given); the defaults are the fields' and are shown in the help. Returns the actions by
    field name."""
    groups = {} if groups is None else groups
    exclusive: dict[str, Any] = {}
    actions = {}
    for f in dataclasses.fields(cls):
        meta = f.metadata
        if "help" not in meta:
            raise TypeError(f"{cls.__name__}.{f.name} has no help: declare it with option()")
        name = meta["group"]
        if name not in groups:
            groups[name] = parser.add_argument_group(name) if name else parser
        target = groups[name]
        if meta["exclusive"]:
            key = (name, meta["exclusive"])
            if key not in exclusive:
                exclusive[key] = target.add_mutually_exclusive_group()
            target = exclusive[key]
        default = cli_default(f)
        help_text = meta["help"]
        if meta["show_default"] and default is not None:
            help_text += f" (default: {_shown(default)})"
        kwargs: dict[str, Any] = {"dest": cli_dest(f), "help": help_text, "default": None}
        is_bool = isinstance(f.default, bool) or (
            f.default is None and f.type in ("bool | None", bool)
        )
        if is_bool:
            if meta["invert"] or f.default is False:
                kwargs["action"] = "store_true"
            else:
                kwargs["action"] = argparse.BooleanOptionalAction
        else:
            for key in ("type", "metavar", "choices"):
                if meta[key] is not None:
                    kwargs[key] = meta[key]
        actions[f.name] = target.add_argument(cli_flag(f), **kwargs)
    return actions


def values_from_options(cls, options: dict, **overrides):
    """An instance of the dataclass ``cls`` from parsed options (keys: :func:`cli_dest`),
    a None option taking the field's default."""
    kwargs = {}
    for f in dataclasses.fields(cls):
        value = options.get(cli_dest(f))
        if value is None:
            continue
        kwargs[f.name] = (not value) if f.metadata.get("invert") else value
    return cls(**{**kwargs, **overrides})
