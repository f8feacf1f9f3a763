"""The functional gleno-humeral centre: SCoRE (Ehrig et al. 2006, J Biomech 39:2798).

Skin markers cannot locate the shoulder joint (the acromion rides on the scapula). A
calibration movement of the arm (circumduction, flexion and abduction) does: the centre of
rotation is a point fixed in the thorax and fixed in the upper arm. With each segment's pose
at frame k from its marker cluster (rotation R (3, 3) and translation t (3,), lab ← segment),
SCoRE finds the centre's coordinates c_t in the thorax and c_a in the upper arm minimising

    Σ_k ‖R_t,k·c_t + t_t,k − (R_a,k·c_a + t_a,k)‖²,

linear least squares in (c_t, c_a) (3F equations, 6 unknowns). Its conditioning is the
movement's: a constant relative rotation leaves a 3-dimensional null space (any point moves
with both), a hinge-like one a line. ``spread_rad`` = smallest singular value / √F of the
stacked matrix [R_t,k, −R_a,k] measures the arm's rotation range in its weakest direction
(for small rotations about a direction, ‖(R_t − R_a)·v‖ ≈ angle·‖v‖): below
``min_spread_rad`` the centre is refused in one line.

Cluster poses come from :func:`cluster_poses`: the rigid transform (Kabsch / SVD) from the
cluster's reference shape (its first complete frame, centred) to each frame.

What a bar trial uses: the model's shoulder point is the ARM side of the shoulder
spring-dampers (docs/model.md §2), which translates relative to the trunk by centimetres under
load (the shoulder girdle), as the acromion does. So the centre is not kept fixed in the thorax:
the profile keeps the acromion → centre offset, averaged over the calibration, in the frame of a
thorax cluster that bar trials also carry (the ``thorax`` markers of ``configs/markerset.toml
[score]``: C7, STERNUM and the trochanters by default, the model's rigid trunk), with that
cluster's reference shape. :func:`acromion_correction` turns it, at every frame of a trial,
into the vector added to the acromion-based shoulder (it rides with the acromions and points
where the calibration found the joint).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from bemore.errors import DataError
from bemore.trial.markers import Markers

MIN_SPREAD_RAD = 0.05
"""Weakest-direction rotation spread (rad) below which the movement is refused. Measured on
synthetic calibrations (1 mm marker noise, tests/trial/test_trial_score.py): spread 0.29 →
1.5 mm RMS error of the centre in the lab, 0.065 → 2.2–2.5 mm, 0.035 → 6.1–6.9 mm, 0.021 →
19–21 mm."""


@dataclass(frozen=True)
class ScoreResult:
    """A functional centre and how well the movement determined it.

    Attributes:
        centre_thorax_m: (3,) c_t, in the thorax cluster's reference frame (m);
        centre_arm_m: (3,) c_a, in the upper-arm cluster's reference frame (m);
        centre_lab_m: (F, 3) the centre in the lab at the frames used (mean of both segments'
            estimates);
        residual_mm: RMS of the 3F least-squares residuals (mm);
        spread_rad: weakest-direction rotation spread (see the module docstring);
        condition: largest / smallest singular value of the stacked matrix;
        standard_error_mm: (3,) linearised standard errors of c_t (mm, white residuals);
        frames: frames used (both clusters complete);
        thorax_shape_m: (M, 3) the thorax markers' reference shape (m, centred);
        thorax_markers: their labels (canonical);
        acromion: the acromion marker's label; acromion_offset_m: (3,) the centre minus the
            acromion, in the thorax frame, averaged over the frames (m); acromion_offset_sd_mm:
            its spread over the frames (mm, RMS of the 3D deviations).
    """

    centre_thorax_m: np.ndarray
    centre_arm_m: np.ndarray
    centre_lab_m: np.ndarray
    residual_mm: float
    spread_rad: float
    condition: float
    standard_error_mm: np.ndarray
    frames: int
    thorax_shape_m: np.ndarray
    thorax_markers: tuple[str, ...]
    acromion: str
    acromion_offset_m: np.ndarray
    acromion_offset_sd_mm: float
    notes: tuple[str, ...] = field(default_factory=tuple)

    def profile_table(self, side: str, source: str) -> dict[str, Any]:
        """The profile's ``[shoulder_centre]`` table (JSON/TOML-ready)."""
        return {
            "side": side,
            "method": "SCoRE (Ehrig et al. 2006)",
            "calibration": source,
            "thorax_markers": list(self.thorax_markers),
            "thorax_shape_m": [[round(float(v), 6) for v in row] for row in self.thorax_shape_m],
            "centre_m": [round(float(v), 6) for v in self.centre_thorax_m],
            "acromion": self.acromion,
            "acromion_offset_m": [round(float(v), 6) for v in self.acromion_offset_m],
            "residual_mm": round(self.residual_mm, 4),
            "spread_rad": round(self.spread_rad, 4),
            "condition": round(self.condition, 3),
        }


def kabsch(reference: np.ndarray, points: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Rotation R (3, 3) and translation t (3,) with ``points ≈ reference @ R.T + t``
    (least squares, proper rotation): ``reference`` and ``points`` (M, 3), M ≥ 3.

    >>> ref = np.array([[0.0, 0, 0], [1, 0, 0], [0, 1, 0]])
    >>> turn = np.array([[0.0, -1, 0], [1, 0, 0], [0, 0, 1]])       # 90° about z
    >>> R, t = kabsch(ref, ref @ turn.T + [1.0, 2.0, 3.0])
    >>> bool(np.allclose(R, turn)), np.round(t, 9).tolist()
    (True, [1.0, 2.0, 3.0])
    """
    centre_ref, centre = reference.mean(axis=0), points.mean(axis=0)
    H = (reference - centre_ref).T @ (points - centre)
    U, _, Vt = np.linalg.svd(H)
    d = np.sign(np.linalg.det(Vt.T @ U.T)) or 1.0
    R = Vt.T @ np.diag([1.0, 1.0, d]) @ U.T
    return R, centre - R @ centre_ref


def cluster_poses(positions: np.ndarray, reference: np.ndarray | None = None
                  ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Poses of a marker cluster ``positions`` (F, M, 3) m: (R (F, 3, 3), t (F, 3), complete
    (F,) bool, reference (M, 3) centred). Without ``reference`` it is the first complete frame,
    centred; frames with a missing marker get NaN and ``complete`` False."""
    frames = positions.shape[0]
    complete = np.all(np.isfinite(positions), axis=(1, 2))
    if reference is None:
        if not complete.any():
            raise DataError("no frame where every marker of the cluster is seen")
        first = positions[int(np.flatnonzero(complete)[0])]
        reference = first - first.mean(axis=0)
    R = np.full((frames, 3, 3), np.nan)
    t = np.full((frames, 3), np.nan)
    for k in np.flatnonzero(complete):
        R[k], t[k] = kabsch(reference, positions[k])
    return R, t, complete, reference


def score(R_t: np.ndarray, t_t: np.ndarray, R_a: np.ndarray, t_a: np.ndarray,
          min_spread_rad: float = MIN_SPREAD_RAD, source: str = "calibration"
          ) -> tuple[np.ndarray, np.ndarray, dict[str, Any]]:
    """SCoRE on poses (F, 3, 3) and (F, 3) of both segments: (c_t (3,), c_a (3,), details:
    residual_m, spread_rad, condition, standard_error_m (3,)). DataError (one line) when the
    movement is too small to locate the centre (see the module docstring)."""
    frames = R_t.shape[0]
    if frames < 10:
        raise DataError(f"{source}: {frames} usable frames: SCoRE needs a calibration movement "
                        "(at least 10 frames with both clusters complete)")
    A = np.concatenate([R_t, -R_a], axis=2).reshape(3 * frames, 6)
    b = (t_a - t_t).reshape(3 * frames)
    singular = np.linalg.svd(A, compute_uv=False)
    spread = float(singular[-1] / np.sqrt(frames))
    condition = float(singular[0] / singular[-1]) if singular[-1] > 0 else float("inf")
    if spread < min_spread_rad:
        raise DataError(
            f"{source}: the arm moves too little to locate the shoulder centre (rotation "
            f"spread {spread:.3f} rad in its weakest direction, at least {min_spread_rad:g} "
            "needed: circumduct, flex and abduct the arm)")
    x, *_ = np.linalg.lstsq(A, b, rcond=None)
    residual = A @ x - b
    dof = max(3 * frames - 6, 1)
    sigma2 = float(residual @ residual) / dof
    covariance = sigma2 * np.linalg.inv(A.T @ A)
    details = {
        "residual_m": float(np.sqrt(np.mean(residual**2))),
        "spread_rad": spread,
        "condition": condition,
        "standard_error_m": np.sqrt(np.diag(covariance)[:3]),
    }
    return x[:3], x[3:], details


def score_markers(markers: Markers, thorax: list[str], upper_arm: list[str], acromion: str,
                  min_spread_rad: float = MIN_SPREAD_RAD) -> ScoreResult:
    """SCoRE on a calibration recording: ``thorax`` and ``upper_arm`` marker labels (≥ 3 each,
    found with or without subject prefix), and the ``acromion`` marker the offset is kept
    from. DataError for a missing marker or a movement too small (one line)."""
    def gather(labels: list[str], what: str) -> np.ndarray:
        if len(labels) < 3:
            raise DataError(f"{markers.source}: the {what} cluster needs at least 3 markers "
                            f"({len(labels)} given)")
        absent = [label for label in labels if markers.find(label) is None]
        if absent:
            raise DataError(f"{markers.source}: {what} marker(s) missing from the calibration "
                            f"file: {', '.join(absent)}")
        return np.stack([markers.marker(label) for label in labels], axis=1)

    thorax_positions = gather(thorax, "thorax")
    arm_positions = gather(upper_arm, "upper-arm")
    if markers.find(acromion) is None:
        raise DataError(f"{markers.source}: acromion marker {acromion} missing from the "
                        "calibration file")
    acromion_positions = markers.marker(acromion)
    R_t, t_t, complete_t, shape = cluster_poses(thorax_positions)
    R_a, t_a, complete_a, _ = cluster_poses(arm_positions)
    use = complete_t & complete_a & np.all(np.isfinite(acromion_positions), axis=1)
    c_t, c_a, details = score(R_t[use], t_t[use], R_a[use], t_a[use], min_spread_rad,
                              markers.source)
    lab = 0.5 * ((R_t[use] @ c_t + t_t[use]) + (R_a[use] @ c_a + t_a[use]))
    # centre − acromion in the thorax frame, frame by frame (Rᵀ·v for each frame).
    offsets = np.einsum("fji,fj->fi", R_t[use], lab - acromion_positions[use])
    offset = offsets.mean(axis=0)
    spread = float(np.sqrt(np.mean(np.sum((offsets - offset) ** 2, axis=1)))) * 1e3
    notes = ()
    if not use.all():
        notes = (f"{int((~use).sum())} frame(s) with a cluster marker missing left out",)
    return ScoreResult(c_t, c_a, lab, details["residual_m"] * 1e3, details["spread_rad"],
                       details["condition"], details["standard_error_m"] * 1e3, int(use.sum()),
                       shape, tuple(thorax), acromion, offset, spread, notes)


def _thorax_poses(markers: Markers, table: dict[str, Any]) -> tuple[np.ndarray, np.ndarray]:
    """Poses (R (F, 3, 3), t (F, 3)) of the profile's thorax cluster in ``markers`` (NaN where
    one of its markers is missing); DataError naming an absent one."""
    labels = list(table["thorax_markers"])
    absent = [label for label in labels if markers.find(label) is None]
    if absent:
        raise DataError(f"{markers.source}: the profile's shoulder centre needs the thorax "
                        f"marker(s) {', '.join(absent)}, missing from the file")
    positions = np.stack([markers.marker(label) for label in labels], axis=1)
    R, t, _, _ = cluster_poses(positions, np.asarray(table["thorax_shape_m"], dtype=float))
    return R, t


def centre_in_lab(markers: Markers, table: dict[str, Any]) -> np.ndarray:
    """(F, 3) m: the profile's centre held fixed in the thorax (``centre_m``) at every frame of
    ``markers`` (a calibration: where the arm turned about it); NaN where a thorax marker is
    missing."""
    R, t = _thorax_poses(markers, table)
    return R @ np.asarray(table["centre_m"], dtype=float) + t


def acromion_correction(markers: Markers, table: dict[str, Any]) -> np.ndarray:
    """(F, 3) m: the profile's acromion → centre offset turned with the thorax at every frame
    of ``markers``: what is added to the acromion-based shoulder (module docstring)."""
    R, _ = _thorax_poses(markers, table)
    return R @ np.asarray(table["acromion_offset_m"], dtype=float)


def shoulder_centre_toml(table: dict[str, Any]) -> str:
    """The ``[shoulder_centre]`` table as TOML text (keys of :meth:`ScoreResult.profile_table`)."""
    import json

    def value(item: Any) -> str:
        if isinstance(item, str):
            return json.dumps(item, ensure_ascii=False)
        if isinstance(item, list | tuple):
            return "[" + ", ".join(value(v) for v in item) + "]"
        return repr(float(item))

    return "[shoulder_centre]\n" + "".join(f"{key} = {value(item)}\n"
                                           for key, item in table.items())


def write_shoulder_centre(profile_path: str | Path, table: dict[str, Any]) -> None:
    """Put ``table`` into the athlete profile TOML at ``profile_path`` as its
    ``[shoulder_centre]`` table (replacing one already there), keeping every other line; the
    result is validated (``load_profile``) before it replaces the file."""
    from bemore.profile import load_profile

    path = Path(profile_path)
    if not path.is_file():
        raise DataError(f"{path}: athlete profile not found")
    lines = path.read_text(encoding="utf-8").splitlines()
    kept, inside = [], False
    for line in lines:
        header = line.strip()
        if header.startswith("["):
            inside = header == "[shoulder_centre]"
        if not inside:
            kept.append(line)
    while kept and not kept[-1].strip():
        kept.pop()
    text = "\n".join(kept) + "\n\n" + shoulder_centre_toml(table)
    temporary = path.with_name(path.name + ".tmp")
    temporary.write_text(text, encoding="utf-8")
    try:
        load_profile(temporary)
    except Exception:
        temporary.unlink(missing_ok=True)
        raise
    temporary.replace(path)
