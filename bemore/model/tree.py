"""Compiled tree: the flat arrays the dynamics kernels read.

One *frame* per elementary joint (bodies hang from the last frame of their joint chain), in
topological order (a frame's parent has a smaller index). Every numeric field of the description
is one column of a per-member *field vector* ``V = offset + P @ A`` (P: parameter matrix), so a
batch of parameter vectors becomes a (B, n_fields) array in one product.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from bemore.model.description import Description, Expr

FIXED, REVOLUTE, PRISMATIC = 0, 1, 2
_KIND = {"fixed": FIXED, "revolute": REVOLUTE, "prismatic": PRISMATIC}


@dataclass(frozen=True)
class Tree:
    """Flat arrays of a description (all int64 / float64 numpy arrays)."""

    frame_parent: np.ndarray  # (nF,) parent frame index, -1 = world
    frame_kind: np.ndarray  # (nF,) FIXED / REVOLUTE / PRISMATIC
    frame_axis: np.ndarray  # (nF,) revolute: ±1 (about ±z); prismatic: 0 = x, 1 = y
    frame_free: np.ndarray  # (nF,) index in the free coordinates, or -1
    frame_driven: np.ndarray  # (nF,) index in the driven coordinates, or -1
    frame_at: np.ndarray  # (nF, 2) field indices of the placement offset
    frame_angle: np.ndarray  # (nF,) fixed placement rotation (rad)
    body_frame: np.ndarray  # (nb,)
    body_fields: np.ndarray  # (nb, 4) field indices: mass, com_x, com_y, inertia
    spring_fields: np.ndarray  # (n_free, 3) field indices: stiffness, damping, rest (-1: none)
    point_frame: np.ndarray  # (np,)
    point_fields: np.ndarray  # (np, 2)
    gravity_field: int
    field_offset: np.ndarray  # (n_fields,)
    field_matrix: np.ndarray  # (n_parameters, n_fields)
    field_names: tuple[str, ...]
    n_free: int
    n_driven: int
    # (K, 3) int field, parameter a, parameter b and (K,) coefficients: V[f] += c·P[a]·P[b]
    field_products: np.ndarray = field(default_factory=lambda: np.zeros((0, 3), np.int64))
    product_coefficients: np.ndarray = field(default_factory=lambda: np.zeros(0))

    def fields(self, P: np.ndarray) -> np.ndarray:
        """Per-member field vectors (B, n_fields) from a parameter matrix P (B, n_parameters)."""
        P = np.asarray(P, dtype=np.float64)
        V = P @ self.field_matrix + self.field_offset
        # V[f] += c·P[a]·P[b] for every product, in their order (``np.add.at`` adds repeated
        # fields one after the other): the numbers of a loop over the products, in three numpy
        # calls instead of four per product (0.14 → 0.02 ms for a few members; the polish's
        # engine calls and spring equilibria take ≈ 1 000 of them per identification).
        fields, a, b = self.field_products.T
        np.add.at(V, (..., fields), self.product_coefficients * P[..., a] * P[..., b])
        return V

    def is_constant_field(self, index: int) -> bool:
        """True if field ``index`` depends on no parameter (its value is ``field_offset``)."""
        return not (np.any(self.field_matrix[:, index])
                    or np.any(self.field_products[:, 0] == index))

    def kernel_arrays(self) -> tuple:
        """The arrays in the order the numba kernels take them."""
        return (
            self.frame_parent, self.frame_kind, self.frame_axis, self.frame_free,
            self.frame_driven, self.frame_at, self.frame_angle, self.body_frame,
            self.body_fields, self.spring_fields, self.point_frame, self.point_fields,
            self.gravity_field,
        )


def compile_tree(description: Description, parameter_names: tuple[str, ...]) -> Tree:
    """Flatten ``description`` into a :class:`Tree` (parameter columns in ``parameter_names``)."""
    exprs: list[Expr] = []
    names: list[str] = []

    def add(expr: Expr, name: str) -> int:
        exprs.append(expr)
        names.append(name)
        return len(exprs) - 1

    free = {c: i for i, c in enumerate(description.free_coordinates)}
    driven = {c: i for i, c in enumerate(description.driven_coordinates)}
    parent, kind, axis, f_free, f_driven, at, angle = [], [], [], [], [], [], []
    last_frame = {"world": -1}
    body_frame, body_fields = [], []
    for body in description.bodies:
        previous = last_frame[body.parent]
        for i, element in enumerate(body.joint):
            parent.append(previous)
            kind.append(_KIND[element.type])
            axis.append(element.axis)
            f_free.append(free.get(element.coordinate, -1) if element.coordinate else -1)
            f_driven.append(driven.get(element.coordinate, -1) if element.coordinate else -1)
            at.append([add(element.at_x, f"{body.name}.joint[{i}].at_x"),
                       add(element.at_y, f"{body.name}.joint[{i}].at_y")])
            angle.append(element.angle)
            previous = len(parent) - 1
        last_frame[body.name] = previous
        body_frame.append(previous)
        body_fields.append([add(body.mass, f"{body.name}.mass"),
                            add(body.com_x, f"{body.name}.com_x"),
                            add(body.com_y, f"{body.name}.com_y"),
                            add(body.inertia, f"{body.name}.inertia")])
    spring_fields = -np.ones((len(free), 3), dtype=np.int64)
    for spring in description.springs:
        spring_fields[free[spring.coordinate]] = [
            add(spring.stiffness, f"{spring.coordinate}.stiffness"),
            add(spring.damping, f"{spring.coordinate}.damping"),
            add(spring.rest, f"{spring.coordinate}.rest"),
        ]
    point_frame, point_fields = [], []
    for point in description.points:
        point_frame.append(last_frame[point.body])
        point_fields.append([add(point.x, f"{point.name}.x"), add(point.y, f"{point.name}.y")])
    gravity = add(description.gravity, "gravity")
    column = {name: j for j, name in enumerate(parameter_names)}
    matrix = np.zeros((len(parameter_names), len(exprs)))
    offset = np.zeros(len(exprs))
    products, coefficients = [], []
    for j, expr in enumerate(exprs):
        offset[j] = expr.offset
        for name, coefficient in expr.terms:
            matrix[column[name], j] += coefficient
        for a, b, coefficient in expr.products:
            products.append([j, column[a], column[b]])
            coefficients.append(coefficient)
    as_int = lambda values: np.asarray(values, dtype=np.int64)  # noqa: E731
    return Tree(
        frame_parent=as_int(parent), frame_kind=as_int(kind), frame_axis=as_int(axis),
        frame_free=as_int(f_free), frame_driven=as_int(f_driven),
        frame_at=as_int(at).reshape(-1, 2), frame_angle=np.asarray(angle, dtype=np.float64),
        body_frame=as_int(body_frame), body_fields=as_int(body_fields).reshape(-1, 4),
        spring_fields=spring_fields, point_frame=as_int(point_frame),
        point_fields=as_int(point_fields).reshape(-1, 2), gravity_field=gravity,
        field_offset=offset, field_matrix=matrix, field_names=tuple(names),
        n_free=len(free), n_driven=len(driven),
        field_products=as_int(products).reshape(-1, 3),
        product_coefficients=np.asarray(coefficients, dtype=np.float64),
    )
