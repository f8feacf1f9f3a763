"""Least-squares polish and its batched finite-difference Jacobian."""

from __future__ import annotations

import numpy as np
import pytest

from bemore.errors import OptimisationError
from bemore.optimize.polish import finite_difference_jacobian, polish

MATRIX = np.array([[1.0, 2.0], [-3.0, 0.5], [0.0, 4.0]])


def linear(X: np.ndarray) -> np.ndarray:
    return X @ MATRIX.T + np.array([1.0, 0.0, -1.0])


@pytest.mark.parametrize("scheme", ["central", "forward"])
def test_jacobian_of_a_linear_map_is_its_matrix_even_at_the_bounds(scheme: str) -> None:
    calls = []

    def counted(X: np.ndarray) -> np.ndarray:
        calls.append(X.shape[0])
        return linear(X)

    expected_points = 5 if scheme == "central" else 3
    for x in ([0.5, 0.5], [1.0, 0.0], [0.0, 1.0]):
        J, r, n_points = finite_difference_jacobian(
            counted, np.array(x), np.zeros(2), np.ones(2), 1e-3, scheme
        )
        assert np.allclose(J, MATRIX, atol=1e-9)
        assert n_points == expected_points
        assert np.allclose(r, linear(np.array([x]))[0])
    # One batch call per Jacobian: 2·d + 1 (central) or d + 1 (forward) points.
    assert calls == [expected_points] * 3


def test_unknown_scheme_is_refused() -> None:
    with pytest.raises(OptimisationError, match="scheme 'backward'"):
        finite_difference_jacobian(linear, np.zeros(2), np.zeros(2), np.ones(2), scheme="backward")


def test_polish_recovers_an_exponential_decay_from_a_far_start() -> None:
    # Data 1.5·exp(−0.8 t); unknowns scaled to [0, 1]: amplitude = 3·x0, rate = 2·x1.
    t = np.linspace(0.0, 1.0, 50)

    def residuals(X: np.ndarray) -> np.ndarray:
        return 3.0 * X[:, :1] * np.exp(-2.0 * X[:, 1:] * t) - 1.5 * np.exp(-0.8 * t)

    fit = polish(residuals, np.array([0.9, 0.9]), np.zeros(2), np.ones(2))
    assert np.allclose(fit.result.x, [0.5, 0.4], atol=1e-7)
    assert fit.result.fun < 1e-12 and fit.result.success
    assert fit.jacobian.shape == (50, 2) and fit.residuals.shape == (50,)


def test_polish_stays_in_the_box() -> None:
    # The unconstrained minimum (x = 2) is outside: the polish stops on the bound x = 1.
    fit = polish(lambda X: X - 2.0, np.array([0.2]), np.zeros(1), np.ones(1))
    assert fit.result.x[0] == pytest.approx(1.0)
    assert fit.result.fun == pytest.approx(1.0)
