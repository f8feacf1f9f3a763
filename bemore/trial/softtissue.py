"""Soft-tissue artefact: how the markers of a joint centre may slide on the skin.

A skin marker is not fixed to the bone: over a joint the skin slides as the joint turns, by
millimetres over bony landmarks and by centimetres over the thigh (reviews: Leardini et al.
2005, Peters et al. 2010, both of the lower limb). The slide follows the motion: a fit follows a
marker that slides with the joint by moving its parameters, and what it leaves in the residuals
stays within the fit verdict's limit up to slides of about the budget. It is counted as an input
of known size instead (GUM type B, :mod:`bemore.identify.propagation`, "Soft tissue").

The form taken here: the markers of one joint centre's recipe (``configs/markerset.toml``
``[joint_centres]``) move together, in one direction of the study plane, by the standard
uncertainty times the joint's angle normalised over the trial (−1 and +1 at the ends of its
range, 0 midway) — the first term of a dependence on the joint angle, a form assumed here (a
study with 40 markers per segment found the thigh's main artefact modes to follow the knee's
flexion closely, J Biomech 62:21, 2017). Two directions of the plane per joint
centre, independent: a slide of that size in any in-plane direction. Each joint centre's
markers follow the joint they sit over (:data:`SITS_OVER`), its angle measured between the
two segments that meet there, from the trial's filtered markers.
"""

from __future__ import annotations

import numpy as np

# The joint each joint centre's markers sit over, as (proximal point, joint, distal point) of
# the model's named points: the angle at the joint between the two segments. The acromions
# (shoulder) and C7/sternum (neck) move with the shoulder girdle as the arm rises.
SITS_OVER = {
    "wrist": ("elbow", "wrist", "bar"),
    "elbow": ("shoulder", "elbow", "wrist"),
    "shoulder": ("hip", "neck", "elbow"),
    "neck": ("hip", "neck", "elbow"),
    "hip": ("neck", "hip", "knee"),
    "knee": ("hip", "knee", "ankle"),
    "ankle": ("knee", "ankle", "toe"),
}
MIN_RANGE_RAD = 1e-3  # a joint that turns less than this over the trial gives no slide pattern


def joint_angle_rad(points: np.ndarray, proximal: int, joint: int, distal: int) -> np.ndarray:
    """(F,) rad: the signed angle at ``joint`` from the segment towards ``proximal`` to the one
    towards ``distal``, in the plane of ``points`` (F, P, 2) m, unwrapped over the frames.

    >>> points = np.array([[[0.0, 1.0], [0.0, 0.0], [1.0, 0.0]],
    ...                    [[0.0, 1.0], [0.0, 0.0], [0.0, -1.0]]])
    >>> joint_angle_rad(points, 0, 1, 2).round(4).tolist()   # 90° then 180°
    [-1.5708, -3.1416]
    """
    a = points[:, proximal] - points[:, joint]
    b = points[:, distal] - points[:, joint]
    cross = a[:, 0] * b[:, 1] - a[:, 1] * b[:, 0]
    return np.unwrap(np.arctan2(cross, np.sum(a * b, axis=1)))


def slide_pattern(angle_rad: np.ndarray) -> np.ndarray:
    """(F,) the angle normalised over the trial: −1 and +1 at the ends of its range, 0 midway;
    zeros when the joint barely turns (range below :data:`MIN_RANGE_RAD`).

    >>> slide_pattern(np.array([0.0, 0.5, 2.0])).tolist()
    [-1.0, -0.5, 1.0]
    """
    angle = np.asarray(angle_rad, dtype=float)
    span = float(np.ptp(angle))
    if span < MIN_RANGE_RAD:
        return np.zeros_like(angle)
    return (angle - float(angle.min()) - 0.5 * span) / (0.5 * span)


def soft_tissue_members(centres_plane: np.ndarray, point_names: tuple[str, ...],
                        weights: np.ndarray, plane_axes: np.ndarray,
                        uncertainty_mm: dict[str, float],
                        sits_over: dict[str, tuple[str, str, str]] | None = None
                        ) -> tuple[tuple[str, ...], np.ndarray] | None:
    """The soft-tissue members: (their labels, e.g. ``"hip x"``; the markers' displacements
    (n, F, M, 3) m, each one standard uncertainty). ``centres_plane`` (F, P, 2) m: the trial's
    named points in the study plane (``point_names`` order, from the filtered markers);
    ``weights`` (P', M): each point as a mean of the M markers (rows in ``point_names``
    order); ``plane_axes`` (3, 3): rows e_x, e_y, e_z of the plane in lab coordinates;
    ``uncertainty_mm``: the slide's standard uncertainty per joint centre (mm; absent or 0:
    none); ``sits_over``: the joint each joint centre's markers follow (default
    :data:`SITS_OVER`). None when no joint centre has one.

    >>> names = ("a", "hip", "b")
    >>> centres = np.array([[[0.0, 1.0], [0.0, 0.0], [1.0, 0.0]],
    ...                     [[0.0, 1.0], [0.0, 0.0], [0.0, -1.0]]])
    >>> weights = np.eye(3)
    >>> labels, moves = soft_tissue_members(centres, names, weights, np.eye(3), {"hip": 2.0},
    ...                                     sits_over={"hip": ("a", "hip", "b")})
    >>> labels
    ('hip x', 'hip y')
    >>> (moves[0, :, 1, 0] * 1e3).round(6).tolist()   # the hip marker, along x: ∓ 2 mm
    [2.0, -2.0]
    """
    labels: list[str] = []
    moves: list[np.ndarray] = []
    index = {name: k for k, name in enumerate(point_names)}
    frames, markers = centres_plane.shape[0], weights.shape[1]
    for point, joints in (SITS_OVER if sits_over is None else sits_over).items():
        size_m = 1e-3 * float(uncertainty_mm.get(point, 0.0) or 0.0)
        if size_m <= 0.0 or point not in index or not all(j in index for j in joints):
            continue
        pattern = slide_pattern(joint_angle_rad(centres_plane, *(index[j] for j in joints)))
        if not pattern.any():
            continue
        riding = weights[index[point]] > 0.0  # the recipe's markers
        for axis, direction in zip("xy", plane_axes[:2], strict=True):
            move = np.zeros((frames, markers, 3))
            move[:, riding] = (size_m * pattern)[:, None, None] * direction
            labels.append(f"{point} {axis}")
            moves.append(move)
    if not moves:
        return None
    return tuple(labels), np.array(moves)
