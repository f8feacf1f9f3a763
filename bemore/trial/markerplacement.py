"""Synthetic marker placement: the full marker set of docs/markerset.md around the
model's named points, in a 3D laboratory frame (Z up, bar along Y), in m.

Each marker sits at a site given in its segment's frame (docs/model.md: origin at the bar-side
joint, x along the segment, y dorsal) plus an offset to the gymnast's left along the bar (m;
the model's z = x × y points to her right, the chest facing +x).
The sites of the markers a joint-centre recipe averages are symmetric about that
joint centre (in the plane and left/right), so the recipes of configs/markerset.toml give back
the model's points exactly before noise; the technical markers are plausible skin sites.

The upper arm's sites (R/L_TRICEPS) ride on the arm itself: its frame runs from the elbow to the
arm's END (the arm side of the shoulder spring-dampers), wherever the acromion markers ride, and
their distance along the arm follows its apparent length (a projection: an arm turning out of
the plane shortens both), from the first frame's.
"""

from __future__ import annotations

import numpy as np

from bemore.trial.coordinates import segment_angles
from bemore.trial.markerset import POINT_NAMES

# label: (segment whose frame holds the site, point the site is relative to, x, y, left) in m.
SITES: dict[str, tuple[str, str, float, float, float]] = {
    "HEAD_TOP": ("head", "head_top", 0.0, 0.0, 0.0),
    "R_TEMPLE": ("head", "neck", 0.15, -0.02, -0.07),
    "L_TEMPLE": ("head", "neck", 0.15, -0.02, 0.07),
    "C7": ("trunk", "neck", 0.0, 0.06, 0.0),
    "STERNUM": ("trunk", "neck", 0.0, -0.06, 0.0),
    "T10": ("trunk", "neck", 0.20, 0.09, 0.0),
    "XIPHOID": ("trunk", "neck", 0.17, -0.10, 0.0),
    "R_ACROMION": ("trunk", "shoulder", 0.0, 0.0, -0.18),
    "L_ACROMION": ("trunk", "shoulder", 0.0, 0.0, 0.18),
    "R_TRICEPS": ("upper_arm", "elbow", 0.15, 0.04, -0.20),
    "L_TRICEPS": ("upper_arm", "elbow", 0.15, 0.04, 0.20),
    "R_ELBOW": ("forearm", "elbow", 0.0, 0.0, -0.24),
    "L_ELBOW": ("forearm", "elbow", 0.0, 0.0, 0.24),
    "R_RADIUS": ("forearm", "wrist", 0.0, 0.012, -0.27),
    "R_ULNA": ("forearm", "wrist", 0.0, -0.012, -0.21),
    "L_RADIUS": ("forearm", "wrist", 0.0, 0.012, 0.27),
    "L_ULNA": ("forearm", "wrist", 0.0, -0.012, 0.21),
    "R_MC2": ("hand", "bar", 0.03, 0.03, -0.22),
    "R_MC5": ("hand", "bar", 0.03, 0.03, -0.29),
    "L_MC2": ("hand", "bar", 0.03, 0.03, 0.22),
    "L_MC5": ("hand", "bar", 0.03, 0.03, 0.29),
    "R_L5": ("trunk", "hip", -0.08, 0.10, -0.03),
    "L_L5": ("trunk", "hip", -0.08, 0.10, 0.03),
    "R_PSIS": ("trunk", "hip", -0.05, 0.08, -0.05),
    "L_PSIS": ("trunk", "hip", -0.05, 0.08, 0.05),
    "R_TROCHANTER": ("thigh", "hip", 0.0, 0.0, -0.17),
    "L_TROCHANTER": ("thigh", "hip", 0.0, 0.0, 0.17),
    "R_QUADRICEPS": ("thigh", "hip", 0.22, -0.08, -0.10),
    "L_QUADRICEPS": ("thigh", "hip", 0.22, -0.08, 0.10),
    "R_KNEE_LAT": ("thigh", "knee", 0.0, 0.0, -0.12),
    "R_KNEE_MED": ("thigh", "knee", 0.0, 0.0, -0.02),
    "L_KNEE_LAT": ("thigh", "knee", 0.0, 0.0, 0.12),
    "L_KNEE_MED": ("thigh", "knee", 0.0, 0.0, 0.02),
    "R_TIBIA": ("shank", "knee", 0.18, -0.05, -0.08),
    "L_TIBIA": ("shank", "knee", 0.18, -0.05, 0.08),
    "R_ANKLE_LAT": ("shank", "ankle", 0.0, 0.0, -0.10),
    "R_ANKLE_MED": ("shank", "ankle", 0.0, 0.0, -0.03),
    "L_ANKLE_LAT": ("shank", "ankle", 0.0, 0.0, 0.10),
    "L_ANKLE_MED": ("shank", "ankle", 0.0, 0.0, 0.03),
    "R_MT1": ("foot", "toe", 0.0, 0.0, -0.04),
    "R_MT5": ("foot", "toe", 0.0, 0.0, -0.10),
    "L_MT1": ("foot", "toe", 0.0, 0.0, 0.04),
    "L_MT5": ("foot", "toe", 0.0, 0.0, 0.10),
    "R_HEEL": ("foot", "ankle", -0.05, 0.04, -0.07),
    "L_HEEL": ("foot", "ankle", -0.05, 0.04, 0.07),
}
BAR_RADIUS_M = 0.014
# BAR_01…BAR_12 from one end of the bar to the other: (distance along the bar m, angle round
# it rad). Each ±distance pair shares an angle and each angle has its opposite, so the bar
# markers' centroid is on the axis and their principal direction is the axis itself.
BAR_SITES = ((-0.9, 0.0), (-0.75, np.pi), (-0.6, 0.7), (-0.45, 0.7 + np.pi), (-0.15, 1.4),
             (-0.05, 1.4 + np.pi), (0.05, 1.4 + np.pi), (0.15, 1.4), (0.45, 0.7 + np.pi),
             (0.6, 0.7), (0.75, np.pi), (0.9, 0.0))


def bar_sites() -> dict[str, tuple[float, float, float]]:
    """BAR_01…BAR_12: (x, y, z) in m on the bar's surface from its centre, model frame."""
    return {
        f"BAR_{k + 1:02d}": (BAR_RADIUS_M * np.cos(angle), BAR_RADIUS_M * np.sin(angle), z)
        for k, (z, angle) in enumerate(BAR_SITES)
    }


def model_marker_positions(points: np.ndarray, arm_end: np.ndarray | None = None
                           ) -> tuple[tuple[str, ...], np.ndarray]:
    """Labels and (F, M, 3) marker positions in the MODEL frame (x, y plane; z along the bar), m.

    ``points``: (F, 10, 2) named points (POINT_NAMES order), m; ``arm_end``: (F, 2) the upper
    arm's end (m; None: the ``shoulder`` point is the arm's end).
    """
    angles = segment_angles(points)
    elbow = points[:, POINT_NAMES.index("elbow")]
    end = points[:, POINT_NAMES.index("shoulder")] if arm_end is None else arm_end
    arm = end - elbow
    angles["upper_arm"] = np.arctan2(arm[:, 1], arm[:, 0])
    length = np.hypot(arm[:, 0], arm[:, 1])
    arm_scale = length / length[0]
    labels, columns = [], []
    for label, (x, y, z) in bar_sites().items():
        bar = points[:, POINT_NAMES.index("bar")]
        labels.append(label)
        columns.append(np.stack([bar[:, 0] + x, bar[:, 1] + y, np.full(len(bar), z)], axis=-1))
    for label, (segment, point, x, y, z) in SITES.items():
        origin = points[:, POINT_NAMES.index(point)]
        c, s = np.cos(angles[segment]), np.sin(angles[segment])
        if segment == "upper_arm":
            x = x * arm_scale
        labels.append(label)
        columns.append(np.stack(
            [origin[:, 0] + c * x - s * y, origin[:, 1] + s * x + c * y, np.full(len(c), -z)],
            axis=-1,
        ))
    return tuple(labels), np.stack(columns, axis=1)


def model_to_lab(positions: np.ndarray, bar_height_m: float) -> np.ndarray:
    """(…, 3) model-frame positions → laboratory frame (Z up, bar along Y), m.

    Model x → lab X, model y → lab Z (lifted by ``bar_height_m``), model z → lab −Y.
    """
    lab = np.empty_like(positions)
    lab[..., 0] = positions[..., 0]
    lab[..., 1] = -positions[..., 2]
    lab[..., 2] = positions[..., 1] + bar_height_m
    return lab
