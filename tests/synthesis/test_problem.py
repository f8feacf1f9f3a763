"""The gesture problem on the exemplary gymnast: start state, objective, independent torque."""

from __future__ import annotations

import numpy as np
import pytest

from bemore.model import exemplary_parameters, load_model
from bemore.settings import load_synthesis
from bemore.synthesis.gesture import GestureParameters, sample_gesture
from bemore.synthesis.problem import GestureProblem, objective_value
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
    # Pinocchio: zero acceleration of every free coordinate at rest in this state.
    oracle = pinocchio_exemplary.build(values)
    q = np.append(q0, 0.0)[None]
    torque = pinocchio_exemplary.hybrid_torque(oracle, values, q, np.zeros((1, 6)), np.zeros(1))
    # Static torque holding the body in line with the arms: zero for a vertical handstand.
    assert abs(torque[0]) < 1e-6


def test_torque_and_objective_agree_with_pinocchio_inverse_dynamics(setup) -> None:
    model, values, P = setup
    problem = GestureProblem(model, P, load_synthesis(), steps=1480, substeps=2)
    t = np.linspace(0.0, DESIGN[0], problem.steps + 1)
    torque, free_q, free_qd, _, ok = problem.simulate_design(DESIGN, t, substeps=2)
    assert ok
    angle, velocity, acceleration, _ = sample_gesture(GestureParameters(*DESIGN), t)
    q = np.column_stack([free_q, angle])
    v = np.column_stack([free_qd, velocity])
    oracle = pinocchio_exemplary.build(values)
    rebuilt = pinocchio_exemplary.hybrid_torque(oracle, values, q, v, acceleration)
    peak = np.abs(rebuilt).max()
    assert peak > 100.0  # a real gesture: hundreds of N·m
    assert np.abs(torque - rebuilt).max() <= 1e-6 * peak
    f, c = problem.evaluate(DESIGN[None])
    independent = np.sum(0.5 * (np.abs(rebuilt[1:]) + np.abs(rebuilt[:-1])) * np.diff(t))
    assert f[0] == pytest.approx(independent, rel=1e-6)
    assert c[0, 0] == pytest.approx(DESIGN[0] - DESIGN[1])
    assert c[0, 1] == pytest.approx(np.rad2deg(free_q[-1, 2] - free_q[0, 2]), rel=1e-12)


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


def test_rotation_is_smooth_in_the_design(setup) -> None:
    # The grid stretches with t_f, so a tiny change of t_f changes the rotation by a tiny,
    # proportional amount (what finite-difference gradients need).
    model, _, P = setup
    problem = GestureProblem(model, P, load_synthesis(), steps=300)
    X = DESIGN + np.array([[0.0, 0, 0], [1e-6, 0, 0], [2e-6, 0, 0]])
    _, c = problem.evaluate(X)
    first, second = np.diff(c[:, 1])
    assert first != 0.0
    assert second == pytest.approx(first, rel=1e-3)


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
    assert f[0] == f3[0] and c[0, 1] == c3[0, 1]
    # Other midpoints are other gestures: the objective and the rotation move.
    assert abs(f[1] - f[0]) > 1.0 and abs(f[2] - f[0]) > 1.0
    assert abs(c[1, 1] - c[0, 1]) > 0.1
    assert problem.design(X[1]).mid_fraction_flexion == 0.6
