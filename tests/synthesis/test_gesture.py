"""The two joined 8th-order polynomials of the shoulder gesture (docs/synthesis.md)."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.linalg

from bemore.synthesis.gesture import (
    MONOTONIC_MID_FRACTION,
    N_COEFFICIENTS,
    GestureParameters,
    boundary_matrix,
    gesture_kinematics,
    phase_coefficients,
    sample_gesture,
)

SEED = GestureParameters(2.405, 1.468, np.deg2rad(160.0))

# Rounding bounds of the coefficients' solve (LU with partial pivoting, backward stable) and of
# Horner's rule, after Higham, "Accuracy and Stability of Numerical Algorithms" (2002), §3 and
# §9: γ_m = m·u / (1 − m·u) with u the unit roundoff. They hold for any BLAS/LAPACK kernel (the
# kernels differ in the order of their sums, which these bounds allow for), so the tests below
# pass on any machine and still catch any error larger than rounding.
_U = np.finfo(float).eps / 2


def _gamma(m: int) -> float:
    return m * _U / (1.0 - m * _U)


def _condition_residual_bound(coefficients: np.ndarray, s: float) -> float:
    """Bound (rad) on |φ(s) − the condition imposed at s| for s = 0, ½ or 1.

    The LU solve's backward error is |ΔA| ≤ γ_3n·|L||U| (Higham Thm 9.4), so every imposed
    condition holds to γ_3n·(|L||U||c|) of its row; evaluating at s adds Horner's γ_2n·Σ|c_k|s^k.
    """
    _, lower, upper = scipy.linalg.lu(boundary_matrix())
    row = {0.0: 0, 1.0: 4, 0.5: 8}[s]
    backward = (np.abs(lower) @ np.abs(upper) @ np.abs(coefficients))[row]
    powers = s ** np.arange(N_COEFFICIENTS)
    return _gamma(3 * N_COEFFICIENTS) * backward + _gamma(2 * N_COEFFICIENTS) * float(
        np.abs(coefficients) @ powers)


def _coefficient_error_bound(coefficients: np.ndarray) -> np.ndarray:
    """Componentwise bound (rad) on the coefficients' forward error from the solve:
    γ_3n·|A⁻¹||L||U||c| (Higham Thm 9.4 with Skeel's componentwise condition)."""
    matrix = boundary_matrix()
    _, lower, upper = scipy.linalg.lu(matrix)
    return _gamma(3 * N_COEFFICIENTS) * (
        np.abs(np.linalg.inv(matrix)) @ np.abs(lower) @ np.abs(upper) @ np.abs(coefficients))


def test_seed_conditions_give_the_seventh_order_polynomial() -> None:
    # 7th-order rest-to-rest polynomial, known in closed form: 35s⁴ − 84s⁵ + 70s⁶ − 20s⁷.
    amplitude = np.deg2rad(160.0)
    coefficients = phase_coefficients(0.0, amplitude, 0.5)
    expected = amplitude * np.array([0, 0, 0, 0, 35, -84, 70, -20, 0], float)
    np.testing.assert_allclose(coefficients, expected, rtol=1e-9, atol=1e-9)
    assert abs(coefficients[8]) < 1e-9 * amplitude


def test_other_mid_value_gives_a_true_eighth_degree() -> None:
    amplitude = 2.0
    coefficients = phase_coefficients(0.0, amplitude, 0.6)
    # The free direction is s⁴(1−s)⁴ (value 1/256 at s=½): c₈ = 256·0.1·amplitude = 51.2.
    assert coefficients[8] == pytest.approx(51.2, rel=1e-10)
    s = 0.5
    value = np.polyval(coefficients[::-1], s)
    assert abs(value - 1.2) <= _condition_residual_bound(coefficients, s) + 1.2 * _U


def test_boundary_conditions_hold_in_seconds() -> None:
    parameters = GestureParameters(2.4, 1.5, 2.5, 0.55, 0.45)
    t = np.array([0.0, 0.75, 1.5, 1.95, 2.4])
    angle, velocity, acceleration, jerk = sample_gesture(parameters, t)
    flexion = phase_coefficients(0.0, 2.5, 0.55)
    extension = phase_coefficients(2.5, 0.0, 0.45)
    # Each sample is an imposed condition; s = (t − start)/duration may be off by one rounding,
    # which moves the angle by at most |dφ/ds|·u, with |dφ/ds| ≤ Σ k|c_k|.
    slope = max(np.abs(c[1:]) @ np.arange(1, N_COEFFICIENTS) for c in (flexion, extension))
    bounds = [_condition_residual_bound(c, s) + 2 * slope * _U
              for c, s in ((flexion, 0.0), (flexion, 0.5), (flexion, 1.0), (extension, 0.5),
                           (extension, 1.0))]
    expected = [0.0, 0.55 * 2.5, 2.5, 2.5 - 0.45 * 2.5, 0.0]
    assert (np.abs(angle - expected) <= np.array(bounds) + np.abs(expected) * _U).all(), (
        angle - expected, bounds)
    for derivative in (velocity, acceleration, jerk):
        np.testing.assert_allclose(derivative[[0, 2, 4]], 0.0, atol=1e-9)


def test_derivatives_are_continuous_at_flexion_end_by_finite_differences() -> None:
    # Sampled at 1 kHz around t_flexmax: the one-sided limits of each derivative agree, and each
    # derivative matches the finite difference of the one below (no jump hidden in the formulas).
    parameters = GestureParameters(2.405, 1.468, np.deg2rad(160.0), 0.58, 0.40)
    h = 1e-5
    t_m = parameters.flexion_end_time_s
    left = sample_gesture(parameters, np.array([t_m - 2 * h, t_m - h, t_m]))
    right = sample_gesture(parameters, np.array([t_m, t_m + h, t_m + 2 * h]))
    peak = np.abs(sample_gesture(parameters, np.linspace(0, 2.405, 2406))).max(axis=1)
    for order in range(4):
        # Jump across the junction, relative to the derivative's peak over the gesture.
        jump = abs(right[order, 1] - left[order, 1]) / peak[order]
        assert jump < 1e-3, f"derivative {order} jumps by {jump:.2e} of its peak"
    t = np.arange(0.0, 2.405, 1e-3)
    samples = sample_gesture(parameters, t)
    for order in range(3):
        finite = np.gradient(samples[order], t)
        error = np.abs(finite[2:-2] - samples[order + 1][2:-2]).max() / peak[order + 1]
        assert error < 2e-3, f"derivative {order + 1} differs from d/dt of {order}: {error:.1e}"


def test_jerk_at_junction_is_zero_from_both_sides() -> None:
    parameters = GestureParameters(3.0, 1.2, 2.0, 0.6, 0.4)
    eps = 1e-9
    samples = sample_gesture(parameters, np.array([1.2 - eps, 1.2 + eps]))
    peak_jerk = np.abs(sample_gesture(parameters, np.linspace(0, 3, 3001))[3]).max()
    # Jerk peaks at ≈ 100 rad/s³ for this gesture; next to the junction it is ≈ 0 on both sides
    # (it grows with the snap, ≈ 10³ rad/s⁴, times 1 ns).
    assert peak_jerk > 50.0
    assert np.abs(samples[3]).max() < 1e-5


def test_monotonic_mid_fraction_box_is_tight() -> None:
    s = np.linspace(0.0, 1.0, 20001)
    low, high = MONOTONIC_MID_FRACTION
    for fraction, monotonic in [
        (high - 1e-4, True),
        (low + 1e-4, True),
        (high + 0.01, False),
        (low - 0.01, False),
    ]:
        coefficients = phase_coefficients(0.0, 1.0, fraction)
        values = np.polyval(coefficients[::-1], s)
        assert (np.diff(values) >= -1e-12).all() == monotonic, fraction


def test_batch_matches_single_and_rests_outside() -> None:
    t = np.linspace(-0.1, 3.0, 50)
    batch = gesture_kinematics(t, [2.405, 3.0], [1.468, 1.0], [2.7, 2.2], [0.5, 0.6], 0.45)
    single = sample_gesture(GestureParameters(3.0, 1.0, 2.2, 0.6, 0.45), t)
    # The batch solves its two right-hand sides in one LAPACK call, the single gesture one: the
    # kernels may order their sums differently (OpenBLAS's Haswell and SkylakeX kernels differ
    # by ~1e-12 here), so each side is within its solve's rounding bound of the exact
    # coefficients, and a derivative d sampled at s ∈ [0, 1] within Σ_k k!/(k−d)!·δc_k / T^d.
    bound = np.zeros(4)
    for coefficients, duration in ((phase_coefficients(0.0, 2.2, 0.6), 1.0),
                                   (phase_coefficients(2.2, 0.0, 0.45), 2.0)):
        error = _coefficient_error_bound(coefficients)
        for d in range(4):
            factors = [np.prod(np.arange(k - d + 1, k + 1)) if k >= d else 0.0
                       for k in range(N_COEFFICIENTS)]
            bound[d] = max(bound[d], 2.0 * float(np.dot(factors, error)) / duration**d)
    difference = np.abs(batch[:, 1] - single).max(axis=1)
    assert (difference <= bound).all(), (difference, bound)
    # A rounding bound, not a loose tolerance: a few millionths of each derivative's peak.
    assert (bound < 1e-5 * np.abs(single).max(axis=1)).all(), bound
    assert batch.shape == (4, 2, 50)
    np.testing.assert_array_equal(batch[:, 0, t > 2.405], 0.0)
    np.testing.assert_array_equal(batch[:, :, t < 0], 0.0)


def test_boundary_matrix_is_well_conditioned() -> None:
    # Normalised time keeps the system solvable to ~1e-10 whatever the phase duration.
    assert np.linalg.cond(boundary_matrix()) < 1e7
    assert SEED.to_dict()["max_flexion_rad"] == pytest.approx(2.792526803, rel=1e-9)


def _scalar_samples(t, t_f, t_m, flexion, extension) -> np.ndarray:
    """The sampling recurrence written sample by sample (Horner, then ÷ duration per order)."""
    from math import factorial

    out = np.zeros((4, t.size))
    for i, ti in enumerate(t):
        if ti < 0.0 or ti > t_f:
            continue
        start, duration, c = (0.0, t_m, flexion) if ti <= t_m else (t_m, t_f - t_m, extension)
        s = min(max((ti - start) / duration, 0.0), 1.0)
        scale = 1.0
        for d in range(4):
            acc = 0.0
            for k in range(8, d - 1, -1):
                acc = acc * s + (factorial(k) / factorial(k - d)) * c[k]
            out[d, i] = acc * scale
            scale /= duration
    return out


def test_batched_sampling_equals_the_scalar_recurrence_bit_for_bit() -> None:
    rng = np.random.default_rng(4)
    count = 6
    t_f = rng.uniform(2.0, 4.0, count)
    t_m = np.minimum(rng.uniform(0.5, 3.5, count), t_f - 0.5)
    phi = rng.uniform(2.0, 2.8, count)
    f1, f2 = rng.uniform(0.4, 0.6, (2, count))
    t = np.r_[-0.01, np.arange(0.0, 4.2, 0.0137)]  # before the start and after every t_f too
    batch = gesture_kinematics(t, t_f, t_m, phi, f1, f2)
    # the coefficients as the batch solves them (one solve for all: same rounding)
    flexion, extension = phase_coefficients(0.0, phi, f1), phase_coefficients(phi, 0.0, f2)
    for b in range(count):
        expected = _scalar_samples(t, t_f[b], t_m[b], flexion[b], extension[b])
        np.testing.assert_array_equal(batch[:, b], expected)
