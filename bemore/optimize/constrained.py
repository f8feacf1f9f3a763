"""A constrained minimisation problem evaluated for a whole batch of points in one call.

Minimise ``f(x)`` over the box ``lower ≤ x ≤ upper`` subject to
``constraint_lower ≤ c(x) ≤ constraint_upper`` (m constraints, each in its own unit; a one-sided
constraint has an infinite bound; an equality has equal bounds). Like
:class:`~bemore.optimize.problem.Problem`, a subclass implements ``_evaluate`` for a whole batch
(one engine call for a whole pack of designs) and :meth:`ConstrainedProblem.evaluate` checks the
shapes and counts the evaluations.

Every constraint is declared once, as a range, and converted to a library's sign convention in
exactly one place, :func:`constraint_form` (scipy's SLSQP ``ineq ≥ 0``, pymoo's ``G ≤ 0``);
:func:`violation` measures how far a point is from feasibility in the constraints' own units
(scipy's ``maxcv``).

>>> import numpy as np
>>> sphere = FunctionConstrainedProblem(
...     lambda X: ((X**2).sum(axis=1), X.sum(axis=1, keepdims=True)),
...     lower=[0.0, 0.0], upper=[2.0, 2.0], constraint_lower=[1.0], constraint_upper=[np.inf])
>>> f, c = sphere.evaluate(np.array([[0.5, 0.5], [0.2, 0.3]]))
>>> f.tolist(), c[:, 0].tolist(), sphere.nfev
([0.5, 0.13], [1.0, 0.5], 2)
>>> sphere.violation(c).tolist()
[0.0, 0.5]
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from typing import Literal

import numpy as np

from bemore.errors import OptimisationError

Convention = Literal["scipy", "pymoo"]


def check_box(
    lower: Sequence[float] | np.ndarray,
    upper: Sequence[float] | np.ndarray,
    names: Sequence[str] | None,
) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """Validated box bounds (dim,) and coordinate names; one line naming the first bad bound."""
    low = np.asarray(lower, dtype=float).ravel()
    high = np.asarray(upper, dtype=float).ravel()
    labels = list(names) if names is not None else [f"x{i}" for i in range(low.size)]
    if low.size == 0 or low.shape != high.shape:
        raise OptimisationError(
            f"bounds: lower has {low.size} values and upper {high.size}; "
            "they must have the same non-zero length"
        )
    if len(labels) != low.size:
        raise OptimisationError(f"bounds: {len(labels)} names for {low.size} coordinates")
    for name, a, b in zip(labels, low, high, strict=True):
        if not (np.isfinite(a) and np.isfinite(b) and a < b):
            raise OptimisationError(
                f"bounds of {name}: lower ({a:g}) must be finite and below upper ({b:g})"
            )
    return low, high, labels


class ConstrainedProblem(ABC):
    """Minimise ``f(x)`` in the box subject to ``constraint_lower ≤ c(x) ≤ constraint_upper``.

    ``names`` label the design coordinates, ``constraint_names`` and ``constraint_units`` the
    constraints; ``constraint_scale`` (m,) is what an optimiser divides each constraint by so
    that constraints in different units have comparable sizes (default 1). ``nfev`` counts the
    points evaluated.
    """

    def __init__(
        self,
        lower: Sequence[float] | np.ndarray,
        upper: Sequence[float] | np.ndarray,
        names: Sequence[str] | None = None,
        *,
        constraint_lower: Sequence[float] | np.ndarray,
        constraint_upper: Sequence[float] | np.ndarray,
        constraint_names: Sequence[str] | None = None,
        constraint_units: Sequence[str] | None = None,
        constraint_scale: Sequence[float] | np.ndarray | None = None,
    ) -> None:
        self.lower, self.upper, labels = check_box(lower, upper, names)
        self.names = tuple(labels)
        self.constraint_lower = np.asarray(constraint_lower, dtype=float).ravel()
        self.constraint_upper = np.asarray(constraint_upper, dtype=float).ravel()
        m = self.constraint_lower.size
        if self.constraint_upper.size != m:
            raise OptimisationError(
                f"constraints: {m} lower bounds and {self.constraint_upper.size} upper bounds"
            )
        if np.any(self.constraint_lower > self.constraint_upper) or np.any(
            np.isnan(self.constraint_lower) | np.isnan(self.constraint_upper)
        ):
            raise OptimisationError("constraints: every lower bound must be at most its upper one")
        self.constraint_names = tuple(
            constraint_names if constraint_names is not None else [f"c{i}" for i in range(m)]
        )
        self.constraint_units = tuple(constraint_units if constraint_units is not None
                                      else [""] * m)
        self.constraint_scale = (
            np.ones(m) if constraint_scale is None
            else np.asarray(constraint_scale, dtype=float).ravel()
        )
        if not (len(self.constraint_names) == len(self.constraint_units)
                == self.constraint_scale.size == m):
            raise OptimisationError(
                f"constraints: {m} bounds but {len(self.constraint_names)} names, "
                f"{len(self.constraint_units)} units and {self.constraint_scale.size} scales"
            )
        self.nfev = 0

    @property
    def dim(self) -> int:
        """Number of design coordinates."""
        return int(self.lower.size)

    @property
    def n_constraints(self) -> int:
        """Number of constraints m."""
        return int(self.constraint_lower.size)

    def evaluate(self, X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Objective (B,) and constraint values (B, m) of the points ``X`` (B, dim)."""
        X = np.atleast_2d(np.asarray(X, dtype=float))
        if X.ndim != 2 or X.shape[1] != self.dim:
            raise OptimisationError(
                f"evaluate: expected points of shape (N, {self.dim}), got {X.shape}"
            )
        f, c = self._evaluate(X)
        f = np.asarray(f, dtype=float).reshape(-1)
        c = np.asarray(c, dtype=float).reshape(X.shape[0], -1)
        if f.shape != (X.shape[0],) or c.shape[1] != self.n_constraints:
            raise OptimisationError(
                f"evaluate: {f.size} objective values and {c.shape[1]} constraint columns for "
                f"{X.shape[0]} points and {self.n_constraints} constraints"
            )
        self.nfev += X.shape[0]
        return f, c

    def violation(self, c: np.ndarray) -> np.ndarray:
        """Largest violation (…) of constraint values c (…, m), in their own units."""
        return violation(c, self.constraint_lower, self.constraint_upper)

    @abstractmethod
    def _evaluate(self, X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Objective (B,) and constraints (B, m) of ``X`` (B, dim); what each problem defines."""


class FunctionConstrainedProblem(ConstrainedProblem):
    """A constrained problem made from a vectorised ``function(X (B, dim)) -> (f (B,), c (B, m))``.
    """

    def __init__(
        self,
        function: Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]],
        lower: Sequence[float] | np.ndarray,
        upper: Sequence[float] | np.ndarray,
        names: Sequence[str] | None = None,
        **constraints: object,
    ) -> None:
        super().__init__(lower, upper, names, **constraints)  # type: ignore[arg-type]
        self.function = function

    def _evaluate(self, X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return self.function(X)


def constraint_form(
    values: np.ndarray, lower: np.ndarray, upper: np.ndarray, convention: Convention
) -> np.ndarray:
    """Convert ``lower ≤ values ≤ upper`` (…, m) to a library's inequality convention.

    ``"scipy"``: SLSQP's ``ineq`` — feasible when every returned entry is ≥ 0.
    ``"pymoo"``: pymoo's ``G`` — feasible when every returned entry is ≤ 0.
    Each finite bound contributes one column (lower bounds first, then upper bounds); infinite
    bounds are dropped. The one place where sign conventions are converted.
    """
    has_lower = np.isfinite(lower)
    has_upper = np.isfinite(upper)
    at_least = values[..., has_lower] - lower[has_lower]  # ≥ 0 when the lower bound holds
    at_most = upper[has_upper] - values[..., has_upper]  # ≥ 0 when the upper bound holds
    margins = np.concatenate([at_least, at_most], axis=-1)
    if convention == "scipy":
        return margins
    if convention == "pymoo":
        return -margins
    raise OptimisationError(f"unknown constraint convention {convention!r}")


def violation(values: np.ndarray, lower: np.ndarray, upper: np.ndarray) -> np.ndarray:
    """Largest constraint violation (…) in the constraints' own units; 0 when feasible."""
    margins = constraint_form(values, lower, upper, "scipy")
    return np.maximum(0.0, -margins).max(axis=-1, initial=0.0) + 0.0  # + 0.0: no −0.0
