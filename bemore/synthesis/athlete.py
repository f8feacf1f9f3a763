"""The identified parameters the synthesis starts from: an ``athlete.json`` or the seed's values.

``athlete.json`` (written by ``bemore identify``) holds ``parameters``: a mapping name →
``{value, unit, lower, upper}`` with the twelve names of ``configs/identification.toml``.
Without one, the seed's identified values (``seed_value``) are used. Values are SI.

An athlete whose identification was interrupted, whose fit is poor (``fit_verdict``: the
model did not follow her trial, :mod:`bemore.identify.verdict`), or whose shoulder springs her
trial could not determine (``unobservable_parameters``), is refused unless the caller accepts
it explicitly (``accept_poor_fit``); what was accepted is recorded with the gesture.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

from bemore.errors import DataError, PoorFitError
from bemore.filekinds import ATHLETE, kind_of, misplaced, refusal
from bemore.settings import Identification


@dataclass(frozen=True)
class AthleteParameters:
    """The twelve identified parameters (name → SI value) and where they come from."""

    values: dict[str, float]
    source: str  # the athlete.json path, or "default"
    fit: dict | None = None  # status, message, accepted (None for the seed's values)
    model: str = "real_gymnast"  # the description the values belong to (name or path)


def default_parameters(identification: Identification) -> AthleteParameters:
    """The seed study's identified values (Table 7), from ``configs/identification.toml``."""
    values = {item.name: float(item.seed_value) for item in identification.parameters}
    return AthleteParameters(values=values, source="default")


def load_athlete(path: str | Path, identification: Identification,
                 accept_poor_fit: bool = False) -> AthleteParameters:
    """Read the identified parameters of ``athlete.json``; any problem is one DataError line.

    Every parameter named in ``identification`` must be present with a finite numeric
    ``value``; its ``unit``, if given, must match the configured one. An interrupted or poorly
    fitted athlete raises :class:`~bemore.errors.PoorFitError` unless ``accept_poor_fit``.
    """
    path = Path(path)
    if not path.is_file():
        raise DataError(misplaced(path, ATHLETE) or f"{path}: athlete file not found")
    try:
        text = path.read_text(encoding="utf-8-sig")  # past a byte order mark (a re-saved file)
        data = json.loads(text)
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        # perhaps another command's JSON Lines or CSV output, or a C3D trial
        raise DataError(misplaced(path, ATHLETE) or f"{path}: not valid JSON ({error})") from None
    kind = kind_of(data)
    if kind not in (None, ATHLETE):
        raise DataError(refusal(path, kind, ATHLETE.wanted()))
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
    body = data.get("body") or {}
    if not isinstance(body, dict) or not all(
            isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
            for v in body.values()):
        raise DataError(f"{path}: body: expected a mapping of parameter name → number (SI)")
    values.update({name: float(value) for name, value in body.items()})
    config = data.get("config") if isinstance(data.get("config"), dict) else {}
    return AthleteParameters(values=values, source=str(path),
                             fit=fit_record(data, path, accept_poor_fit),
                             model=str(config.get("model") or "real_gymnast"))


def fit_record(data: dict, path: str | Path, accept_poor_fit: bool) -> dict:
    """What the athlete file says of its fit (status, message, accepted); raises
    :class:`~bemore.errors.PoorFitError` for an interrupted or poor fit, or one with
    unobservable parameters, unless accepted."""
    verdict = data.get("fit_verdict") if isinstance(data.get("fit_verdict"), dict) else {}
    status = "interrupted" if data.get("interrupted") else verdict.get("status", "unjudged")
    message = ("the identification was interrupted: its parameters are the best found so far"
               if status == "interrupted" else verdict.get("message", "no fit verdict recorded"))
    unobservable = data.get("unobservable_parameters") or []
    if status not in ("poor", "interrupted") and unobservable:
        message = (f"{', '.join(unobservable)} unobservable in this trial (not fitted, held at "
                   "their seed values: the acromions ride on the trunk's side and no marker "
                   "fixed on the arm was recorded)")
    refused = status in ("poor", "interrupted") or bool(unobservable)
    if refused and not accept_poor_fit:
        raise PoorFitError(f"{path}: {message}; refusing this athlete (--accept-poor-fit "
                           "synthesizes with it all the same, and says so in gesture.json)")
    return {"status": status, "message": message, "unobservable": list(unobservable),
            "accepted_by_flag": refused}
