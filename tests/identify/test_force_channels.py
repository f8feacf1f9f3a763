"""The force channels' offset, gain, cross-talk and lag fitted by projection
(bemore.identify.force_channels) on engine data whose measured force is written with known
channel errors."""

from __future__ import annotations

import numpy as np
import pytest

from bemore.identify.force_channels import ForceChannelErrors
from tests.identify.test_forces import _case


def _with_channels(offset_n: tuple[float, float], gain: tuple[float, float], lag_s: float):
    """The noise-free with-forces problem of test_forces._case, its measured force replaced by
    (1 + g)·F(t − τ) + o of the simulated force F (the lag by interpolation between frames),
    the three errors fitted; (problem, truth)."""
    _, problem, truth, _, scales = _case(noisy=False)
    t = problem.motion.t
    exact = problem.bar_force.copy()
    late = np.stack([np.interp(t - lag_s, t, exact[:, j]) for j in range(2)], axis=1)
    problem.bar_force = (1.0 + np.asarray(gain)) * late + np.asarray(offset_n)
    problem.channel_errors = ForceChannelErrors.of_force(problem.bar_force, t, scales)
    return problem, truth


def test_offset_and_gain_are_projected_out_and_recovered_exactly() -> None:
    # F_meas = (1 + g)·F + o is linear in the columns 1 and F_meas: with F = (F_meas − o)/(1+g)
    # the fit's first-order model F_meas − o' − g'·F_meas holds exactly for g' = g/(1 + g),
    # o' = o/(1 + g); nothing is left in the residuals.
    offset, gain = (1.5, -4.0), (0.01, -0.02)
    problem, truth = _with_channels(offset, gain, 0.0)
    r = problem.residuals(truth[None, :])
    assert np.max(np.abs(problem.force_part(r))) < 1e-6  # N
    fitted = problem.fitted_channel_errors(truth)
    for j, axis in enumerate("xy"):
        assert fitted[f"offset_{axis}_n"] == pytest.approx(offset[j] / (1 + gain[j]), abs=1e-6)
        assert fitted[f"gain_{axis}_pct"] == pytest.approx(100 * gain[j] / (1 + gain[j]),
                                                           abs=1e-7)
    assert abs(fitted["lag_x_ms"]) < 1e-6 and abs(fitted["lag_y_ms"]) < 1e-6


def test_a_lag_is_recovered_to_its_second_order_terms() -> None:
    # 1 ms late: F(t − τ) = F − τ·Ḟ + τ²/2·F̈ …; the fit takes the first-order part, and what it
    # neglects is what the estimate reports.
    problem, truth = _with_channels((0.0, 0.0), (0.0, 0.0), 0.001)
    fitted = problem.fitted_channel_errors(truth)
    assert fitted["lag_x_ms"] == pytest.approx(1.0, abs=0.02)
    assert fitted["lag_y_ms"] == pytest.approx(1.0, abs=0.02)
    neglected = np.asarray(fitted["second_order_rms_n"])
    left = np.sqrt(np.mean(problem.force_part(problem.residuals(truth[None, :]))[0] ** 2,
                           axis=0))
    # What is left in the residuals is the neglected part's order of magnitude (N).
    assert np.all(left < 3.0 * neglected + 0.05), (left, neglected)
    assert np.all(left > 0.1 * neglected), (left, neglected)


def test_the_fit_does_not_see_the_channel_errors() -> None:
    # Any point: the residuals with the errors fitted are those of the exact channels, and the
    # Jacobian's force rows too (to the gain's effect on the columns, F_meas in place of F).
    exact, truth = _with_channels((0.0, 0.0), (0.0, 0.0), 0.0)
    off, _ = _with_channels((3.0, -6.6), (0.004, -0.005), 0.0)
    X = np.vstack([truth, np.random.default_rng(2).uniform(0.3, 0.7, (2, truth.size))])
    r_exact, J_exact = exact.jacobian(X)
    r_off, J_off = off.jacobian(X)
    scale = np.max(np.abs(r_exact))
    assert np.max(np.abs(r_off - r_exact)) < 1e-2 * scale
    assert np.max(np.abs(J_off - J_exact)) < 1e-2 * np.max(np.abs(J_exact))
    # Without the projection the same channels move the residuals by what they add to the
    # force: F_sim − F_meas = −(g·F + o) at the truth.
    off.channel_errors = None
    moved = off.force_part(off.residuals(truth[None, :]))[0]
    np.testing.assert_allclose(moved, -(np.array([0.004, -0.005]) * exact.bar_force
                                        + np.array([3.0, -6.6])), atol=1e-6)


def test_no_kind_gives_no_fit_and_an_unknown_one_is_refused() -> None:
    force, t, scale = np.ones((5, 2)), np.linspace(0.0, 0.004, 5), np.ones(2)
    assert ForceChannelErrors.of_force(force, t, scale, ()) is None
    with pytest.raises(ValueError, match="unknown force channel error 'drift'"):
        ForceChannelErrors.of_force(force, t, scale, ("drift",))
