"""A bounded least-squares test problem both solvers' tests use: Rosenbrock's curved valley."""

from __future__ import annotations

import numpy as np


def rosenbrock_like(x: np.ndarray) -> np.ndarray:
    """A curved valley (Rosenbrock's residuals) plus one linear residual per extra unknown;
    its minimum is (1, 1, 0.3, 0.6, …)."""
    return np.r_[10.0 * (x[1] - x[0] ** 2), 1.0 - x[0], x[2:] - 0.3 * np.arange(1, x.size - 1)]


def rosenbrock_like_jacobian(x: np.ndarray) -> np.ndarray:
    """The Jacobian (n, n) of :func:`rosenbrock_like` at ``x``."""
    J = np.zeros((x.size, x.size))
    J[0, 0], J[0, 1], J[1, 0] = -20.0 * x[0], 10.0, -1.0
    J[2:, 2:] = np.eye(x.size - 2)
    return J
