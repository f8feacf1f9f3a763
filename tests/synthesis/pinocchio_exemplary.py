"""Test oracle: the exemplary gymnast rebuilt in Pinocchio, independent of bemore's engine.

Geometry from docs/model.md and configs/models/exemplary_gymnast.toml: bar point mass on x/y
prismatic joints, the arm hinged at the bar (hand_rotation), the shoulder translations (ap along
the arm's y, pd along its x) at 0.571 m from the bar, then shoulder flexion about −z. Coordinate
order = bemore's: bar_x, bar_y, hand_rotation, shoulder_ap, shoulder_pd, shoulder_flexion.
"""

from __future__ import annotations

import numpy as np
import pinocchio as pin

ARM_LENGTH_M = 0.571
BAR_INERTIA_KGM2 = 0.001
GRAVITY_M_S2 = 9.81
SPRINGS = {  # free coordinate index → (stiffness name, damping name)
    0: ("bar.stiffness_x", "bar.damping_x"),
    1: ("bar.stiffness_y", "bar.damping_y"),
    3: ("shoulder.stiffness_ap", "shoulder.damping_ap"),
    4: ("shoulder.stiffness_pd", "shoulder.damping_pd"),
}


def _planar_inertia(mass: float, com_x: float, inertia_z: float) -> pin.Inertia:
    """Body inertia: mass, CoM on the body's x axis, inertia about z at the CoM."""
    return pin.Inertia(mass, np.array([com_x, 0.0, 0.0]), np.diag([1e-9, 1e-9, inertia_z]))


def build(parameters: dict[str, float]) -> pin.Model:
    """The Pinocchio model of the exemplary gymnast for parameters by name (SI)."""
    model = pin.Model()
    model.gravity.linear = np.array([0.0, -GRAVITY_M_S2, 0.0])
    identity = pin.SE3.Identity()
    bar_x = model.addJoint(0, pin.JointModelPX(), identity, "bar_x")
    model.appendBodyToJoint(bar_x, pin.Inertia.Zero(), identity)
    bar_y = model.addJoint(bar_x, pin.JointModelPY(), identity, "bar_y")
    model.appendBodyToJoint(
        bar_y, _planar_inertia(parameters["bar.mass"], 0.0, BAR_INERTIA_KGM2), identity
    )
    arm = model.addJoint(bar_y, pin.JointModelRZ(), identity, "hand_rotation")
    model.appendBodyToJoint(
        arm,
        _planar_inertia(parameters["arm.mass"], parameters["arm.com"], parameters["arm.inertia"]),
        identity,
    )
    at_shoulder = pin.SE3(np.eye(3), np.array([ARM_LENGTH_M, 0.0, 0.0]))
    ap = model.addJoint(arm, pin.JointModelPY(), at_shoulder, "shoulder_ap")
    model.appendBodyToJoint(ap, pin.Inertia.Zero(), identity)
    pd = model.addJoint(ap, pin.JointModelPX(), identity, "shoulder_pd")
    model.appendBodyToJoint(pd, pin.Inertia.Zero(), identity)
    flexion = model.addJoint(
        pd,
        pin.JointModelRevoluteUnaligned(np.array([0.0, 0.0, -1.0])),
        identity,
        "shoulder_flexion",
    )
    model.appendBodyToJoint(
        flexion,
        _planar_inertia(
            parameters["body.mass"], parameters["body.com"], parameters["body.inertia"]
        ),
        identity,
    )
    return model


def hybrid_torque(
    model: pin.Model,
    parameters: dict[str, float],
    q: np.ndarray,
    v: np.ndarray,
    driven_acceleration: np.ndarray,
) -> np.ndarray:
    """Shoulder torque (N,) N·m by inverse dynamics at N states (N, 6) / (N, 6).

    The free accelerations are those the springs and gravity produce while the shoulder
    follows ``driven_acceleration`` (N,): M_ff a_f = τ_springs − b_f − M_fd a_d (CRBA + RNEA),
    then the torque is RNEA(q, v, [a_f, a_d]) on the shoulder coordinate.
    """
    data = model.createData()
    torque = np.empty(len(q))
    for i in range(len(q)):
        M = pin.crba(model, data, q[i]).copy()
        M = np.triu(M) + np.triu(M, 1).T
        bias = pin.rnea(model, data, q[i], v[i], np.zeros(6)).copy()
        springs = np.zeros(5)
        for j, (k, d) in SPRINGS.items():
            springs[j] = -parameters[k] * q[i, j] - parameters[d] * v[i, j]
        rhs = springs - bias[:5] - M[:5, 5] * driven_acceleration[i]
        free_acc = np.linalg.solve(M[:5, :5], rhs)
        a = np.append(free_acc, driven_acceleration[i])
        torque[i] = pin.rnea(model, data, q[i], v[i], a)[5]
    return torque


def rnea_torque(model: pin.Model, q: np.ndarray, v: np.ndarray, a: np.ndarray) -> np.ndarray:
    """Shoulder torque (N,) N·m by RNEA for given full accelerations (N, 6)."""
    data = model.createData()
    return np.array([pin.rnea(model, data, q[i], v[i], a[i])[5] for i in range(len(q))])
