"""Physically consistent inertial parameters: the regressor form on noise-free engine data, the
linear estimate, and the log-Cholesky fit that keeps every pseudo-inertia positive definite."""

from __future__ import annotations

import numpy as np
import pytest

from bemore.identify import inertial
from bemore.model import load_model, simulate
from bemore.model.profiles import clear_hip_circle_profile
from tests.identify.synthetic import handstand_start

EDGE = 5  # frames left out at each end (one-sided differences of the free accelerations)


@pytest.fixture(scope="module")
def engine_data():
    """A 1.6 s clear hip circle simulated at 4 steps per 1 ms sample, the seed's body; free
    accelerations by central differences of the simulated rates; the bar force from the bar
    spring-dampers (written out here)."""
    model = load_model("real_gymnast")
    motion = clear_hip_circle_profile(1.6, 1000.0)
    P = model.parameter_matrix([{}])
    q0, qd0 = (a[0] for a in handstand_start(model, P, motion))
    sim = simulate(model, P, motion, q0, qd0, substeps=4)
    qf, vf = sim.free_q[0], sim.free_qd[0]
    af = np.gradient(vf, 1e-3, axis=0, edge_order=2)
    frames = inertial.frame_motion(model, P[0], qf, vf, af, motion.q, motion.qd, motion.qdd)
    Y = inertial.regressor(model, P[0], frames)[EDGE:-EDGE]
    values = model.default_parameters()
    force = np.stack([
        -values[f"bar.stiffness_{a}"] * (qf[:, j] - values[f"bar.rest_{a}"])
        - values[f"bar.damping_{a}"] * vf[:, j] for j, a in enumerate("xy")], axis=1)
    f = np.concatenate([force, np.zeros((len(force), 1))], axis=1)[EDGE:-EDGE]
    return model, P[0], Y, f, inertial.table_parameters(model, P[0])


def test_the_regressor_form_holds_on_engine_data(engine_data) -> None:
    _, _, Y, f, truth = engine_data
    residual = np.einsum("frn,n->fr", Y, truth) - f
    force_rms = np.sqrt(np.mean(f[:, :2] ** 2, axis=0))  # 1.3 / 2.4 kN peaks
    assert np.all(np.sqrt(np.mean(residual[:, :2] ** 2, axis=0)) < 1e-4 * force_rms)
    gravity_moment = np.einsum("fn,n->f", Y[:, 2, 0::4], truth[0::4])  # the masses' terms
    assert np.sqrt(np.mean(residual[:, 2] ** 2)) < 1e-4 * np.sqrt(np.mean(gravity_moment**2))


def test_the_linear_estimate_recovers_what_the_motion_determines(engine_data) -> None:
    _, _, Y, f, truth = engine_data
    wrong_table = truth * 1.3  # the prior pulls only where the data say nothing
    estimate = inertial.linear_estimate(Y, f, wrong_table, prior_weight=1e-10)
    A = Y.reshape(-1, Y.shape[-1])
    assert estimate[0::4].sum() == pytest.approx(truth[0::4].sum(), rel=1e-5)  # 41.773 kg
    _, s, Vt = np.linalg.svd(A, full_matrices=False)
    seen = Vt[s > 1e-3 * s[0]]  # the parameter combinations the trial determines
    assert len(seen) >= 15
    error = seen @ (estimate - truth)
    assert np.linalg.norm(error) < 1e-3 * np.linalg.norm(seen @ truth)
    assert np.linalg.norm(A @ (estimate - truth)) < 1e-4 * np.linalg.norm(A @ truth)
    assert np.all(estimate[0::4] >= 0.0) and np.all(estimate[3::4] >= 0.0)


def test_log_cholesky_fit_keeps_every_pseudo_inertia_positive_definite(engine_data) -> None:
    model, _, Y, f, truth = engine_data
    start = inertial.log_cholesky_of(truth)
    np.testing.assert_allclose(inertial.parameters_of(inertial.pseudo_inertia(start)), truth,
                               rtol=1e-10, atol=1e-12)
    A = Y.reshape(-1, Y.shape[-1])
    b = f.reshape(-1)
    rng = np.random.default_rng(0)
    errors, converged = [], 0
    for _ in range(50):
        theta0 = start + rng.normal(0.0, 0.5, start.shape)
        fit = inertial.consistent_fit(Y, f, truth, theta0, prior_weight=1e-10,
                                      theta_reference=start, max_nfev=100)
        eigenvalues = np.linalg.eigvalsh(fit.J)
        # Positive definite beyond rounding: J's entries are O(1) kg·m⁰…², eigvalsh's error
        # O(1e-16) of the largest eigenvalue.
        assert np.all(np.isfinite(fit.J)), fit.J
        assert np.all(eigenvalues > 1e-12 * eigenvalues.max(axis=1, keepdims=True)), \
            eigenvalues.min()
        masses = fit.parameters[0::4]
        assert np.all(masses > 0.0)
        centre_sq = (fit.parameters[1::4] ** 2 + fit.parameters[2::4] ** 2) / masses
        assert np.all(fit.parameters[3::4] > centre_sq)  # inertia about the CoM > 0
        start_pi = inertial.parameters_of(inertial.pseudo_inertia(theta0))
        assert fit.residual_rms < np.sqrt(np.mean((A @ start_pi - b) ** 2))
        errors.append(np.linalg.norm(A @ (fit.parameters - truth)) / np.linalg.norm(A @ truth))
        converged += fit.status > 0
    # The fits that converge reproduce the truth's forces and moment (noise-free data). With
    # no prior (1e-10) the motion's unseen combinations are held only by the weak pull towards
    # the start: 27 of these 50 converge within 100 evaluations.
    assert converged >= 20 and min(errors) < 1e-4
    rows = inertial.table_comparison(model, fit.parameters, truth)
    assert [row["body"] for row in rows][:2] == ["bar", "hand"]
    trunk = next(row for row in rows if row["body"] == "trunk")
    assert trunk["table"]["mass_kg"] == pytest.approx(truth[4 * 4], rel=1e-12)


def test_a_distribution_no_body_has_is_refused() -> None:
    from bemore.errors import DataError

    with pytest.raises(DataError, match="no mass distribution"):
        inertial.log_cholesky_of(np.array([1.0, 0.5, 0.0, 0.2]))  # I_o < m·|c|²
