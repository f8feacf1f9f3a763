"""Joint centres in the model plane → the model's driven coordinates and free state.

The formulas are those of docs/model.md ("definition from joint centres"); angles in rad,
lengths in m. Angles are wrapped to (−π, π] then unwrapped over time, so they are continuous.

The measured ``shoulder`` (acromion markers) is the ARM side of the shoulder spring-damper, the
end of the upper arm (``arm_end`` below); the trunk side, the model's shoulder joint, is seen as
``neck`` (docs/model.md §2). So the upper arm runs elbow → shoulder and the trunk neck → hip,
and the spring's translation is ``neck − shoulder`` in the upper arm's frame.
"""

from __future__ import annotations

import numpy as np

from bemore.trial.markerset import POINT_NAMES

DRIVEN_NAMES = ("wrist", "forearm_length", "elbow", "upper_arm_length", "shoulder_flexion",
                "neck", "hip", "knee", "ankle")
FREE_NAMES = ("bar_x", "bar_y", "hand_rotation", "shoulder_ap", "shoulder_pd")
_ANGLES = [0, 2, 4, 5, 6, 7, 8]  # driven coordinates that are angles (the others are lengths)


def wrap(angle: np.ndarray) -> np.ndarray:
    """Angle(s) in rad mapped to (−π, π]."""
    return np.pi - np.mod(np.pi - angle, 2.0 * np.pi)


def _direction(points: np.ndarray, start: str, end: str) -> np.ndarray:
    """Absolute angle (rad) of the vector from point ``start`` to point ``end``, per frame."""
    d = points[..., POINT_NAMES.index(end), :] - points[..., POINT_NAMES.index(start), :]
    return np.arctan2(d[..., 1], d[..., 0])


def _distance(points: np.ndarray, start: str, end: str) -> np.ndarray:
    """Distance (m) between two named points, per frame."""
    d = points[..., POINT_NAMES.index(end), :] - points[..., POINT_NAMES.index(start), :]
    return np.hypot(d[..., 0], d[..., 1])


def segment_angles(points: np.ndarray) -> dict[str, np.ndarray]:
    """Absolute segment angles (rad) from (F, 10, 2) plane points in POINT_NAMES order."""
    return {
        "hand": _direction(points, "bar", "wrist"),
        "forearm": _direction(points, "wrist", "elbow"),
        "upper_arm": _direction(points, "elbow", "shoulder"),
        "trunk": _direction(points, "neck", "hip"),
        "head": _direction(points, "neck", "head_top"),
        "thigh": _direction(points, "hip", "knee"),
        "shank": _direction(points, "knee", "ankle"),
        "foot": _direction(points, "ankle", "toe"),
    }


def driven_from_points(points: np.ndarray) -> np.ndarray:
    """(F, 9) driven coordinates (rad, m; DRIVEN_NAMES order) from (F, 10, 2) plane points (m);
    (F, …, 10, 2) points give (F, …, 9) (e.g. several realisations of one trial).

    Angles are continuous over the frames (unwrapped), starting in (−π, π].
    """
    a = segment_angles(points)
    q = np.stack(
        [
            wrap(a["forearm"] - a["hand"]),
            _distance(points, "wrist", "elbow"),
            wrap(a["upper_arm"] - a["forearm"]),
            _distance(points, "elbow", "shoulder"),
            wrap(a["upper_arm"] - a["trunk"]),
            wrap(a["head"] - a["trunk"] - np.pi),
            wrap(a["trunk"] - a["thigh"]),
            wrap(a["shank"] - a["thigh"]),
            wrap(a["foot"] - a["shank"] + np.pi / 2),
        ],
        axis=-1,
    )
    q[..., _ANGLES] = np.unwrap(q[..., _ANGLES], axis=0)
    return q


def free_from_points(points: np.ndarray) -> np.ndarray:
    """(F, 5) free coordinates (FREE_NAMES order) seen in (F, 10, 2) plane points (m);
    (F, …, 10, 2) points give (F, …, 5).

    bar_x, bar_y: the bar joint centre (m, from the origin = bar rest position);
    hand_rotation: angle of (wrist − bar), continuous over the frames (rad, π/2 in a handstand);
    shoulder_ap, shoulder_pd: ``neck − shoulder`` (trunk side minus arm side of the shoulder
    spring) along the upper arm's y and x axes (m); 0 when the two points coincide (as in the
    engine's own points, whose ``shoulder`` is the trunk side).
    """
    bar = points[..., POINT_NAMES.index("bar"), :]
    rotation = np.unwrap(_direction(points, "bar", "wrist"), axis=0)
    upper_arm = _direction(points, "elbow", "shoulder")
    d = points[..., POINT_NAMES.index("neck"), :] - points[..., POINT_NAMES.index("shoulder"), :]
    c, s = np.cos(upper_arm), np.sin(upper_arm)
    pd = c * d[..., 0] + s * d[..., 1]
    ap = -s * d[..., 0] + c * d[..., 1]
    return np.stack([bar[..., 0], bar[..., 1], rotation, ap, pd], axis=-1)


def arm_end(points: np.ndarray, free_q: np.ndarray, driven_q: np.ndarray) -> np.ndarray:
    """(F, 2) end of the upper arm (m): ``elbow + upper_arm_length·x_upper_arm``, the arm side
    of the shoulder spring, where the acromion markers ride.

    ``points``: (F, 10, 2) engine points (m); ``free_q`` (F, 5) and ``driven_q`` (F, 9) the
    coordinates (rad, m) with α_upper_arm = hand_rotation + wrist + elbow (docs/model.md).
    """
    angle = free_q[:, FREE_NAMES.index("hand_rotation")] + driven_q[:, 0] + driven_q[:, 2]
    length = driven_q[:, DRIVEN_NAMES.index("upper_arm_length")]
    elbow = points[:, POINT_NAMES.index("elbow")]
    return elbow + length[:, None] * np.stack([np.cos(angle), np.sin(angle)], axis=-1)
