"""The trust-region reflective least squares with its step from a QR (bemore.optimize.trf):
the SVD factors it forms, and the same iterations and minimum as scipy's trf."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.linalg
from scipy.optimize import least_squares

from bemore.optimize.trf import svd_factors, trf_bounds
from tests.optimize.valley import rosenbrock_like, rosenbrock_like_jacobian


def test_svd_factors_are_those_of_the_svd_of_an_ill_conditioned_tall_matrix() -> None:
    rng = np.random.default_rng(4)
    # Columns scaled over 8 decades, like an identification Jacobian's weakly seen unknowns.
    A = rng.standard_normal((800, 9)) * np.logspace(0, -8, 9)
    f = rng.standard_normal(800)
    s, V, uf = svd_factors(A, f)
    U_ref, s_ref, Vt_ref = scipy.linalg.svd(A, full_matrices=False)
    assert np.allclose(s, s_ref, rtol=1e-10, atol=0.0)
    # Singular vectors are defined up to sign: align each pair, then compare.
    signs = np.sign(np.sum(V * Vt_ref.T, axis=0))
    assert np.all(signs != 0)
    assert np.allclose(V * signs, Vt_ref.T, atol=1e-9)
    assert np.allclose(uf * signs, U_ref.T @ f, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize(
    ("lower", "upper", "start"),
    [
        # The minimum (1, 1, 0.3, 0.6) inside the box.
        ([-2.0, -2.0, -1.0, -1.0], [2.0, 2.0, 1.0, 1.0], [-1.2, 1.0, 0.9, -0.9]),
        # x0 ≤ 0.8 holds the minimum at a bound (scipy's own bounded Rosenbrock example).
        ([-2.0, -2.0, -1.0, -1.0], [0.8, 2.0, 1.0, 0.5], [-1.2, 1.0, 0.0, 0.0]),
    ],
)
def test_same_iterations_and_minimum_as_scipys_trf(lower, upper, start, monkeypatch) -> None:
    import bemore.optimize.lm as lm

    lower, upper, start = (np.array(v) for v in (lower, upper, start))
    # Every Jacobian's factors from its Gram matrix (no QR fallback of jacobian_factors).
    monkeypatch.setattr(lm, "qr_factors", None)
    calls = {"scipy": 0, "bemore": 0}

    def counted(name):
        def fun(x):
            calls[name] += 1
            return rosenbrock_like(x)
        return fun

    reference = least_squares(counted("scipy"), start, jac=rosenbrock_like_jacobian,
                              bounds=(lower, upper), method="trf", max_nfev=200)
    ours = trf_bounds(counted("bemore"), rosenbrock_like_jacobian, start, lower, upper, 200)
    assert reference.status > 0 and ours.status == reference.status
    assert ours.nfev == reference.nfev == calls["bemore"] == calls["scipy"]
    assert ours.njev == reference.njev
    assert np.allclose(ours.x, reference.x, rtol=0.0, atol=1e-9)
    assert ours.cost == pytest.approx(reference.cost, rel=1e-9, abs=1e-15)
    assert np.array_equal(ours.fun, rosenbrock_like(ours.x))
    assert np.array_equal(ours.jac, rosenbrock_like_jacobian(ours.x))
    assert np.all(ours.x >= lower) and np.all(ours.x <= upper)


def test_max_nfev_stops_with_status_0() -> None:
    lower, upper = np.full(4, -2.0), np.full(4, 2.0)
    result = trf_bounds(rosenbrock_like, rosenbrock_like_jacobian,
                        np.array([-1.2, 1.0, 0.9, -0.9]), lower, upper, max_nfev=3)
    assert result.status == 0 and result.nfev == 3


# A Jacobian that is not finite: tests/optimize/test_lm.py, for every bounded solver.
