"""The athlete's body as model parameters: a segment table scaled to her.

The real-gymnast model (``configs/models/real_gymnast.toml``) reads every segment's mass,
length, centre of mass and inertia from parameters; this module computes them from a segment
table (``configs/gymnast.toml``: the seed gymnast, de Leva / Davidson) scaled to one athlete,
OpenSim's "scale, then fit":

* **masses**: each segment keeps the table's fraction of the body mass (the athlete's
  ``body_mass_kg``, or the table's own total when not given; the segments' masses carry it,
  there is no body-mass parameter) and the trunk-mass parameter of the identification moves
  mass between trunk and thighs only;
* **lengths**: the athlete's own (measured on her trial's joint centres, or given in her
  profile), the table's where neither says. The trunk's shoulder-to-hip length is not seen (the
  shoulder joint is hidden in the shoulder springs): the trial shows the neck-to-hip distance,
  and the identified neck convention splits it. The trunk's radius of gyration scales with her
  profile's trunk length (``trunk``) if given, else with the median length scale of her
  measured head, thigh, shank, foot and hand (OpenSim scales a segment without markers of its
  own by its neighbours' factors);
* **centres of mass**: at the table's fraction of the segment's length;
* **inertias** (the declared rule): each segment keeps the table's radius of gyration as a
  fraction of its length, so ``I = m·(ρ·L/L_table)²``; the model reads ``<segment>.gyration_sq``
  (m², about the centre of mass) and multiplies it by the segment's mass, so that an identified
  trunk mass carries its inertia with it.

Names of the parameters: ``<segment>.mass`` of the segments whose mass is not
identified and ``trunk_thighs.mass`` (the thighs get it minus ``trunk.mass``);
``<segment>.length``; ``<segment>.com`` (from the bar-side joint) of the segments whose centre of
mass is not identified; ``<segment>.gyration_sq`` (the trunk's and thighs' too);
``trunk.neck_to_hip`` for the trunk's seen length (neck joint centre to hip), the trunk's
``length`` in a table being shoulder to hip. A description names its table with the top-level
key ``segment_table`` and uses these parameters without declaring them (docs/model.md).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

import numpy as np


class SegmentRow(Protocol):
    """One row of a segment table (``bemore.settings.Segment`` is one)."""

    mass_kg: float  # one side's, for a pair
    inertia_kgm2: float  # about the CoM, for the whole pair if count = 2
    length_m: float
    com_from_proximal_m: float
    count: int


LENGTH_SEGMENTS = ("hand", "forearm", "upper_arm", "head", "thigh", "shank", "foot")
# Segments whose measured lengths give the body's overall length scale (not the arms: their
# seen lengths are projections onto the plane).
BODY_SCALE_SEGMENTS = ("head", "thigh", "shank", "foot", "hand")
# Segments whose mass and CoM come from the table (the trunk's mass and CoM and the thighs' CoM
# are identified; the thighs' mass is the rest of the trunk+thighs budget).
TABLE_SEGMENTS = ("hand", "forearm", "upper_arm", "head", "shank", "foot")
GYRATION_SEGMENTS = ("hand", "forearm", "upper_arm", "trunk", "head", "thigh", "shank", "foot")


def table_mass_kg(segments: Mapping[str, SegmentRow]) -> float:
    """Total body mass (kg) of a segment table, pairs counted twice.

    >>> from types import SimpleNamespace as Row
    >>> table_mass_kg({"trunk": Row(mass_kg=20.0, count=1), "thigh": Row(mass_kg=5.0, count=2)})
    30.0
    """
    return float(sum(row.mass_kg * row.count for row in segments.values()))


def mass_fractions(segments: Mapping[str, SegmentRow]) -> dict[str, float]:
    """Each segment's share of the body mass (pairs: both sides), summing to 1."""
    total = table_mass_kg(segments)
    return {name: row.mass_kg * row.count / total for name, row in segments.items()}


def body_parameters(segments: Mapping[str, SegmentRow], body_mass_kg: float | None = None,
                    lengths_m: Mapping[str, float] | None = None) -> dict[str, float]:
    """Model parameter values (SI) of the body of one athlete; see the module docstring.

    ``segments``: the segment table; ``body_mass_kg``: hers (None: the table's total);
    ``lengths_m``: her segment lengths by segment name (m; ``trunk.neck_to_hip`` too), the
    table's for those not given.

    A body 7 % longer keeps each radius of gyration's share of its segment's length:

    >>> from types import SimpleNamespace as Row
    >>> table = {"shank": Row(mass_kg=1.0, inertia_kgm2=0.02, length_m=0.4,
    ...                       com_from_proximal_m=0.16, count=2)}
    >>> values = body_parameters(table, 2.4, {"shank": 0.428})
    >>> values["shank.mass"], values["shank.length"]
    (2.4, 0.428)
    >>> round(values["shank.gyration_sq"] / (0.02 / 2.0), 4)    # (0.428 / 0.4)²
    1.1449
    """
    lengths = dict(lengths_m or {})
    mass = float(body_mass_kg or table_mass_kg(segments))
    values: dict[str, float] = {}
    fractions = mass_fractions(segments)
    for name in LENGTH_SEGMENTS:
        if name in segments:
            values[f"{name}.length"] = float(lengths.get(name, segments[name].length_m))
    for name in TABLE_SEGMENTS:
        if name in segments:
            row = segments[name]
            values[f"{name}.mass"] = fractions[name] * mass
            values[f"{name}.com"] = row.com_from_proximal_m / row.length_m * values[
                f"{name}.length"]
    if "trunk" in segments and "thigh" in segments:
        values["trunk_thighs.mass"] = (fractions["trunk"] + fractions["thigh"]) * mass
    if "trunk" in segments:
        values["trunk.neck_to_hip"] = float(lengths.get("trunk.neck_to_hip",
                                                        segments["trunk"].length_m))
    measured = [lengths[name] / segments[name].length_m for name in BODY_SCALE_SEGMENTS
                if name in lengths and name in segments]
    body_scale = float(np.median(measured)) if measured else 1.0
    for name in GYRATION_SEGMENTS:
        if name not in segments:
            continue
        row = segments[name]
        default = row.length_m * (body_scale if name == "trunk" else 1.0)
        scale = lengths.get(name, default) / row.length_m
        values[f"{name}.gyration_sq"] = row.inertia_kgm2 / (row.mass_kg * row.count) * scale**2
    return values
