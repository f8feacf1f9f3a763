"""A Pinocchio model built from the same description: the independent oracle of the tests and
the baseline of the engine benchmark. Pinocchio (PyPI ``pin``) is a test dependency only, so
this bridge lives in tests/ (tests/test_architecture.py: no module outside tests imports it)."""

from __future__ import annotations

import numpy as np

from bemore.errors import ModelError
from bemore.model.core import Model


def build(model: Model, V: np.ndarray):
    """Pinocchio model of ``model`` with field values ``V``; and the permutation that maps
    Pinocchio's coordinate order to bemore's (free, driven): ``q_bemore = q_pin[perm]``."""
    import pinocchio as pin

    tree = model.tree
    pm = pin.Model()
    pm.gravity.linear = np.array([0.0, -V[tree.gravity_field], 0.0])
    joint_of_frame = {}
    order = []
    for k in range(len(tree.frame_parent)):
        if tree.frame_kind[k] == 0:
            raise ModelError(
                f"model {model.name}: fixed joint elements are not bridged to Pinocchio"
            )
        parent = 0 if tree.frame_parent[k] < 0 else joint_of_frame[tree.frame_parent[k]]
        a = tree.frame_angle[k]
        rotation = np.array([[np.cos(a), -np.sin(a), 0], [np.sin(a), np.cos(a), 0], [0, 0, 1]])
        translation = np.array([V[tree.frame_at[k, 0]], V[tree.frame_at[k, 1]], 0.0])
        placement = pin.SE3(rotation, translation)
        if tree.frame_kind[k] == 1:
            joint = (pin.JointModelRZ() if tree.frame_axis[k] == 1
                     else pin.JointModelRevoluteUnaligned(np.array([0.0, 0.0, -1.0])))
        else:
            joint = pin.JointModelPX() if tree.frame_axis[k] == 0 else pin.JointModelPY()
        joint_of_frame[k] = pm.addJoint(parent, joint, placement, f"j{k}")
        if tree.frame_free[k] >= 0:
            order.append(tree.frame_free[k])
        else:
            order.append(model.n_free + tree.frame_driven[k])
    for b, k in enumerate(tree.body_frame):
        m, cx, cy, inertia = V[tree.body_fields[b]]
        body = pin.Inertia(m, np.array([cx, cy, 0.0]), np.diag([inertia, inertia, inertia]))
        pm.appendBodyToJoint(joint_of_frame[k], body, pin.SE3.Identity())
    # order[i] = bemore index of Pinocchio coordinate i → bemore = pin[perm] with perm = argsort
    return pm, np.argsort(np.array(order))


def hybrid_rhs(model: Model, V: np.ndarray, driven):
    """f(t, y) for solve_ivp on Pinocchio: y = (free q, free q̇); ``driven(t)`` → (q, q̇, q̈)."""
    import pinocchio as pin

    pm, perm = build(model, V)
    data = pm.createData()
    inverse = np.argsort(perm)
    nf = model.n_free
    tree = model.tree
    K = np.zeros(nf)
    C = np.zeros(nf)
    rest = np.zeros(nf)
    for i, (k, c, r) in enumerate(tree.spring_fields):
        if k >= 0:
            K[i], C[i], rest[i] = V[k], V[c], V[r]

    def rhs(t, y):
        qd, vd, ad = driven(t)
        q = np.concatenate([y[:nf], qd])[inverse]
        v = np.concatenate([y[nf:], vd])[inverse]
        a = np.concatenate([np.zeros(nf), ad])[inverse]
        M = pin.crba(pm, data, q)
        M = (np.triu(M) + np.triu(M, 1).T)[np.ix_(perm, perm)]
        tau0 = pin.rnea(pm, data, q, v, a)[perm]
        force = -K * (y[:nf] - rest) - C * y[nf:] - tau0[:nf]
        return np.concatenate([y[nf:], np.linalg.solve(M[:nf, :nf], force)])

    return rhs
