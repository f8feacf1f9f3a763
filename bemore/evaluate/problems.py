"""Problems whose population evaluation goes through an evaluator.

:class:`EvaluatedProblem` wraps any :class:`~bemore.optimize.problem.Problem` (e.g. the
identification problem): its costs, and its residuals when it has them, are computed by the
evaluator's chunks on a copy of the wrapped problem that is sent to the workers once. Everything
else (the parameter space, the measured data, ``simulated_points`` for the final outputs) is the
wrapped problem's own, so :func:`bemore.identify.identify` runs on the wrapper unchanged.

:class:`EvaluatedGestureProblem` does the same for the synthesis's gesture problem, whose
``evaluate`` returns the objective (B,) and the constraint values (B, m).
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

from bemore.evaluate.base import Evaluator
from bemore.optimize.constrained import ConstrainedProblem
from bemore.optimize.problem import Problem


def problem_cost_chunk(problem: Problem, X: np.ndarray) -> np.ndarray:
    """Raw costs (n,) of one chunk (n, d): the wrapped problem's own ``_evaluate``."""
    return problem._evaluate(X)


def problem_residual_chunk(problem: Any, X: np.ndarray, samples_per_step: int = 1
                           ) -> np.ndarray:
    """Residual vectors (n, m) of one chunk: the wrapped problem's own ``residuals`` (with one
    integrator step per ``samples_per_step`` samples when not 1: the search's cost, the
    polish's first stage)."""
    if samples_per_step == 1:
        return problem.residuals(X)
    return problem.residuals(X, samples_per_step=samples_per_step)


def gesture_chunk(problem: Any, X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Objective (n,) and constraint values (n, m) of one chunk of designs (n, d)."""
    return problem.evaluate(X)


class EvaluatedProblem(Problem):
    """``inner`` with its batch evaluation (and residuals) handed to ``evaluator``.

    Bounds, names and penalty are the inner problem's; non-finite costs still become the penalty
    here (in :meth:`Problem.evaluate`), so the optimiser sees what it saw in-process.
    """

    def __init__(self, inner: Problem, evaluator: Evaluator) -> None:
        self.inner = inner
        super().__init__(inner.lower, inner.upper, inner.names, inner.penalty)
        self.evaluator = evaluator

    def __getattr__(self, name: str) -> Any:
        # Only reached for attributes the wrapper lacks: model, space, measured, ...
        if name == "inner":
            raise AttributeError(name)
        return getattr(self.inner, name)

    def _evaluate(self, X: np.ndarray) -> np.ndarray:
        return self.evaluator.map_cost(problem_cost_chunk, X, shared=self.inner)

    def residuals(self, X: np.ndarray, samples_per_step: int = 1) -> np.ndarray:
        """The inner problem's residuals (N, m), computed by the evaluator (one integrator step
        per ``samples_per_step`` samples; 1: exact)."""
        if not hasattr(self.inner, "residuals"):
            raise AttributeError(f"{type(self.inner).__name__} has no residuals")
        chunk = functools.partial(problem_residual_chunk, samples_per_step=samples_per_step)
        return self.evaluator.map_rows(chunk, np.atleast_2d(X), shared=self.inner)


class EvaluatedGestureProblem(ConstrainedProblem):
    """The synthesis gesture problem with its batch evaluation handed to ``evaluator``.

    Box, constraints and their scales are the inner problem's; chunks of designs spread over the
    workers; every other attribute is the inner problem's.
    """

    def __init__(self, inner: ConstrainedProblem, evaluator: Evaluator) -> None:
        self.inner = inner
        super().__init__(
            inner.lower, inner.upper, inner.names,
            constraint_lower=inner.constraint_lower, constraint_upper=inner.constraint_upper,
            constraint_names=inner.constraint_names, constraint_units=inner.constraint_units,
            constraint_scale=inner.constraint_scale,
        )
        self.evaluator = evaluator

    def __getattr__(self, name: str) -> Any:
        if name == "inner":
            raise AttributeError(name)
        return getattr(self.inner, name)

    def _evaluate(self, X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Objective (B,) and constraint values (B, m) of the designs X (B, n)."""
        if self.evaluator.name == "in-process":
            return self.inner.evaluate(X)
        f, c = self.evaluator.map_rows(gesture_chunk, X, shared=self.inner)
        # The workers counted on their copies: keep the count here.
        self.inner.simulations += X.shape[0]
        return f, c
