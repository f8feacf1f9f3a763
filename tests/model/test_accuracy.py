"""The batch integrator against a tight Radau reference, at the seed's identified parameters."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.integrate import solve_ivp

from bemore.model import joint_centre_cost, simulate
from bemore.model.profiles import CLEAR_HIP_CIRCLE, raised_cosine


def _driven_exact(t: float, duration: float):
    """The profile's analytic driven state at any time t (independent of the sampling)."""
    s, sd, sdd = raised_cosine(np.asarray(t), duration)
    base = np.array([v[0] for v in CLEAR_HIP_CIRCLE.values()])
    amp = np.array([v[1] for v in CLEAR_HIP_CIRCLE.values()])
    return base + s * amp, sd * amp, sdd * amp


@pytest.mark.slow
def test_points_within_a_tenth_of_a_millimetre_of_radau(real, motion, start):
    P = real.parameter_matrix([{}])
    q0, v0 = start
    sim = simulate(real, P, motion, q0, v0)
    assert sim.valid.all()
    duration = motion.t[-1]
    nf = real.n_free

    def rhs(t, y):
        qd, vd, ad = _driven_exact(t, duration)
        acc, _ = real.hybrid(P, y[None, :nf], y[None, nf:], qd[None], vd[None], ad[None])
        return np.concatenate([y[nf:], acc[0]])

    reference = solve_ivp(rhs, (0.0, duration), np.concatenate([q0, v0]), method="Radau",
                          rtol=1e-10, atol=1e-12, t_eval=motion.t)
    assert reference.success
    q_ref = np.concatenate([reference.y[:nf].T, motion.q], axis=1)
    points_ref = real.point_positions(P, q_ref)[0]
    error = np.linalg.norm(sim.points[0] - points_ref, axis=-1)
    # The gymnast really moves: the toes travel more than a metre.
    assert np.ptp(points_ref[:, real.point_names.index("toe"), 0]) > 1.0
    assert error.max() < 1e-4, error.max()
    # Free coordinates too (m and rad).
    assert np.max(np.abs(sim.free_q[0] - reference.y[:nf].T)) < 1e-4
    # Steps of two samples (h = 2 ms, frames between step ends interpolated): ≈ 0.054 mm.
    coarse = simulate(real, P, motion, q0, v0, outputs=("points",), samples_per_step=2)
    error2 = np.linalg.norm(coarse.points[0] - points_ref, axis=-1)
    assert error2.max() < 1e-4, error2.max()
    assert error2[1::2].max() < 1.1 * error2[::2].max()  # interpolated frames as good
    assert error2.max() > error.max()  # a real trade: the coarser step is less accurate


def test_generated_kernel_agrees_with_the_reference_kernel(real, motion, start):
    P = real.parameter_matrix([{}, {"bar.stiffness_x": 5000.0, "shoulder.damping_ap": 50000.0,
                                    "shoulder.damping_pd": 10.0}, {"trunk.mass": 28.0}])
    q0, v0 = start
    fast = simulate(real, P, motion, q0, v0, outputs=("free_q", "points"), engine="generated")
    ref = simulate(real, P, motion, q0, v0, outputs=("free_q", "points"), engine="reference")
    assert fast.valid.tolist() == ref.valid.tolist() == [True, True, False]
    assert np.max(np.abs(fast.free_q[:2] - ref.free_q[:2])) < 1e-11
    assert np.max(np.abs(fast.points[:2] - ref.points[:2])) < 1e-11
    assert np.all(np.isnan(fast.points[2]))
    # The cost path (nothing stored) gives the same cost as the stored points.
    measured = ref.points[0][:, [real.point_names.index(p) for p in
                                 ("bar", "wrist", "elbow", "neck", "hip", "knee", "ankle")]]
    measured = measured + 0.01  # 1 cm off in x and y at every point: 2e-4 m² per point-frame
    measured[100:110, 3] = np.nan  # missing samples are skipped
    cost = joint_centre_cost(real, P[:1], motion, q0, v0, measured)
    expected = 2e-4 * (7 * len(motion.t) - 10)
    assert abs(cost[0] - expected) < 1e-9 * expected
    with_ref = simulate(real, P[:1], motion, q0, v0, outputs=(), measured=measured,
                        engine="reference").cost
    assert abs(with_ref[0] - expected) < 1e-9 * expected
