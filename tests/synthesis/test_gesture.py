"""The two joined 8th-order polynomials of the shoulder gesture (docs/synthesis.md)."""

from __future__ import annotations

import numpy as np
import pytest

from bemore.synthesis.gesture import (
    MONOTONIC_MID_FRACTION,
    GestureParameters,
    boundary_matrix,
    gesture_kinematics,
    phase_coefficients,
    sample_gesture,
)

SEED = GestureParameters(2.405, 1.468, np.deg2rad(160.0))


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
    assert value == pytest.approx(1.2, rel=1e-12)


def test_boundary_conditions_hold_in_seconds() -> None:
    parameters = GestureParameters(2.4, 1.5, 2.5, 0.55, 0.45)
    t = np.array([0.0, 0.75, 1.5, 1.95, 2.4])
    angle, velocity, acceleration, jerk = sample_gesture(parameters, t)
    np.testing.assert_allclose(angle, [0.0, 0.55 * 2.5, 2.5, 2.5 - 0.45 * 2.5, 0.0], atol=1e-12)
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
    np.testing.assert_allclose(batch[:, 1], single, rtol=1e-12, atol=1e-12)
    assert batch.shape == (4, 2, 50)
    np.testing.assert_array_equal(batch[:, 0, t > 2.405], 0.0)
    np.testing.assert_array_equal(batch[:, :, t < 0], 0.0)


def test_boundary_matrix_is_well_conditioned() -> None:
    # Normalised time keeps the system solvable to ~1e-10 whatever the phase duration.
    assert np.linalg.cond(boundary_matrix()) < 1e7
    assert SEED.to_dict()["max_flexion_rad"] == pytest.approx(2.792526803, rel=1e-9)
