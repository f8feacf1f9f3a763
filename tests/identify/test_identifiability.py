"""Sensitivities, standard errors and correlations from a Jacobian built by hand."""

from __future__ import annotations

import numpy as np
import pytest

from bemore.identify.identifiability import analyse

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
