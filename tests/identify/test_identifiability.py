"""Sensitivities, standard errors and correlations from a Jacobian built by hand."""

from __future__ import annotations

import numpy as np
import pytest

from bemore.identify.identifiability import analyse, bartlett_meats

M = 64
# Three orthogonal ±1 columns (Walsh functions), so JᵀJ is diagonal and everything is by hand.
WALSH = np.array([[1.0 if (i >> bit) & 1 == 0 else -1.0 for bit in range(3)] for i in range(M)])


def test_orthogonal_columns_give_textbook_standard_errors() -> None:
    scales = np.array([0.02, 0.005, 0.001])  # m per normalised unit
    J = WALSH * scales
    r = np.full(M, 0.001)  # 1 mm everywhere: σ² = 64e-6 / 61
    values = np.array([10.0, 0.2, 500.0])
    widths = np.array([20.0, 0.2, 1000.0])
    result = analyse(J, r, ["a", "b", "c"], values, widths)
    sigma = np.sqrt(M * 1e-6 / (M - 3))
    for k, item in enumerate(result.parameters):
        # ‖J_k‖ = 8·scale; SE (normalised) = σ/‖J_k‖; sensitivity = 0.1·‖J_k‖/8 m.
        assert item.sensitivity_mm == pytest.approx(0.1 * scales[k] * 1e3)
        assert item.standard_error == pytest.approx(sigma / (8 * scales[k]) * widths[k])
        assert abs(item.correlation) < 1e-12
    assert result.residual_rms_mm == pytest.approx(1.0)
    # c: SE = 0.00127/0.008·1000 ≈ 159 → 32 % of 500: flagged; a and b are determined.
    assert result.flagged == ["c"]
    assert "relative standard error" in result.parameters[2].reasons[0]


def test_nearly_collinear_and_insensitive_parameters_are_flagged_with_reasons() -> None:
    rng = np.random.default_rng(0)
    base = rng.normal(size=(M, 2)) * 0.01
    twin = base[:, 1] * 1.0 + rng.normal(size=M) * 1e-4  # almost the same effect as column 1
    dead = rng.normal(size=M) * 1e-7  # hardly any effect at all
    J = np.column_stack([base, twin, dead])
    r = rng.normal(size=M) * 1e-4
    result = analyse(J, r, ["p", "q", "q_twin", "dead"], np.ones(4), np.ones(4))
    by_name = {item.name: item for item in result.parameters}
    assert by_name["p"].identifiable
    assert by_name["q"].most_correlated_with == "q_twin"
    # Same effect on the residuals → their estimates compensate: correlation near −1.
    assert by_name["q"].correlation < -0.95 and not by_name["q"].identifiable
    assert any("correlated with q " in reason for reason in by_name["q_twin"].reasons)
    assert any(reason.startswith("insensitive") for reason in by_name["dead"].reasons)
    assert sorted(result.flagged) == ["dead", "q", "q_twin"]
    matrix = np.array(result.correlation_matrix)
    assert np.allclose(np.diag(matrix), 1.0) and np.allclose(matrix, matrix.T)


def _pair_model(curvature: float):
    """Residuals (N, 200) of a pair (a, b) whose sum the rows see 30 times better than their
    difference z = a − b, the difference through s(z) = z − z²/(2·curvature) (∞: linear), plus
    fixed noise orthogonal to both effects; the optimum is a = b = 0.5. Returns the residual
    function, the Jacobian and the residuals at the optimum."""
    rng = np.random.default_rng(3)
    basis, _ = np.linalg.qr(rng.normal(size=(200, 3)))
    sum_row, difference_row, noise = basis.T
    sum_row, difference_row = 0.3 * sum_row, 0.01 * difference_row
    noise = 1e-3 * noise * np.sqrt(198.0)  # σ = 1e-3 over the 198 degrees of freedom

    def residuals_at(X):
        X = np.atleast_2d(X)
        z = X[:, 0] - X[:, 1]
        shaped = z - z**2 / (2.0 * curvature)
        return (np.outer(X.sum(axis=1) - 1.0, sum_row) + np.outer(shaped, difference_row)
                + noise)

    J = np.column_stack([sum_row + difference_row, sum_row - difference_row])
    return residuals_at, J, residuals_at(np.array([0.5, 0.5]))[0]


def test_a_correlated_pair_whose_cost_is_quadratic_is_determined() -> None:
    # SE(a − b) = σ/0.01 = 0.1: a and b each ≈ 0.05 (10 % of 0.5), correlation ≈ −0.998.
    residuals_at, J, r = _pair_model(np.inf)
    x = np.array([0.5, 0.5])
    unchecked = analyse(J, r, ["a", "b"], x, np.ones(2), positions=x)
    checked = analyse(J, r, ["a", "b"], x, np.ones(2), positions=x, residuals_at=residuals_at)
    for row in unchecked.parameters:
        assert row.correlation < -0.99 and not row.identifiable and row.quadratic_ratio is None
    for row in checked.parameters:
        assert row.relative_standard_error == pytest.approx(0.1, rel=0.01)
        assert row.correlation < -0.99  # still reported
        assert row.identifiable and row.reasons == []
        np.testing.assert_allclose(row.quadratic_ratio, 1.0, atol=1e-9)


def test_a_standard_error_the_cost_does_not_hold_is_flagged() -> None:
    # s(z) flattens at z = curvature: with curvature = 0.2 = 2 SE(a − b), moving a by +2 SE
    # (b by −2 SE, its conditional mean) reaches z ≈ 0.2 where s = 0.1 instead of 0.2: the cost
    # rises a quarter of the quadratic's; on the other side 1.5² = 2.25 times.
    residuals_at, J, r = _pair_model(0.2)
    x = np.array([0.5, 0.5])
    result = analyse(J, r, ["a", "b"], x, np.ones(2), positions=x, residuals_at=residuals_at)
    a, b = result.parameters
    np.testing.assert_allclose(a.quadratic_ratio, [2.25, 0.25], rtol=0.02)
    np.testing.assert_allclose(b.quadratic_ratio, [0.25, 2.25], rtol=0.02)
    assert result.flagged == ["a", "b"]
    assert any("rises 0.25 of the quadratic" in reason for reason in a.reasons)
    assert any(reason.startswith("correlated with b") for reason in a.reasons)
    # Gently curved (ten times further out), the same pair is determined to its errors.
    gentle, J, r = _pair_model(2.0)
    result = analyse(J, r, ["a", "b"], x, np.ones(2), positions=x, residuals_at=gentle)
    assert result.flagged == []
    assert all(0.8 < ratio < 1.25 for row in result.parameters for ratio in row.quadratic_ratio)


@pytest.mark.parametrize("bandwidth", [0, 3, 25])
def test_bartlett_meats_are_the_lag_sums_of_each_residual_vector(bandwidth) -> None:
    """Each of the K meats is Σ_|l|≤L (1 − |l|/(L + 1)) Σ_t s_t s_{t+l}ᵀ of its own vector's
    scores s_t = J_tᵀ r_t, written out lag by lag."""
    rng = np.random.default_rng(5)
    frames, columns, d = 100, 3, 4
    J = rng.normal(size=(frames * columns, d))
    R = rng.normal(size=(6, frames * columns))
    meats = bartlett_meats(J, R, frames, bandwidth)
    assert meats.shape == (6, d, d)
    for k in range(6):
        scores = np.einsum("fcd,fc->fd", J.reshape(frames, columns, d),
                           R[k].reshape(frames, columns))
        expected = scores.T @ scores
        for lag in range(1, bandwidth + 1):
            cross = scores[lag:].T @ scores[:-lag]
            expected += (1.0 - lag / (bandwidth + 1.0)) * (cross + cross.T)
        assert np.abs(meats[k] - expected).max() < 1e-12 * np.abs(expected).max()
