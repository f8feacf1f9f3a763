"""The one validated layer through which every TOML configuration is read.

The layer itself (:class:`Section`, :func:`read_toml`, :func:`load_toml_model`,
:func:`validate`) is the bench side's (``controller.config``: the bench installs alone and reads
its own files with it); this module re-exports it through ``controller.cli``, the one door from
the scientific side to the bench, and adds what only the scientific side's commands need.
"""

from __future__ import annotations

from bemore.errors import ConfigError
from controller.cli import Section, load_toml_model, read_toml, validate

__all__ = ["Section", "load_toml_model", "parse_assignments", "read_toml", "validate"]


def parse_assignments(items: tuple[str, ...] | list[str], option: str) -> dict[str, float]:
    """Command-line ``NAME=NUMBER`` items (e.g. ``--set trunk.mass=13.5``) → ``{name: value}``.

    Values are taken as given, in SI units; a malformed item raises one ConfigError line naming
    the option and the item.
    """
    result = {}
    for item in items:
        name, _, value = item.partition("=")
        try:
            result[name.strip()] = float(value)
        except ValueError:
            raise ConfigError(f"{option} {item!r}: expected NAME=NUMBER (SI units)") from None
    return result
