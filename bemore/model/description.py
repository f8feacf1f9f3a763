"""Model description files: a planar tree of rigid bodies read from TOML and validated.

A description lists parameters (named numbers with units), bodies (each hung from its parent by a
chain of elementary joints: revolute, prismatic or fixed), spring-dampers on free coordinates,
gravity and named points. Every numeric field is a :class:`Expr`: a constant, a parameter, a
linear combination of parameters, and products of two parameters (an inertia = a mass × a squared
radius of gyration), so that a population of parameter vectors can set it per member.
The file format is documented in ``docs/model.md``; every error names the file, the body and the
key, and is raised as :class:`~bemore.errors.ModelError`.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bemore.config import read_toml
from bemore.errors import ConfigError, ModelError

# Units accepted per dimension, with their factor to SI.
UNITS: dict[str, dict[str, float]] = {
    "length": {"m": 1.0, "cm": 0.01, "mm": 0.001},
    "mass": {"kg": 1.0, "g": 0.001},
    "inertia": {"kg*m^2": 1.0, "kg·m²": 1.0, "kg m^2": 1.0, "kg.m^2": 1.0},
    "angle": {"rad": 1.0, "deg": math.pi / 180.0},
    "acceleration": {"m/s^2": 1.0, "m/s²": 1.0},
    "stiffness": {"N/m": 1.0},
    "damping": {"N*s/m": 1.0, "N·s/m": 1.0, "Ns/m": 1.0},
    "torsional_stiffness": {"N*m/rad": 1.0, "N·m/rad": 1.0},
    "torsional_damping": {"N*m*s/rad": 1.0, "N·m·s/rad": 1.0},
}
_UNIT_OF = {unit: dim for dim, units in UNITS.items() for unit in units}
_NUMBER_WITH_UNIT = re.compile(r"^\s*([-+]?[0-9.]+(?:[eE][-+]?[0-9]+)?)\s+(\S.*?)\s*$")

JOINT_TYPES = ("revolute", "prismatic", "fixed")


@dataclass(frozen=True)
class Expr:
    """A numeric field: ``offset + Σ coefficient × parameter + Σ coefficient × a × b`` (SI).

    >>> Expr(1.0, (("m", 2.0),), (("m", "r2", 0.5),)).evaluate({"m": 3.0, "r2": 0.04})
    7.06
    """

    offset: float = 0.0
    terms: tuple[tuple[str, float], ...] = ()
    products: tuple[tuple[str, str, float], ...] = ()

    def evaluate(self, values: dict[str, float]) -> float:
        """Value for the parameter values ``values`` (name → SI value)."""
        return (self.offset + sum(c * values[name] for name, c in self.terms)
                + sum(c * values[a] * values[b] for a, b, c in self.products))

    @property
    def is_constant(self) -> bool:
        """True if the field depends on no parameter."""
        return not self.terms and not self.products


@dataclass(frozen=True)
class Element:
    """One elementary joint: placement in the previous frame, then one motion (or none)."""

    type: str  # revolute | prismatic | fixed
    coordinate: str | None  # None for a fixed element
    driven: bool
    at_x: Expr
    at_y: Expr
    angle: float  # fixed placement rotation (rad) before the motion
    axis: int  # prismatic: 0 = x, 1 = y of the frame; revolute: +1 (about +z) or -1 (about -z)


@dataclass(frozen=True)
class Body:
    """A rigid body hung from ``parent`` by ``joint`` (a chain of elements)."""

    name: str
    parent: str  # "world" or a body name
    joint: tuple[Element, ...]
    mass: Expr
    inertia: Expr  # about the CoM, kg·m²
    com_x: Expr
    com_y: Expr
    length: float  # for drawing only (m)


@dataclass(frozen=True)
class Spring:
    """Linear spring-damper on a free coordinate: Q = −stiffness·(q − rest) − damping·q̇."""

    coordinate: str
    stiffness: Expr
    damping: Expr
    rest: Expr


@dataclass(frozen=True)
class Point:
    """A named point fixed in a body's frame (m)."""

    name: str
    body: str
    x: Expr
    y: Expr


@dataclass(frozen=True)
class Description:
    """A validated model description (SI units)."""

    name: str
    source: str
    parameters: dict[str, float]  # name -> default (SI)
    parameter_units: dict[str, str]
    bodies: tuple[Body, ...]  # topologically ordered: parents first
    springs: tuple[Spring, ...]
    points: tuple[Point, ...]
    gravity: Expr
    notes: str = ""
    free_coordinates: tuple[str, ...] = field(default=())
    driven_coordinates: tuple[str, ...] = field(default=())


def load_description(path: str | Path) -> Description:
    """Read and validate a model description TOML file; errors raise one ModelError line.

    A description with ``segment_table = "NAME"`` takes the body parameters of
    :func:`bemore.model.body.body_parameters` from ``configs/NAME.toml`` (the segment table is
    their one definition; it may not declare them again). A parameter written ``"seed"`` takes
    the seed study's identified value, ``seed_value`` in ``configs/identification.toml`` (its one
    definition; :func:`with_seed_values`).
    """
    try:
        data = read_toml(path)
    except ConfigError as error:
        raise ModelError(str(error)) from None
    return parse_description(data, source=str(path))


def with_segment_table(data: dict[str, Any], table: str, source: str) -> dict[str, Any]:
    """``data`` with the body parameters of the segment table ``configs/<table>.toml`` added to
    its ``[parameters]`` (SI numbers); a parameter declared in both is an error."""
    from bemore.model.body import body_parameters
    from bemore.paths import default_config
    from bemore.settings import load_gymnast

    values = body_parameters(load_gymnast(default_config(f"{table}.toml")).segments)
    declared = dict(data.get("parameters", {}))
    twice = sorted(set(values) & set(declared))
    if twice:
        raise ModelError(f"{source}: [parameters] {', '.join(twice)}: given by the segment "
                         f"table configs/{table}.toml, not to be declared again")
    return {**data, "parameters": {**declared, **values}}


SEED = "seed"
"""A parameter's default written as this string is the seed study's identified value."""


def with_seed_values(data: dict[str, Any], source: str) -> dict[str, Any]:
    """``data`` with every ``[parameters]`` value written ``"seed"`` replaced by that parameter's
    ``seed_value`` and unit in ``configs/identification.toml`` (SI, e.g. ``"15326.0 N/m"``); a
    name that file does not list is an error."""
    from bemore.paths import default_config
    from bemore.settings import load_identification

    declared = dict(data.get("parameters", {}))
    wanted = [name for name, value in declared.items() if value == SEED]
    if not wanted:
        return data
    path = default_config("identification.toml")
    identification = load_identification(path)
    listed = set(identification.names)
    unknown = [name for name in wanted if name not in listed]
    if unknown:
        raise ModelError(f'{source}: [parameters] "{unknown[0]}" = "{SEED}": not an identified '
                         f"parameter of {path} (listed: {', '.join(identification.names)})")
    for name in wanted:
        item = identification.parameter(name)
        declared[name] = f"{item.seed_value!r} {item.unit}"
    return {**data, "parameters": declared}


def parse_description(data: dict[str, Any], source: str) -> Description:
    """Validate an already-parsed description mapping; ``source`` names it in messages."""
    allowed = {"name", "notes", "gravity", "parameters", "bodies", "springs", "points",
               "segment_table"}
    if data.get("segment_table") is not None:
        try:
            data = with_segment_table(data, str(data["segment_table"]), source)
        except ConfigError as error:
            raise ModelError(str(error)) from None
    try:
        data = with_seed_values(data, source)
    except ConfigError as error:
        raise ModelError(str(error)) from None
    _no_unknown(data, allowed, source, "(top level)")
    params, units = _parse_parameters(data.get("parameters", {}), source)
    ctx = _Context(source, params, units)
    bodies_raw = data.get("bodies")
    if not isinstance(bodies_raw, dict) or not bodies_raw:
        raise ModelError(f"{source}: [bodies]: at least one body is required")
    bodies = [_parse_body(name, raw, ctx) for name, raw in bodies_raw.items()]
    ordered = _topological(bodies, source)
    coords = [(el.coordinate, el) for b in ordered for el in b.joint if el.coordinate]
    names = [c for c, _ in coords]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise ModelError(f"{source}: coordinate {dup[0]} is defined by more than one joint")
    free = tuple(c for c, el in coords if not el.driven)
    driven = tuple(c for c, el in coords if el.driven)
    springs = [_parse_spring(c, raw, ctx, coords) for c, raw in data.get("springs", {}).items()]
    body_names = {b.name for b in bodies}
    points = [_parse_point(n, raw, ctx, body_names) for n, raw in data.get("points", {}).items()]
    gravity = ctx.expr(data.get("gravity", 9.81), "acceleration", "gravity")
    return Description(
        name=str(data.get("name", Path(source).stem)),
        source=source,
        parameters=params,
        parameter_units=units,
        bodies=tuple(ordered),
        springs=tuple(springs),
        points=tuple(points),
        gravity=gravity,
        notes=str(data.get("notes", "")),
        free_coordinates=free,
        driven_coordinates=driven,
    )


# ----------------------------------------------------------------------------- helpers


class _Context:
    """Resolves numeric fields (numbers, '<value> <unit>', parameter names, linear forms)."""

    def __init__(self, source: str, params: dict[str, float], units: dict[str, str]) -> None:
        self.source = source
        self.params = params
        self.units = units

    def expr(self, raw: Any, dimension: str, where: str) -> Expr:
        if isinstance(raw, bool):
            raise ModelError(f"{self.source}: {where}: expected a number, got {raw!r}")
        if isinstance(raw, int | float):
            return Expr(float(raw))
        if isinstance(raw, str):
            if raw in self.params:
                self._check_dimension(raw, dimension, where)
                return Expr(0.0, ((raw, 1.0),))
            return Expr(_with_unit(raw, dimension, f"{self.source}: {where}"))
        if isinstance(raw, dict):
            _no_unknown(raw, {"parameter", "scale", "offset", "linear", "products"}, self.source,
                        where)
            terms: dict[str, float] = {}
            if "parameter" in raw:
                terms[str(raw["parameter"])] = float(raw.get("scale", 1.0))
            for name, coef in raw.get("linear", {}).items():
                terms[name] = terms.get(name, 0.0) + float(coef)
            products = []
            for item in raw.get("products", []):
                if (not isinstance(item, list) or len(item) != 3
                        or not all(isinstance(name, str) for name in item[:2])
                        or isinstance(item[2], bool) or not isinstance(item[2], int | float)):
                    raise ModelError(
                        f"{self.source}: {where}: products: expected [parameter, parameter, "
                        f"coefficient] items, got {item!r}"
                    )
                products.append((item[0], item[1], float(item[2])))
            for name in [*terms, *(n for a, b, _ in products for n in (a, b))]:
                if name not in self.params:
                    raise ModelError(
                        f"{self.source}: {where}: parameter {name!r} is not declared in "
                        "[parameters]"
                    )
            offset = raw.get("offset", 0.0)
            off = (
                _with_unit(offset, dimension, f"{self.source}: {where}.offset")
                if isinstance(offset, str)
                else float(offset)
            )
            return Expr(off, tuple(terms.items()), tuple(products))
        raise ModelError(
            f"{self.source}: {where}: expected a number, a '<value> <unit>' string or a "
            f"declared parameter name, got {raw!r}"
        )

    def _check_dimension(self, name: str, dimension: str, where: str) -> None:
        unit = self.units[name]
        if unit and _UNIT_OF.get(unit) != dimension:
            raise ModelError(
                f"{self.source}: {where}: parameter {name!r} is in {unit}, a {_UNIT_OF.get(unit)}"
                f", but this field needs a {dimension} ({', '.join(UNITS[dimension])})"
            )


def _with_unit(raw: str, dimension: str, where: str) -> float:
    match = _NUMBER_WITH_UNIT.match(raw)
    if not match:
        raise ModelError(
            f"{where} = {raw!r}: not a number with a unit, nor a declared parameter name"
        )
    value, unit = float(match.group(1)), match.group(2)
    if unit not in UNITS[dimension]:
        raise ModelError(
            f"{where} = {raw!r}: bad unit {unit!r} for a {dimension} "
            f"(allowed: {', '.join(UNITS[dimension])})"
        )
    return value * UNITS[dimension][unit]


def _no_unknown(raw: dict[str, Any], allowed: set[str], source: str, where: str) -> None:
    if not isinstance(raw, dict):
        raise ModelError(f"{source}: {where}: expected a table")
    unknown = sorted(set(raw) - allowed)
    if unknown:
        raise ModelError(
            f"{source}: {where}: unknown key {unknown[0]!r} (allowed: {', '.join(sorted(allowed))})"
        )


def _parse_parameters(raw: dict[str, Any], source: str) -> tuple[dict[str, float], dict[str, str]]:
    values: dict[str, float] = {}
    units: dict[str, str] = {}
    for name, value in raw.items():
        where = f'{source}: [parameters] "{name}"'
        if isinstance(value, bool) or not isinstance(value, int | float | str):
            raise ModelError(f"{where}: expected a number or a '<value> <unit>' string")
        if isinstance(value, str):
            match = _NUMBER_WITH_UNIT.match(value)
            if not match or match.group(2) not in _UNIT_OF:
                known = ", ".join(sorted(_UNIT_OF))
                raise ModelError(f"{where} = {value!r}: bad unit (known units: {known})")
            unit = match.group(2)
            values[name] = float(match.group(1)) * UNITS[_UNIT_OF[unit]][unit]
            units[name] = unit
        else:
            values[name] = float(value)
            units[name] = ""
    return values, units


def _parse_body(name: str, raw: Any, ctx: _Context) -> Body:
    where = f"[bodies.{name}]"
    _no_unknown(raw, {"parent", "joint", "mass", "inertia", "com", "length"}, ctx.source, where)
    for key in ("parent", "joint", "mass", "inertia"):
        if key not in raw:
            raise ModelError(f"{ctx.source}: {where} {key}: missing required key")
    joint_raw = raw["joint"]
    if isinstance(joint_raw, dict):
        joint_raw = [joint_raw]
    if not isinstance(joint_raw, list) or not joint_raw:
        raise ModelError(f"{ctx.source}: {where} joint: expected a list of joint elements")
    joint = tuple(_parse_element(el, ctx, f"{where} joint[{i}]") for i, el in enumerate(joint_raw))
    com = raw.get("com", [0.0, 0.0])
    if not isinstance(com, list) or len(com) != 2:
        raise ModelError(f"{ctx.source}: {where} com: expected [x, y] in the body's frame")
    mass = ctx.expr(raw["mass"], "mass", f"{where} mass")
    inertia = ctx.expr(raw["inertia"], "inertia", f"{where} inertia")
    for key, value in (("mass", mass), ("inertia", inertia)):
        default = value.evaluate(ctx.params)
        if not default > 0.0:
            raise ModelError(
                f"{ctx.source}: {where} {key} = {default:g}: must be positive"
                + ("" if value.is_constant else " (with the default parameter values)")
            )
    length = raw.get("length", 0.0)
    length_value = _with_unit(length, "length", f"{ctx.source}: {where} length") if isinstance(
        length, str
    ) else float(length)
    return Body(
        name=name,
        parent=str(raw["parent"]),
        joint=joint,
        mass=mass,
        inertia=inertia,
        com_x=ctx.expr(com[0], "length", f"{where} com[0]"),
        com_y=ctx.expr(com[1], "length", f"{where} com[1]"),
        length=length_value,
    )


def _parse_element(raw: Any, ctx: _Context, where: str) -> Element:
    _no_unknown(raw, {"type", "coordinate", "driven", "at", "angle", "axis"}, ctx.source, where)
    kind = raw.get("type")
    if kind not in JOINT_TYPES:
        raise ModelError(f"{ctx.source}: {where} type = {kind!r}: must be one of {JOINT_TYPES}")
    at = raw.get("at", [0.0, 0.0])
    if not isinstance(at, list) or len(at) != 2:
        raise ModelError(f"{ctx.source}: {where} at: expected [x, y] in the previous frame")
    angle_raw = raw.get("angle", 0.0)
    if isinstance(angle_raw, str):
        angle = _with_unit(angle_raw, "angle", f"{ctx.source}: {where} angle")
    elif isinstance(angle_raw, int | float) and not isinstance(angle_raw, bool):
        angle = float(angle_raw)
    else:
        raise ModelError(f"{ctx.source}: {where} angle: a fixed number (placement angles "
                         "cannot be parameters)")
    coordinate = raw.get("coordinate")
    if kind == "fixed":
        if coordinate is not None:
            raise ModelError(f"{ctx.source}: {where} coordinate: a fixed element has none")
        axis = 0
    else:
        if not isinstance(coordinate, str) or not coordinate:
            raise ModelError(f"{ctx.source}: {where} coordinate: missing required key")
        axis_raw = raw.get("axis", "x" if kind == "prismatic" else "+z")
        allowed = {"x": 0, "y": 1} if kind == "prismatic" else {"+z": 1, "z": 1, "-z": -1}
        if axis_raw not in allowed:
            raise ModelError(
                f"{ctx.source}: {where} axis = {axis_raw!r}: a {kind} axis is one of "
                f"{', '.join(allowed)}"
            )
        axis = allowed[axis_raw]
    return Element(
        type=kind,
        coordinate=coordinate,
        driven=bool(raw.get("driven", False)),
        at_x=ctx.expr(at[0], "length", f"{where} at[0]"),
        at_y=ctx.expr(at[1], "length", f"{where} at[1]"),
        angle=angle,
        axis=axis,
    )


def _topological(bodies: list[Body], source: str) -> list[Body]:
    by_name = {b.name: b for b in bodies}
    for body in bodies:
        if body.parent != "world" and body.parent not in by_name:
            raise ModelError(
                f"{source}: [bodies.{body.name}] parent = {body.parent!r}: unknown parent "
                f"(known: world, {', '.join(by_name)})"
            )
    ordered: list[Body] = []
    placed = {"world"}
    remaining = list(bodies)
    while remaining:
        ready = [b for b in remaining if b.parent in placed]
        if not ready:
            raise ModelError(
                f"{source}: [bodies.{remaining[0].name}] parent: the bodies "
                f"{', '.join(b.name for b in remaining)} form a cycle (none hangs from world)"
            )
        for body in ready:
            ordered.append(body)
            placed.add(body.name)
            remaining.remove(body)
    return ordered


def _parse_spring(coordinate: str, raw: Any, ctx: _Context, coords: list) -> Spring:
    where = f"[springs.{coordinate}]"
    _no_unknown(raw, {"stiffness", "damping", "rest"}, ctx.source, where)
    element = dict(coords).get(coordinate)
    if element is None:
        raise ModelError(f"{ctx.source}: {where}: unknown coordinate {coordinate!r}")
    if element.driven:
        raise ModelError(f"{ctx.source}: {where}: {coordinate} is driven; springs act on free ones")
    rot = element.type == "revolute"
    return Spring(
        coordinate=coordinate,
        stiffness=ctx.expr(raw.get("stiffness", 0.0),
                           "torsional_stiffness" if rot else "stiffness", f"{where} stiffness"),
        damping=ctx.expr(raw.get("damping", 0.0),
                         "torsional_damping" if rot else "damping", f"{where} damping"),
        rest=ctx.expr(raw.get("rest", 0.0), "angle" if rot else "length", f"{where} rest"),
    )


def _parse_point(name: str, raw: Any, ctx: _Context, bodies: set[str]) -> Point:
    where = f"[points.{name}]"
    _no_unknown(raw, {"body", "at"}, ctx.source, where)
    body = raw.get("body")
    if body not in bodies:
        raise ModelError(f"{ctx.source}: {where} body = {body!r}: unknown body")
    at = raw.get("at", [0.0, 0.0])
    if not isinstance(at, list) or len(at) != 2:
        raise ModelError(f"{ctx.source}: {where} at: expected [x, y] in the body's frame")
    return Point(name, body, ctx.expr(at[0], "length", f"{where} at[0]"),
                 ctx.expr(at[1], "length", f"{where} at[1]"))
