"""A box-bounded minimisation problem evaluated for a whole population in one call.

Like pymoo's ``Problem``: the algorithms only ask for points and are told their costs, and the
problem evaluates all of them at once (one engine call for a whole wolf pack). Subclasses
implement :meth:`Problem._evaluate`; :meth:`Problem.evaluate` checks shapes and turns non-finite
costs into the finite :attr:`Problem.penalty` so that no algorithm ever sees NaN or inf.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence

import numpy as np

from bemore.errors import OptimisationError
from bemore.optimize.constrained import check_box


class Problem(ABC):
    """Minimise ``f(x)`` over the box ``lower ≤ x ≤ upper`` (vectors of length ``dim``).

    ``names`` label the coordinates in messages; ``penalty`` is the finite cost given to points
    whose cost is not finite (e.g. a parameter set the engine cannot simulate).
    """

    def __init__(
        self,
        lower: Sequence[float] | np.ndarray,
        upper: Sequence[float] | np.ndarray,
        names: Sequence[str] | None = None,
        penalty: float = 1e10,
    ) -> None:
        self.lower, self.upper, self.names = check_box(lower, upper, names)
        if not np.isfinite(penalty):
            raise OptimisationError(f"penalty must be finite, got {penalty}")
        self.penalty = float(penalty)
        self.n_evaluations = 0

    @property
    def dim(self) -> int:
        """Number of coordinates."""
        return int(self.lower.size)

    def evaluate(self, X: np.ndarray) -> np.ndarray:
        """Costs of the points ``X`` (shape (N, dim)) as an array (N,), all finite."""
        X = np.atleast_2d(np.asarray(X, dtype=float))
        if X.ndim != 2 or X.shape[1] != self.dim:
            raise OptimisationError(
                f"evaluate: expected points of shape (N, {self.dim}), got {X.shape}"
            )
        costs = np.asarray(self._evaluate(X), dtype=float).reshape(-1)
        if costs.shape != (X.shape[0],):
            raise OptimisationError(
                f"evaluate: the cost function gave {costs.shape[0]} values for {X.shape[0]} points"
            )
        self.n_evaluations += X.shape[0]
        return np.where(np.isfinite(costs), costs, self.penalty)

    @abstractmethod
    def _evaluate(self, X: np.ndarray) -> np.ndarray:
        """Costs of ``X`` (N, dim) → (N,); what each kind of problem defines."""


class FunctionProblem(Problem):
    """A problem made from a vectorised function ``f(X (N, dim)) -> (N,)``."""

    def __init__(
        self,
        function: Callable[[np.ndarray], np.ndarray],
        lower: Sequence[float] | np.ndarray,
        upper: Sequence[float] | np.ndarray,
        names: Sequence[str] | None = None,
        penalty: float = 1e10,
    ) -> None:
        super().__init__(lower, upper, names, penalty)
        self.function = function

    def _evaluate(self, X: np.ndarray) -> np.ndarray:
        return self.function(X)
