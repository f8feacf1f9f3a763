"""Levenberg–Marquardt within bounds (bemore.optimize.lm), alone and after trust-region
reflective's first steps: the minima scipy's least_squares and lsq_linear find, with bounds
active, from a start on a bound, and never a point outside the box."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.optimize import least_squares, lsq_linear

from bemore.errors import OptimisationError
from bemore.optimize.lm import (
    NORMAL_CONDITION_LIMIT,
    _step_within,
    damped_step,
    jacobian_factors,
    lm_bounds,
    qr_factors,
    trf_then_lm_bounds,
)
from bemore.optimize.polish import polish
from bemore.optimize.trf import trf_bounds
from tests.optimize.valley import rosenbrock_like, rosenbrock_like_jacobian


class Recorded:
    """A residual function and its Jacobian that keep every point they are asked for."""

    def __init__(self, fun, jac) -> None:
        self.fun, self.jac, self.points = fun, jac, []

    def residuals(self, x: np.ndarray) -> np.ndarray:
        self.points.append(np.array(x, dtype=float))
        return self.fun(x)

    def jacobian(self, x: np.ndarray) -> np.ndarray:
        self.points.append(np.array(x, dtype=float))
        return self.jac(x)

    def inside(self, lower: np.ndarray, upper: np.ndarray) -> bool:
        points = np.array(self.points)
        return bool(np.all(points >= lower) and np.all(points <= upper))


SOLVERS = [lm_bounds, trf_then_lm_bounds]


def _on_bounds(x: np.ndarray, bounds: np.ndarray, solver) -> None:
    """Levenberg–Marquardt's steps reach a bound exactly; trf's (when it converges within its
    first evaluations) stay strictly inside, within its tolerance (as scipy's: 3.4e-7 seen)."""
    if solver is lm_bounds:
        assert np.array_equal(x, bounds)
    else:
        assert np.allclose(x, bounds, rtol=0.0, atol=1e-6)


@pytest.mark.parametrize("solver", SOLVERS)
@pytest.mark.parametrize(
    ("lower", "upper", "start", "minimum"),
    [
        # The minimum (1, 1, 0.3, 0.6) inside the box.
        ([-2.0, -2.0, -1.0, -1.0], [2.0, 2.0, 1.0, 1.0], [-1.2, 1.0, 0.9, -0.9],
         [1.0, 1.0, 0.3, 0.6]),
        # x0 ≤ 0.8 (scipy's bounded Rosenbrock example) and x3 ≤ 0.5: two bounds active at the
        # minimum (0.8, 0.64, 0.3, 0.5).
        ([-2.0, -2.0, -1.0, -1.0], [0.8, 2.0, 1.0, 0.5], [-1.2, 1.0, 0.0, 0.0],
         [0.8, 0.64, 0.3, 0.5]),
        # Started on bounds (x0 and x2 on their lower, x3 on its upper): the minimum inside.
        ([-1.2, -2.0, 0.0, -1.0], [2.0, 2.0, 1.0, 0.9], [-1.2, 1.0, 0.0, 0.9],
         [1.0, 1.0, 0.3, 0.6]),
        # Started on the bound (x0 = 0.8) that is active at the minimum.
        ([-2.0, -2.0, -1.0, -1.0], [0.8, 2.0, 1.0, 1.0], [0.8, -1.0, 0.0, 0.0],
         [0.8, 0.64, 0.3, 0.6]),
    ],
)
def test_the_minimum_of_scipys_least_squares_with_and_without_active_bounds(
        lower, upper, start, minimum, solver) -> None:
    lower, upper, start, minimum = (np.array(v) for v in (lower, upper, start, minimum))
    reference = least_squares(rosenbrock_like, start, jac=rosenbrock_like_jacobian,
                              bounds=(lower, upper), method="trf", max_nfev=500,
                              ftol=1e-12, xtol=1e-12, gtol=1e-12)
    recorded = Recorded(rosenbrock_like, rosenbrock_like_jacobian)
    ours = solver(recorded.residuals, recorded.jacobian, start, lower, upper, 200)
    assert ours.status in (1, 2, 3, 4)
    assert ours.nfev == len(recorded.points) - ours.njev  # every call counted once
    assert np.allclose(reference.x, minimum, atol=1e-6)
    assert np.allclose(ours.x, minimum, atol=1e-6)
    assert ours.cost == pytest.approx(reference.cost, rel=1e-6, abs=1e-14)
    at_bound = np.isclose(minimum, lower) | np.isclose(minimum, upper)
    _on_bounds(ours.x[at_bound], minimum[at_bound], solver)
    assert np.array_equal(ours.fun, rosenbrock_like(ours.x))
    assert np.array_equal(ours.jac, rosenbrock_like_jacobian(ours.x))
    assert recorded.inside(lower, upper)


@pytest.mark.parametrize("solver", SOLVERS)
@pytest.mark.parametrize("seed", range(8))
def test_bounded_linear_least_squares_reaches_the_unique_minimum_of_lsq_linear(seed,
                                                                               solver) -> None:
    # Correlated columns over 4 decades and a box that cuts the unconstrained minimum: several
    # bounds active, and coupled unknowns whose free step points out of the box.
    rng = np.random.default_rng(seed)
    A = rng.standard_normal((60, 6)) @ (np.eye(6) + 0.9 * rng.standard_normal((6, 6)))
    A *= np.logspace(0, -4, 6)
    b = rng.standard_normal(60) * 3.0
    lower, upper = -np.ones(6), np.ones(6)
    reference = lsq_linear(A, b, bounds=(lower, upper), method="bvls", tol=1e-14)
    recorded = Recorded(lambda x: A @ x - b, lambda x: A)
    # Tolerances tighter than the default 1e-8 (the unknowns of the small columns move the
    # cost by less than 1e-8 relative).
    ours = solver(recorded.residuals, recorded.jacobian, np.zeros(6), lower, upper, 200,
                  ftol=1e-13, xtol=1e-13, gtol=1e-13)
    assert ours.status in (1, 2, 3, 4)
    assert ours.cost == pytest.approx(reference.cost, rel=1e-12)
    # x to 1e-4 only: with Σ r² ≈ 430, ftol = 1e-13 stops once a step gains less than 4e-11,
    # and the unknowns of the small columns (1e-2–1e-4 of the first) move the cost by less.
    assert np.allclose(ours.x, reference.x, rtol=0.0, atol=1e-4)
    assert recorded.inside(lower, upper)
    active = reference.active_mask != 0
    assert active.any()
    bound = np.where(reference.active_mask < 0, lower, upper)
    _on_bounds(ours.x[active], bound[active], solver)


@pytest.mark.parametrize("solver", SOLVERS)
def test_no_point_outside_the_box_is_ever_evaluated_when_the_minimum_is_far_outside(
        solver) -> None:
    # Unconstrained minimum at (40, −30, 25): every Gauss–Newton step overshoots the box.
    centre = np.array([40.0, -30.0, 25.0])

    def fun(x: np.ndarray) -> np.ndarray:
        return np.r_[x - centre, 0.1 * (x[0] * x[1] - centre[0] * centre[1])]

    def jac(x: np.ndarray) -> np.ndarray:
        return np.vstack([np.eye(3), 0.1 * np.array([x[1], x[0], 0.0])])

    lower, upper = np.zeros(3), np.ones(3)
    recorded = Recorded(fun, jac)
    result = solver(recorded.residuals, recorded.jacobian, np.full(3, 0.5), lower, upper, 100)
    assert len(recorded.points) > 2 and recorded.inside(lower, upper)
    reference = least_squares(fun, np.full(3, 0.5), jac=jac, bounds=(lower, upper))
    assert np.allclose(result.x, reference.x, atol=1e-6)
    _on_bounds(result.x, np.array([1.0, 0.0, 1.0]), solver)


def test_damped_step_solves_the_regularised_normal_equations_of_the_free_unknowns() -> None:
    rng = np.random.default_rng(3)
    J, f = rng.standard_normal((40, 5)), rng.standard_normal(40)
    R, qtf = qr_factors(J, f)
    D, mu = np.linspace(0.5, 2.0, 5), 0.3
    free = np.array([True, False, True, True, False])
    p = damped_step(R, qtf, D, mu, free)
    F = np.flatnonzero(free)
    expected = np.linalg.solve(J[:, F].T @ J[:, F] + mu * np.diag(D[F] ** 2), -J[:, F].T @ f)
    assert np.allclose(p[F], expected, rtol=1e-10)
    assert np.all(p[~free] == 0.0)


class CountedQR:
    """Counts the QR fallbacks of :func:`jacobian_factors` (``bemore.optimize.lm.qr_factors``)."""

    def __init__(self, monkeypatch) -> None:
        import bemore.optimize.lm as lm

        self.calls, original = 0, lm.qr_factors

        def counted(J, f):
            self.calls += 1
            return original(J, f)

        monkeypatch.setattr(lm, "qr_factors", counted)


def _scaled_condition(J: np.ndarray) -> float:
    """cond(S⁻¹·JᵀJ·S⁻¹), S² = diag JᵀJ: the squared condition number of J's unit columns."""
    return float(np.linalg.cond(J / np.linalg.norm(J, axis=0)) ** 2)


def test_the_factors_of_a_well_conditioned_jacobian_come_from_its_gram_matrix(
        monkeypatch) -> None:
    rng = np.random.default_rng(7)
    # Columns over 8 decades and correlated (the scaling costs the Cholesky factor nothing),
    # scaled condition ≈ 1e4–1e6 like the identification's.
    mixing = np.eye(6) + 0.9 * np.triu(rng.standard_normal((6, 6)), 1)
    base = rng.standard_normal((3000, 6)) @ mixing
    base[:, 5] = base[:, 4] + 3e-3 * base[:, 5]  # nearly collinear with column 4
    J = base * np.logspace(-4, 4, 6)
    f = rng.standard_normal(3000)
    assert 1e2 < _scaled_condition(J) < NORMAL_CONDITION_LIMIT
    counted = CountedQR(monkeypatch)
    R, q = jacobian_factors(J, f, J.T @ f)
    assert counted.calls == 0
    R_qr, q_qr = qr_factors(J, f)
    # The same triangle as the QR's up to each row's sign, to rounding.
    signs = np.sign(np.diag(R) * np.diag(R_qr))
    assert np.all(np.triu(R) == R)
    assert np.allclose(R, R_qr * signs[:, None], rtol=0.0,
                       atol=1e-10 * np.max(np.abs(R_qr), axis=1, keepdims=True))
    assert np.allclose(q, q_qr * signs, rtol=1e-8, atol=1e-12 * np.max(np.abs(q_qr)))
    # The steps: the same as from the QR, with unknowns held or not.
    D = np.sqrt(np.sum(R_qr**2, axis=0))
    for mu in (1e-8, 1e-2, 10.0):
        for free in (np.ones(6, dtype=bool), np.array([True, False, True, True, True, False])):
            expected = damped_step(R_qr, q_qr, D, mu, free)
            assert np.allclose(damped_step(R, q, D, mu, free), expected, rtol=1e-8,
                               atol=1e-10 * np.max(np.abs(expected)))


@pytest.mark.parametrize("case", ["collinear", "zero column", "Gram overflows"])
def test_an_ill_conditioned_or_degenerate_jacobian_is_factorised_by_the_qr(monkeypatch,
                                                                          case) -> None:
    rng = np.random.default_rng(8)
    J, f = rng.standard_normal((500, 4)), rng.standard_normal(500)
    if case == "collinear":
        J[:, 3] = J[:, 2] + 1e-6 * J[:, 1]  # scaled condition ≈ 1e12
        assert _scaled_condition(J) > NORMAL_CONDITION_LIMIT
    elif case == "zero column":
        J[:, 1] = 0.0
    else:
        J[0, 0] = 1e200  # finite, but JᵀJ overflows
    counted = CountedQR(monkeypatch)
    R, q = jacobian_factors(J, f, J.T @ f)
    assert counted.calls == 1
    R_qr, q_qr = qr_factors(J, f)
    assert np.array_equal(R, R_qr) and np.array_equal(q, q_qr)


def test_an_unknown_on_its_bound_is_held_when_the_coupled_step_pushes_it_out() -> None:
    # JᵀJ = [[1, 0.9], [0.9, 1]], gradient Jᵀf = (−1, −10): at x0's lower bound the gradient
    # points into the box, but the Gauss–Newton step of both (p0 = −8 / 0.19) points out.
    J = np.array([[1.0, 0.9], [0.0, np.sqrt(0.19)]])
    f = np.linalg.solve(J.T, np.array([-1.0, -10.0]))
    R, qtf = qr_factors(J, f)
    D, mu = np.ones(2), 1e-12
    x, lower, upper = np.array([0.0, 0.5]), np.zeros(2), np.full(2, 100.0)
    assert damped_step(R, qtf, D, mu, np.ones(2, dtype=bool))[0] == pytest.approx(-8.0 / 0.19)
    p = _step_within(R, qtf, D, mu, x, lower, upper, np.zeros(2, dtype=bool))
    assert p[0] == 0.0 and p[1] == pytest.approx(10.0)  # −g1 / (JᵀJ)11 with x0 held


@pytest.mark.parametrize("solver", SOLVERS)
@pytest.mark.parametrize("max_nfev", [3, 12])
def test_max_nfev_stops_with_status_0(solver, max_nfev) -> None:
    # 12: past trf's 8 evaluations, the rest of the budget left to Levenberg–Marquardt.
    recorded = Recorded(rosenbrock_like, rosenbrock_like_jacobian)
    result = solver(recorded.residuals, recorded.jacobian, np.array([-1.2, 1.0, 0.9, -0.9]),
                    np.full(4, -2.0), np.full(4, 2.0), max_nfev)
    assert result.status == 0 and result.nfev == max_nfev
    assert len(recorded.points) == result.nfev + result.njev


@pytest.mark.parametrize("solver", [*SOLVERS, trf_bounds])
def test_a_jacobian_that_is_not_finite_is_one_clear_error(solver) -> None:
    def broken(x: np.ndarray) -> np.ndarray:
        J = rosenbrock_like_jacobian(x)
        J[0, 0] = np.nan
        return J

    with pytest.raises(OptimisationError, match=r"Jacobian .* is not finite"):
        solver(rosenbrock_like, broken, np.array([-1.2, 1.0, 0.9, -0.9]),
               np.full(4, -2.0), np.full(4, 2.0), 50)


def test_the_finite_check_refuses_nan_and_infinities_and_passes_a_sum_that_overflows() -> None:
    from bemore.optimize.lm import finite_jacobian

    x = np.zeros(2)
    J = np.ones((5, 2))
    assert finite_jacobian(J, x) is J
    for bad in (np.nan, np.inf, -np.inf):
        broken = J.copy()
        broken[3, 1] = bad
        with pytest.raises(OptimisationError, match="not finite"):
            finite_jacobian(broken, x)
    both = J.copy()
    both[0, 0], both[1, 1] = np.inf, -np.inf  # a NaN sum
    with pytest.raises(OptimisationError, match="not finite"):
        finite_jacobian(both, x)
    huge = np.full((5, 2), 1e308)  # every entry finite, their sum +inf
    with np.errstate(over="ignore"):
        assert np.isinf(np.sum(huge))
    assert finite_jacobian(huge, x) is huge
    assert finite_jacobian(np.asfortranarray(J), x).flags.f_contiguous


def test_the_polish_methods_reach_the_same_bounded_minimum() -> None:
    # Data 1.5·exp(−0.8 t); amplitude = 3·x0 with x0 ≤ 0.4 (the fit's 0.5 cut by the bound).
    t = np.linspace(0.0, 1.0, 50)

    def residuals(X: np.ndarray) -> np.ndarray:
        return 3.0 * X[:, :1] * np.exp(-2.0 * X[:, 1:] * t) - 1.5 * np.exp(-0.8 * t)

    lower, upper = np.zeros(2), np.array([0.4, 1.0])
    fits = {method: polish(residuals, np.array([0.1, 0.9]), lower, upper, method=method)
            for method in ("lm", "trf", "trf-lm")}
    default = polish(residuals, np.array([0.1, 0.9]), lower, upper)
    assert default.result.options["method"] == "trf-lm"
    assert np.array_equal(default.result.x, fits["trf-lm"].result.x)
    assert fits["trf"].result.x[0] == pytest.approx(0.4)
    for method in ("lm", "trf-lm"):
        assert fits[method].result.x[0] == 0.4
        assert fits[method].result.fun == pytest.approx(fits["trf"].result.fun, rel=1e-7)
        assert fits[method].result.x[1] == pytest.approx(fits["trf"].result.x[1], abs=1e-6)
    with pytest.raises(OptimisationError, match="method 'dogbox'"):
        polish(residuals, np.array([0.1, 0.9]), lower, upper, method="dogbox")
