"""The identified parameters the synthesis starts from: an ``athlete.json`` or the seed's values.

``athlete.json`` (written by ``bemore identify``) holds ``parameters``: a mapping name →
``{value, unit, lower, upper}`` with the twelve names of ``configs/identification.toml``.
Without one, the seed's identified values (``seed_value``) are used. Values are SI.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

from bemore.errors import DataError
from bemore.settings import Identification


@dataclass(frozen=True)
class AthleteParameters:
    """The twelve identified parameters (name → SI value) and where they come from."""

    values: dict[str, float]
    source: str  # the athlete.json path, or "default"


def default_parameters(identification: Identification) -> AthleteParameters:
    """The seed study's identified values (Table 7), from ``configs/identification.toml``."""
    values = {item.name: float(item.seed_value) for item in identification.parameters}
    return AthleteParameters(values=values, source="default")


def load_athlete(path: str | Path, identification: Identification) -> AthleteParameters:
    """Read the identified parameters of ``athlete.json``; any problem is one DataError line.

    Every parameter named in ``identification`` must be present with a finite numeric
    ``value``; its ``unit``, if given, must match the configured one.
    """
    path = Path(path)
    if not path.is_file():
        raise DataError(f"{path}: athlete file not found")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise DataError(f"{path}: not valid JSON ({error})") from None
    parameters = data.get("parameters") if isinstance(data, dict) else None
    if not isinstance(parameters, dict):
        raise DataError(f"{path}: missing 'parameters' mapping (name → {{value, unit, ...}})")
    values = {}
    for item in identification.parameters:
        entry = parameters.get(item.name)
        if entry is None:
            raise DataError(f"{path}: parameters.{item.name}: missing")
        value = entry.get("value") if isinstance(entry, dict) else None
        if (
            isinstance(value, bool)
            or not isinstance(value, (int, float))
            or not math.isfinite(value)
        ):
            raise DataError(f"{path}: parameters.{item.name}.value = {value!r}: must be a number")
        unit = entry.get("unit", item.unit)
        if unit != item.unit:
            raise DataError(
                f"{path}: parameters.{item.name}.unit = {unit!r}: expected {item.unit!r}"
            )
        values[item.name] = float(value)
    return AthleteParameters(values=values, source=str(path))
