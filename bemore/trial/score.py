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

What the ± covers (``standard_error_mm``). The markers' noise reaches SCoRE through the poses,
on both sides of the least squares: a pose's rotation error multiplies the unknown centre
(errors in variables), which pulls plain least squares towards the clusters (a bias growing
with noise² / spread²: 0.05 mm on y at 1 mm noise, 0.43 mm at 3 mm, 0.74 mm at 1 mm with the
movement at 0.25 of the synthetic one: 0.5–2 standard errors). With each cluster's rotation
noise C = σ²·(tr S·I − S)⁻¹ (:func:`rotation_noise`: σ from the markers' scatter about the
cluster's mean shape, S the shape's second moment) the expected extra in the normal matrix is
removed (:func:`_noise_moment`). The standard error is then a sandwich over the frames
(:func:`_long_run_variance`): smoothed or filtered markers make the frames' errors correlated
(at 6 Hz smoothing a white-frame standard error is 2.4–3.7× too small). Measured on 200 seeds
each of ten synthetic settings (tests/trial/score_synthetic.py: white, 3 mm, smaller
movements, a smaller arm cluster, noise low-pass filtered at 3, 6 and 10 Hz, unequal across
axes or markers): 93–97 % of the per-axis errors within 2 standard errors per setting, 0.2–0.7 %
beyond 3.5 (largest 4.9); previously 41–96 % (41–53 % smoothed, 78–90 % with the larger noise
or smaller movements), up to 36 % beyond 3.5. Not in it: what the data cannot
show, the clusters sliding over the bone with the movement (skin), a thorax cluster that bends;
and the bias correction assumes the same noise in every direction on every marker: with noise
of 2.5 mm, uneven by ±25 % across axes or markers, and a movement at 0.4 of the synthetic one,
81–88 % stay within 2 standard errors (a note says when the correction exceeds 2 standard
errors).

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
        standard_error_mm: (3,) standard errors of c_t per axis (mm): from the markers' noise,
            frames correlated in time allowed for (module docstring, "What the ± covers");
        bias_correction_mm: (3,) the errors-in-variables bias removed from c_t (mm: the
            plain least-squares centre is c_t minus it);
        marker_noise_mm: (thorax, arm) the markers' noise estimated from each cluster's
            scatter about its mean shape (mm per coordinate);
        lag_frames: frames over which the fit's errors were found correlated;
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
    bias_correction_mm: np.ndarray
    marker_noise_mm: tuple[float, float]
    lag_frames: int
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
    R, t = _kabsch_frames(reference, points[None])
    return R[0], t[0]


def _kabsch_frames(reference: np.ndarray, points: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """:func:`kabsch` of ``reference`` (M, 3) to every frame of ``points`` (F, M, 3), finite:
    (R (F, 3, 3), t (F, 3)) m, one batched SVD."""
    centre_ref, centre = reference.mean(axis=0), points.mean(axis=1)
    H = np.einsum("mi,fmj->fij", reference - centre_ref, points - centre[:, None])
    U, _, Vt = np.linalg.svd(H)
    V, Ut = np.swapaxes(Vt, 1, 2), np.swapaxes(U, 1, 2)
    d = np.where(np.linalg.det(V @ Ut) < 0.0, -1.0, 1.0)
    R = (V * np.stack([np.ones_like(d), np.ones_like(d), d], axis=1)[:, None, :]) @ Ut
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
    if complete.any():
        R[complete], t[complete] = _kabsch_frames(reference, positions[complete])
    return R, t, complete, reference


def rotation_noise(positions: np.ndarray, R: np.ndarray, t: np.ndarray
                   ) -> tuple[float, np.ndarray]:
    """The marker noise of a rigid cluster and what it does to its rotation: ``positions``
    (F, M, 3) m with their poses (R (F, 3, 3), t (F, 3)) from :func:`cluster_poses` (complete
    frames only): (σ m, the marker noise per coordinate from the markers' scatter about the
    cluster's mean shape, 3M − 6 degrees of freedom a frame; C (3, 3) rad², the covariance of
    a pose's rotation error in the cluster's frame, σ²·(tr S·I − S)⁻¹ with S the mean shape's
    second moment). Isotropic, equal noise on every marker is assumed (module docstring)."""
    frames, count, _ = positions.shape
    local = np.einsum("fji,fmj->fmi", R, positions - t[:, None])
    shape = local.mean(axis=0)
    sigma2 = float(np.sum((local - shape) ** 2)) / (frames * (3 * count - 6))
    arms = shape - shape.mean(axis=0)
    S = arms.T @ arms
    return float(np.sqrt(sigma2)), sigma2 * np.linalg.inv(np.trace(S) * np.eye(3) - S)


def score(R_t: np.ndarray, t_t: np.ndarray, R_a: np.ndarray, t_a: np.ndarray,
          min_spread_rad: float = MIN_SPREAD_RAD, source: str = "calibration",
          rotation_covariance: tuple[np.ndarray, np.ndarray] | None = None
          ) -> tuple[np.ndarray, np.ndarray, dict[str, Any]]:
    """SCoRE on poses (F, 3, 3) and (F, 3) of both segments: (c_t (3,), c_a (3,), details:
    residual_m, spread_rad, condition, standard_error_m (3,) of c_t, bias_correction_m (3,)
    added to c_t, lag_frames). ``rotation_covariance`` (C_t, C_a) (3, 3) rad², each pose's
    rotation noise (:func:`rotation_noise`), removes the errors-in-variables bias (module
    docstring; without it, none is removed). DataError (one line) when the movement is too
    small to locate the centre."""
    frames = R_t.shape[0]
    if frames < 10:
        raise DataError(f"{source}: {frames} usable frames: SCoRE needs a calibration movement "
                        "(at least 10 frames with both clusters complete)")
    A = np.concatenate([R_t, -R_a], axis=2)  # (F, 3, 6)
    b = t_a - t_t
    singular = np.linalg.svd(A.reshape(3 * frames, 6), compute_uv=False)
    spread = float(singular[-1] / np.sqrt(frames))
    condition = float(singular[0] / singular[-1]) if singular[-1] > 0 else float("inf")
    if spread < min_spread_rad:
        raise DataError(
            f"{source}: the arm moves too little to locate the shoulder centre (rotation "
            f"spread {spread:.3f} rad in its weakest direction, at least {min_spread_rad:g} "
            "needed: circumduct, flex and abduct the arm)")
    normal = np.einsum("fki,fkj->ij", A, A)
    right = np.einsum("fki,fk->i", A, b)
    plain = np.linalg.solve(normal, right)
    if rotation_covariance is not None:
        normal = normal - _noise_moment(R_t, R_a, *rotation_covariance)
        if np.linalg.svd(normal, compute_uv=False)[-1] <= 0.25 * singular[-1] ** 2:
            raise DataError(f"{source}: the markers' noise is too large for the movement to "
                            "locate the shoulder centre (circumduct, flex and abduct the arm "
                            "further)")
    x = np.linalg.solve(normal, right)
    residual = np.einsum("fki,i->fk", A, x) - b
    inverse = np.linalg.inv(normal)
    variance, lag = _long_run_variance(A, residual, inverse)
    details = {
        "residual_m": float(np.sqrt(np.mean(residual**2))),
        "spread_rad": spread,
        "condition": condition,
        "standard_error_m": np.sqrt(variance[:3]),
        "bias_correction_m": x[:3] - plain[:3],
        "lag_frames": lag,
    }
    return x[:3], x[3:], details


def _noise_moment(R_t: np.ndarray, R_a: np.ndarray, C_t: np.ndarray, C_a: np.ndarray
                  ) -> np.ndarray:
    """(6, 6): what the poses' rotation noise adds, on average, to SCoRE's normal matrix
    AᵀA beyond the noise-free one, as seen from the true (c_t, c_a). A pose's rotation is
    R = R₀·exp([δ]×), δ of covariance C, so A_k = A₀,k + E₁ + E₂ with E₁ = R₀·[δ]× (mean 0)
    and E[E₂] = −R₀·N/2, N = tr C·I − C: E[E₁ᵀE₁] = N per segment, and the shrunk mean
    rotation adds A₀ᵀ·E[E₂] (both second order in the noise; the translations' noise is
    independent of δ: the reference shapes are centred)."""
    frames = R_t.shape[0]
    N_t = np.trace(C_t) * np.eye(3) - C_t
    N_a = np.trace(C_a) * np.eye(3) - C_a
    relative = np.einsum("fji,fjk->ik", R_t, R_a)  # Σ R_tᵀ·R_a
    moment = np.zeros((6, 6))
    moment[:3, :3] = 0.5 * frames * N_t
    moment[3:, 3:] = 0.5 * frames * N_a
    moment[:3, 3:] = 0.5 * relative @ N_a
    moment[3:, :3] = 0.5 * relative.T @ N_t
    return moment


def _long_run_variance(A: np.ndarray, residual: np.ndarray, inverse: np.ndarray
                       ) -> tuple[np.ndarray, int]:
    """Variances (6,) of SCoRE's unknowns (m²) with the frames' errors correlated in time
    (filtered or smoothed markers): the sandwich H⁻¹·Ω·H⁻ᵀ (``inverse`` = H⁻¹, H the
    normal matrix AᵀA, bias-corrected: not symmetric) with Ω the long-run
    covariance of the frames' scores g_k = A_kᵀ·r_k (heteroscedastic, any correlation
    between axes). The lag m is where the residuals' autocorrelation stays below
    2·√(log₁₀F / F) for 5 lags (Politis 2003); each variance is the larger of a flat-top
    window (weight 1 to m, 0 at 2m) and a Bartlett one to 4m (the flat-top alone can
    come out small). That estimate has ν ≈ 3F / (2·4m) degrees of freedom (Bartlett):
    the variances are widened by (t_ν,0.975 / 1.96)² so that ±2 standard errors keep
    about 95 % (×1.004 on white frames, ×1.06 at m = 10 of 600). Returns (variances, m)."""
    frames = residual.shape[0]
    centred = residual - residual.mean(axis=0)
    lags = min(frames // 4, 200)
    covariance = np.array([np.sum(centred[lag:] * centred[:frames - lag]) for lag in range(lags)])
    correlation = covariance / covariance[0] if covariance[0] > 0 else np.zeros(lags)
    threshold, run = 2.0 * np.sqrt(np.log10(frames) / frames), 5
    m = 0
    while m + run < lags and np.any(np.abs(correlation[m + 1:m + 1 + run]) >= threshold):
        m += 1
    m = max(m, 1)
    g = np.einsum("fki,fk->fi", A, residual)
    flat = g.T @ g
    bartlett = flat.copy()
    for lag in range(1, min(4 * m, frames - 1) + 1):
        gamma = g[lag:].T @ g[:-lag]
        gamma = gamma + gamma.T
        bartlett += (1.0 - lag / (4 * m + 1)) * gamma
        if lag < 2 * m:
            flat += min(1.0, 2.0 - lag / m) * gamma
    scale = frames / (frames - 6) * (_t_quantile_975(1.5 * frames / (4 * m)) / _Z_975) ** 2
    variance = np.maximum(np.einsum("ij,jk,ik->i", inverse, flat, inverse),
                          np.einsum("ij,jk,ik->i", inverse, bartlett, inverse))
    return scale * variance, m


_Z_975 = 1.959964
"""The standard normal's 97.5 % quantile."""


def _t_quantile_975(dof: float) -> float:
    """Student's t 97.5 % quantile at ``dof`` degrees of freedom (Cornish–Fisher expansion
    about the normal's: within 1 % of it from 5 on, 0.1 % from 10; ``dof`` is floored at 5).

    >>> round(_t_quantile_975(10.0), 2), round(_t_quantile_975(1e9), 3)
    (2.23, 1.96)
    """
    z, n = _Z_975, max(dof, 5.0)
    return z + (z**3 + z) / (4 * n) + (5 * z**5 + 16 * z**3 + 3 * z) / (96 * n**2)


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
    noise_t = noise_a = float("nan")
    covariance = None
    if use.sum() >= 10:  # fewer: score() refuses the calibration
        noise_t, C_t = rotation_noise(thorax_positions[use], R_t[use], t_t[use])
        noise_a, C_a = rotation_noise(arm_positions[use], R_a[use], t_a[use])
        covariance = (C_t, C_a)
    c_t, c_a, details = score(R_t[use], t_t[use], R_a[use], t_a[use], min_spread_rad,
                              markers.source, covariance)
    lab = 0.5 * ((R_t[use] @ c_t + t_t[use]) + (R_a[use] @ c_a + t_a[use]))
    # centre − acromion in the thorax frame, frame by frame (Rᵀ·v for each frame).
    offsets = np.einsum("fji,fj->fi", R_t[use], lab - acromion_positions[use])
    offset = offsets.mean(axis=0)
    spread = float(np.sqrt(np.mean(np.sum((offsets - offset) ** 2, axis=1)))) * 1e3
    notes = []
    if not use.all():
        notes.append(f"{int((~use).sum())} frame(s) with a cluster marker missing left out")
    bias_mm = details["bias_correction_m"] * 1e3
    if np.any(np.abs(bias_mm) > 2.0 * details["standard_error_m"] * 1e3):
        notes.append("the noise-bias correction (" + ", ".join(f"{v:.2f}" for v in bias_mm)
                     + ") mm exceeds 2 standard errors: it assumes equal noise in every "
                     "direction on every marker; with uneven noise the centre is less certain "
                     "than the ± says (move the arm further)")
    return ScoreResult(c_t, c_a, lab, details["residual_m"] * 1e3, details["spread_rad"],
                       details["condition"], details["standard_error_m"] * 1e3, int(use.sum()),
                       shape, tuple(thorax), acromion, offset, spread,
                       details["bias_correction_m"] * 1e3, (noise_t * 1e3, noise_a * 1e3),
                       details["lag_frames"], tuple(notes))


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
