"""Build a Pinocchio model from a bemore description (the independent oracle of the tests)."""

from __future__ import annotations

import numpy as np
import pinocchio as pin

from bemore.model.core import Model


def build(model: Model, V: np.ndarray) -> tuple[pin.Model, np.ndarray]:
    """Pinocchio model of ``model`` with field values ``V``; and the permutation that maps
    Pinocchio's coordinate order to bemore's (free, driven): ``q_bemore = q_pin[perm]``."""
    tree = model.tree
    pm = pin.Model()
    pm.gravity.linear = np.array([0.0, -V[tree.gravity_field], 0.0])
    joint_of_frame = {}
    order = []
    for k in range(len(tree.frame_parent)):
        assert tree.frame_kind[k] != 0, "fixed elements are not used in these tests"
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
