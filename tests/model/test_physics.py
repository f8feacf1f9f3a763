"""Physical checks with closed forms: energy conservation, a pendulum, bar deflection."""

from __future__ import annotations

import numpy as np

from bemore.model import DrivenMotion, Model, simulate, straight_posture
from bemore.model.description import parse_description

G = 9.81


def _still(model, q_driven, duration_s, rate_hz=1000.0) -> DrivenMotion:
    """Driven coordinates held still."""
    t = np.arange(round(duration_s * rate_hz) + 1) / rate_hz
    q = np.tile(np.asarray(q_driven, dtype=float), (len(t), 1)).reshape(len(t), model.n_driven)
    return DrivenMotion(t, q, np.zeros_like(q), np.zeros_like(q))


def test_energy_is_conserved_without_damping_or_driven_motion(real):
    undamped = {name: 0.0 for name in real.parameter_names if "damping" in name}
    P = real.parameter_matrix([undamped])
    posture = straight_posture(real)
    posture[real.driven_coordinates.index("hip")] = 0.6  # a pike, to make the tree asymmetric
    motion = _still(real, posture, 1.52)
    q0 = np.array([0.0, -0.01, np.pi / 2 + 0.4, 0.002, 0.01])
    v0 = np.array([0.0, 0.0, 1.0, 0.0, 0.0])
    sim = simulate(real, P, motion, q0, v0, outputs=("free_q", "free_qd"), substeps=16)
    assert sim.valid.all()
    qf, vf = sim.free_q[0], sim.free_qd[0]
    qd = motion.q
    total = real.energy(P, qf, vf, qd, np.zeros_like(qd))
    kinetic = total - real.energy(P, qf, np.zeros_like(vf), qd, np.zeros_like(qd))
    # The gymnast swings through the bottom: the kinetic energy varies by hundreds of joules.
    assert np.ptp(kinetic) > 200.0
    drift = np.max(np.abs(total - total[0]))
    assert drift < 1e-6 * np.ptp(kinetic), (drift, np.ptp(kinetic))


PENDULUM = {
    "name": "pendulum",
    "parameters": {"rod.mass": "2.0 kg"},
    "bodies": {"rod": {"parent": "world", "joint": {"type": "revolute", "coordinate": "swing"},
                       "mass": "rod.mass", "inertia": "0.3 kg·m²", "com": ["0.4 m", 0.0]}},
    "points": {"tip": {"body": "rod", "at": ["0.8 m", 0.0]}},
}


def test_pendulum_from_top_to_bottom_matches_the_closed_form():
    model = Model(parse_description(PENDULUM, "pendulum"))
    m, r, inertia = 2.0, 0.4, 0.3
    omega0 = 0.5
    motion = _still(model, [], 2.0)
    sim = simulate(model, model.parameter_matrix([{}]), motion, [np.pi / 2], [omega0],
                   substeps=10)
    theta, omega = sim.free_q[0, :, 0], sim.free_qd[0, :, 0]
    i = int(np.argmax(theta > 1.5 * np.pi))  # first sample past the bottom
    assert 0 < i < len(theta) - 1
    w = (1.5 * np.pi - theta[i - 1]) / (theta[i] - theta[i - 1])
    omega1 = (1 - w) * omega[i - 1] + w * omega[i]
    expected = np.sqrt(omega0**2 + 4 * m * G * r / (inertia + m * r**2))
    assert abs(omega1 - expected) / expected < 1e-6, (omega1, expected)


def test_static_bar_deflection_is_total_weight_over_stiffness(real):
    P = real.parameter_matrix([{"bar.stiffness_y": 20000.0, "shoulder.stiffness_pd": 30000.0}])
    free = np.zeros(real.n_free)
    free[2] = -np.pi / 2  # hanging straight down below the bar
    q = real.equilibrium(P, straight_posture(real), free_q=free)[0]
    total_mass = 0.675 + 2 * (0.396 + 1.188 + 1.387 + 4.952 + 1.089 + 0.990) + 17.529 + 3.565
    assert abs(q[1] - (-total_mass * G / 20000.0)) < 1e-9
    assert abs(q[0]) < 1e-12
    # The shoulder's proximo-distal spring carries everything below the shoulders.
    below = total_mass - 0.675 - 2 * (0.396 + 1.188 + 1.387)
    assert abs(q[4] - below * G / 30000.0) < 1e-9
    assert abs(q[3]) < 1e-12


def test_equilibrium_start_has_no_spring_transient(real):
    """From handstand (slightly past vertical), springs at equilibrium barely move in 30 ms;
    started at their rest values they jump by millimetres."""
    P = real.parameter_matrix([{}])
    posture = straight_posture(real)
    motion = _still(real, posture, 0.03)
    free = np.zeros(real.n_free)
    free[2] = np.pi / 2 + 0.05
    q0 = real.equilibrium(P, posture, free_q=free)[0]
    assert -0.02 < q0[1] < -0.005 and q0[4] < -0.005  # bar pressed down, shoulders compressed
    springs = [0, 1, 3, 4]
    settled = simulate(real, P, motion, q0, np.zeros(5), outputs=("free_q",)).free_q[0]
    assert np.max(np.abs(settled[:, springs] - q0[springs])) < 1e-6
    jolted = simulate(real, P, motion, free, np.zeros(5), outputs=("free_q",)).free_q[0]
    assert np.max(np.abs(jolted[:, springs] - free[springs])) > 1e-3
