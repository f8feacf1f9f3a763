"""The gesture problem on the exemplary gymnast: start state, objective, independent torque."""

from __future__ import annotations

import numpy as np
import pytest

from bemore.model import exemplary_parameters, load_model
from bemore.settings import load_synthesis
from bemore.synthesis.gesture import GestureParameters, sample_gesture
from bemore.synthesis.problem import (
    GestureProblem,
    abs_linear_integral,
    grid_for,
    hermite_at,
    integrals_to,
    objective_value,
)
from tests.synthesis import pinocchio_exemplary

DESIGN = np.array([2.96, 1.73, np.deg2rad(160.0)])


@pytest.fixture(scope="module")
def setup():
    model = load_model("exemplary_gymnast")
    values = exemplary_parameters()
    P = model.parameter_matrix([values])
    return model, values, P


def test_objectives_on_known_signals() -> None:
    t = np.linspace(0.0, 2.0 * np.pi, 200001)
    torque = 3.0 * np.sin(t)
    assert objective_value("abs_torque_integral", torque, t) == pytest.approx(12.0, rel=1e-8)
    assert objective_value("squared_torque_integral", torque, t) == pytest.approx(
        9.0 * np.pi, rel=1e-8
    )
    assert objective_value("peak_torque", torque, t) == pytest.approx(3.0, rel=1e-9)


def test_start_is_the_handstand_in_static_equilibrium(setup) -> None:
    model, values, P = setup
    problem = GestureProblem(model, P, load_synthesis(), steps=50)
    q0 = problem.start.free_q0
    assert q0[2] == pytest.approx(np.pi / 2)  # arms vertical above the bar
    # Under the body weight the bar sags: k_y·Δy ≈ −(total mass)·g.
    total_mass = values["bar.mass"] + values["arm.mass"] + values["body.mass"]
    assert q0[1] * values["bar.stiffness_y"] == pytest.approx(-total_mass * 9.81, rel=1e-6)
    assert abs(q0[0]) < 1e-9
    # The engine-kernel equilibrium is Model.equilibrium's state (the readable reference).
    reference = model.equilibrium(P, np.zeros(model.n_driven), free_q=q0 * [0, 0, 1, 0, 0])[0]
    assert np.abs(q0 - reference).max() < 1e-7
    # Pinocchio: zero acceleration of every free coordinate at rest in this state.
    oracle = pinocchio_exemplary.build(values)
    q = np.append(q0, 0.0)[None]
    torque = pinocchio_exemplary.hybrid_torque(oracle, values, q, np.zeros((1, 6)), np.zeros(1))
    # Static torque holding the body in line with the arms: zero for a vertical handstand.
    assert abs(torque[0]) < 1e-6


def _abs_integral_by_roots(t: np.ndarray, c: np.ndarray) -> float:
    """∫|C|dt of the linear interpolant, each sign change split at its root (test's own)."""
    total = 0.0
    for t0, t1, a, b in zip(t[:-1], t[1:], c[:-1], c[1:], strict=True):
        if a * b < 0.0:
            root = t0 + (t1 - t0) * a / (a - b)
            total += 0.5 * abs(a) * (root - t0) + 0.5 * abs(b) * (t1 - root)
        else:
            total += 0.5 * (abs(a) + abs(b)) * (t1 - t0)
    return total


def test_batch_objective_torque_and_rotation_agree_with_independent_recomputation(setup) -> None:
    # Two designs of different t_f in ONE engine call on the shared 1 ms grid (padded to the
    # longer one); each member's torque against Pinocchio's inverse dynamics on its simulated
    # motion, its objective against the test's own integral to its own t_f, its rotation at t_f
    # against scipy's cubic Hermite spline.
    from scipy.interpolate import CubicHermiteSpline

    model, values, P = setup
    problem = GestureProblem(model, P, load_synthesis(), step_s=1e-3, substeps=2)
    X = np.array([DESIGN, [2.51, 1.5, np.deg2rad(150.0)]])
    t = grid_for(X[:, 0], problem.step_s)
    torque, free_q, free_qd, _, ok = problem.simulate_batch(X, t, substeps=2)
    assert ok.all() and problem.engine_calls == 1
    evaluation = problem.evaluate_batch(X)
    assert evaluation.engine_calls == 1
    oracle = pinocchio_exemplary.build(values)
    for b, x in enumerate(X):
        keep = t <= x[0] + problem.step_s  # the samples up to the first one after t_f
        angle, velocity, acceleration, _ = sample_gesture(GestureParameters(*x), t[keep])
        q = np.column_stack([free_q[b, keep], angle])
        v = np.column_stack([free_qd[b, keep], velocity])
        rebuilt = pinocchio_exemplary.hybrid_torque(oracle, values, q, v, acceleration)
        peak = np.abs(rebuilt).max()
        assert peak > 100.0  # a real gesture: hundreds of N·m
        assert np.abs(torque[b, keep] - rebuilt).max() <= 1e-6 * peak
        # The objective: ∫|C| of the linear interpolant from 0 to t_f (partial last interval).
        inside = t[keep] <= x[0]
        end = np.interp(x[0], t[keep], rebuilt)
        t_to_end = np.append(t[keep][inside], x[0])
        c_to_end = np.append(rebuilt[inside], end)
        independent = _abs_integral_by_roots(t_to_end, c_to_end)
        assert evaluation.objective[b] == pytest.approx(independent, rel=1e-6)
        assert evaluation.peak_torque_nm[b] == pytest.approx(np.abs(c_to_end).max(), rel=1e-6)
        spline = CubicHermiteSpline(t[keep], free_q[b, keep, 2], free_qd[b, keep, 2])
        rotation = np.rad2deg(spline(x[0]) - free_q[b, 0, 2])
        assert evaluation.rotation_deg[b] == pytest.approx(rotation, rel=1e-12)
        assert evaluation.constraints[b, 0] == pytest.approx(x[0] - x[1])
        assert evaluation.constraints[b, 1] == evaluation.rotation_deg[b]
    # A member's figures do not depend on the batch it was evaluated in (up to the engine's
    # rounding: its one-member calls may round differently, ~1e-12 relative).
    alone = problem.evaluate_batch(X[1:])
    assert alone.objective[0] == pytest.approx(evaluation.objective[1], rel=1e-9)
    assert alone.rotation_deg[0] == pytest.approx(evaluation.rotation_deg[1], rel=1e-9)


def test_absolute_integral_has_no_kink_where_a_sample_changes_sign() -> None:
    # Linear C from a to b over 1 s: two triangles when the sign changes.
    assert abs_linear_integral(np.array(1.0), np.array(-1.0), 1.0) == pytest.approx(0.5)
    assert abs_linear_integral(np.array(2.0), np.array(1.0), 1.0) == pytest.approx(1.5)
    assert abs_linear_integral(np.array(-3.0), np.array(1.0), 2.0) == pytest.approx(2.5)
    # Slope with respect to the end value on both sides of zero: +w/2 (the trapezoid rule on
    # |C| would jump from −w/2 to +w/2 there).
    h = 1e-7
    for b in (-1e-6, 1e-6):
        ends = np.array([b - h, b + h])
        slope = np.diff(abs_linear_integral(np.array(2.0), ends, 1.0))[0] / (2 * h)
        assert slope == pytest.approx(0.5, abs=1e-5)


def test_integrals_and_end_value_on_known_signals() -> None:
    step = 1e-3
    t = np.arange(5001) * step
    t_f = np.array([3.9876, 1.2345])  # between samples; the first spans a sign change at π
    C = np.tile(np.sin(t), (2, 1))
    absolute, squared, peak = integrals_to(t_f, step, C)
    exact_abs = [2.0 + (1.0 + np.cos(t_f[0])), 1.0 - np.cos(t_f[1])]
    exact_sq = 0.5 * t_f - 0.25 * np.sin(2 * t_f)
    np.testing.assert_allclose(absolute, exact_abs, rtol=1e-6)
    np.testing.assert_allclose(squared, exact_sq, rtol=1e-6)
    np.testing.assert_allclose(peak, [1.0, np.sin(t_f[1])], rtol=1e-6)
    q, qd = np.tile(np.sin(t), (2, 1)), np.tile(np.cos(t), (2, 1))
    np.testing.assert_allclose(hermite_at(t_f, step, q, qd), np.sin(t_f), atol=1e-13)


def test_torque_from_finite_differenced_motion(setup) -> None:
    # A second route: accelerations of the free coordinates by central differences of the
    # simulated velocities, then RNEA. Differencing costs accuracy (O(h²)), hence 1e-3.
    model, values, P = setup
    problem = GestureProblem(model, P, load_synthesis(), steps=2960, substeps=2)
    t = np.linspace(0.0, DESIGN[0], problem.steps + 1)
    torque, free_q, free_qd, _, _ = problem.simulate_design(DESIGN, t, substeps=2)
    angle, velocity, acceleration, _ = sample_gesture(GestureParameters(*DESIGN), t)
    free_acc = np.gradient(free_qd, t, axis=0)
    inner = slice(5, -5)
    q = np.column_stack([free_q, angle])[inner]
    v = np.column_stack([free_qd, velocity])[inner]
    a = np.column_stack([free_acc, acceleration])[inner]
    rebuilt = pinocchio_exemplary.rnea_torque(pinocchio_exemplary.build(values), q, v, a)
    assert np.abs(torque[inner] - rebuilt).max() <= 1e-3 * np.abs(rebuilt).max()


def test_objective_and_rotation_are_smooth_in_the_design(setup) -> None:
    # On the coarse 10 ms grid, t_f moved over 8 ms (samples enter the integral, sample torques
    # change sign): the first differences of the objective and of the rotation change gradually
    # (no jump of the slope, what finite-difference SQP needs). Steps of 0.2 ms.
    model, _, P = setup
    problem = GestureProblem(model, P, load_synthesis(), step_s=0.01)
    for column in (0, 1):
        X = np.repeat(DESIGN[None], 41, axis=0)
        X[:, column] += 2e-4 * np.arange(-20, 21)
        f, c = problem.evaluate(X)
        for values in (f, c[:, 1]):
            slopes = np.diff(values)
            assert np.all(slopes != 0.0)
            # The slope changes by at most a few percent of its range per step: C¹.
            assert np.abs(np.diff(slopes)).max() <= 0.1 * np.abs(slopes).max()


def test_free_midpoints_add_two_design_variables_that_change_the_gesture(setup) -> None:
    model, _, P = setup
    problem = GestureProblem(model, P, load_synthesis(), free_midpoints=True, steps=200)
    assert problem.names[3:] == ("mid_fraction_flexion", "mid_fraction_extension")
    np.testing.assert_allclose(problem.lower[3:], 0.5 - 35 / 256)
    np.testing.assert_allclose(problem.upper[3:], 0.5 + 35 / 256)
    X = np.array([[*DESIGN, 0.5, 0.5], [*DESIGN, 0.6, 0.5], [*DESIGN, 0.5, 0.4]])
    f, c = problem.evaluate(X)
    # The seed's midpoints reproduce the 3-variable problem exactly.
    base = GestureProblem(model, P, load_synthesis(), steps=200)
    f3, c3 = base.evaluate(DESIGN[None])
    assert f[0] == pytest.approx(f3[0], rel=1e-9) and c[0, 1] == pytest.approx(c3[0, 1], rel=1e-9)
    # Other midpoints are other gestures: the objective and the rotation move.
    assert abs(f[1] - f[0]) > 1.0 and abs(f[2] - f[0]) > 1.0
    assert abs(c[1, 1] - c[0, 1]) > 0.1
    assert problem.design(X[1]).mid_fraction_flexion == 0.6


def test_the_fall_from_the_handstand_is_near_critical(setup) -> None:
    # The physics check of docs/synthesis.md: at the seed's optimum (t_f 2.405 s, t_flexmax
    # 1.468 s, φ_max 160°), changing any lumped-segment parameter by ±20 % moves the rotation at
    # t_f by a few degrees, but a start rate of 4°/s about the bar moves it by more than 100°.
    model, values, _ = setup
    seed = np.array([[2.405, 1.468, np.deg2rad(160.0)]])
    synthesis = load_synthesis()

    def rotation(parameters: dict, rate_deg_s: float = 0.0) -> float:
        problem = GestureProblem(
            model, model.parameter_matrix([parameters]), synthesis, step_s=1e-3, substeps=2,
            start_rate_rad_s=np.deg2rad(rate_deg_s),
        )
        assert problem.start.free_qd0[2] == pytest.approx(np.deg2rad(rate_deg_s))
        return float(problem.evaluate_batch(seed).rotation_deg[0])

    at_rest = rotation(values)
    assert at_rest < 300.0  # the seed's gesture cannot complete the circle from rest here
    for name in ("body.mass", "body.com", "body.inertia", "arm.mass", "arm.inertia"):
        for factor in (0.8, 1.2):
            changed = rotation({**values, name: values[name] * factor})
            assert abs(changed - at_rest) < 10.0, name
    with_rate = rotation(values, 4.0)
    assert with_rate > at_rest + 100.0
    assert 350.0 < with_rate < 372.0
