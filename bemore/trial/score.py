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
(errors in variables), which pulls plain least squares towards the clusters (a bias growing with
noise² / spread²: 0.05 mm on y at 1 mm noise, 0.43 mm at 3 mm, 0.74 mm at 1 mm with the movement
at 0.25 of the synthetic one, 2.1–2.3 mm with 2.5 mm of uneven noise and 0.4 of it: 0.5–3.7
standard errors). Each cluster's noise is estimated from its markers' scatter about its mean
shape (:func:`estimated_pose_noise`: a level per marker, one anisotropy shared by the cluster),
carried to its pose's errors (:func:`pose_noise`), and what those add to the least squares'
normal equations on average is removed (:func:`_noise_moment`). The standard error is then a
sandwich over the frames (:func:`_long_run_variance`): smoothed or filtered markers make the
frames' errors correlated (at 6 Hz smoothing a white-frame standard error is 2.4–3.7× too
small). Measured on 200 seeds each of 13 synthetic settings (tests/trial/score_synthetic.py:
white 1 and 3 mm, smaller movements, a smaller arm cluster, noise low-pass filtered at 3, 6 and
10 Hz, unequal across the lab's axes or the markers, all at once): 93–96 % of the per-axis
errors within 2 standard errors per setting, 0–0.7 % beyond 3.5 (largest 4.9); previously 30–96
% (41–53 % smoothed, 40–49 % with 2.5 mm of uneven noise), up to 50 % beyond 3.5. Not in it,
what the data cannot show: the clusters sliding over the bone with the movement (skin), a thorax
cluster that bends (either also inflates the noise the scatter shows), noise that follows the
movement. A note says when the bias removed exceeds 2 standard errors (the centre then rests on
the noise model).

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
from bemore.paths import discard, put_in_place, stage
from bemore.trial.markers import Markers

MIN_SPREAD_RAD = 0.05
"""Weakest-direction rotation spread (rad) below which the movement is refused. Measured on
synthetic calibrations (1 mm marker noise, tests/trial/score_synthetic.py, seeds 0–2), RMS
error of the centre in the lab: spread 0.29 → 1.5 mm, 0.10 → 1.6–1.7 mm, 0.073 → 1.7–1.8 mm,
0.040 → 2.1–2.6 mm, 0.027 → 3.2–4.3 mm (with the noise-bias correction; plain least squares:
0.073 → 1.8–2.4, 0.040 → 4.4–6.2, 0.027 → 11–14 mm)."""


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
            scatter about its mean shape (mm RMS per coordinate, :func:`estimated_pose_noise`);
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


@dataclass(frozen=True)
class PoseNoise:
    """What a cluster's marker noise does to its pose (first order, in the cluster's frame).

    Attributes:
        sigma_m: the markers' noise, RMS per coordinate (m);
        rotation_covariance: (3, 3) covariance of the rotation error δ (R = R₀·exp([δ]×),
            rad²);
        cross: (3,) E[ε̄ × δ], ε̄ the centroid's (the translation's) error (m·rad): zero when
            every marker has the same noise in every direction.
    """

    sigma_m: float
    rotation_covariance: np.ndarray
    cross: np.ndarray


def pose_noise(shape: np.ndarray, marker_covariances: np.ndarray) -> PoseNoise:
    """:class:`PoseNoise` of a rigid fit (:func:`kabsch`) of the cluster ``shape`` (M, 3) m
    whose markers have the noise covariances ``marker_covariances`` (M, 3, 3) m² in its frame:
    δ = K⁻¹·Σ_m [r_m]×·ε_m, K = Σ_m [r_m]×ᵀ·[r_m]× = tr S·I − S (r_m the markers about their
    centroid, S = Σ r_m·r_mᵀ), so C = Σ_m G_m·Σ_m·G_mᵀ with G_m = K⁻¹·[r_m]×.

    >>> shape = np.array([[0.1, 0, 0], [-0.1, 0, 0], [0, 0.1, 0], [0, -0.1, 0]])
    >>> noise = pose_noise(shape, np.tile(1e-6 * np.eye(3), (4, 1, 1)))  # 1 mm everywhere
    >>> np.round(np.diag(noise.rotation_covariance) * 1e6, 1).tolist()      # mrad²
    [50.0, 50.0, 25.0]
    """
    arms = shape - shape.mean(axis=0)
    S = arms.T @ arms
    K_inverse = np.linalg.inv(np.trace(S) * np.eye(3) - S)
    G = K_inverse @ _skew(arms)  # (M, 3, 3)
    C = np.einsum("mij,mjk,mlk->il", G, marker_covariances, G)
    X = np.einsum("mij,mkj->ik", marker_covariances, G) / len(shape)  # Σ_m Σ_m·G_mᵀ / M
    cross = np.array([X[1, 2] - X[2, 1], X[2, 0] - X[0, 2], X[0, 1] - X[1, 0]])
    sigma = float(np.sqrt(np.trace(marker_covariances, axis1=1, axis2=2).mean() / 3.0))
    return PoseNoise(sigma, C, cross)


def _skew(v: np.ndarray) -> np.ndarray:
    """[v]× (..., 3, 3) of ``v`` (..., 3): [v]×·u = v × u."""
    out = np.zeros((*v.shape[:-1], 3, 3))
    out[..., 0, 1], out[..., 0, 2], out[..., 1, 2] = -v[..., 2], v[..., 1], -v[..., 0]
    return out - np.swapaxes(out, -1, -2)


def estimated_pose_noise(positions: np.ndarray, R: np.ndarray, t: np.ndarray) -> PoseNoise:
    """:class:`PoseNoise` of a cluster from its markers' scatter about its mean shape:
    ``positions`` (F, M, 3) m with their poses (R (F, 3, 3), t (F, 3)) from
    :func:`cluster_poses` (complete frames only). The markers' noise covariances are modelled
    as s_m²·Σ₀ (each marker its own level s_m, one anisotropy Σ₀ shared by all: the cameras',
    in the cluster's frame averaged over the frames), fitted to the residuals' second moments
    through the rigid fit's projection (it takes 6 of the 3M coordinates' noise a frame) by
    alternating linear least squares; with 3 markers that is not determined and every marker
    gets the same σ²·I (3M − 6 degrees of freedom a frame)."""
    frames, count, _ = positions.shape
    local = np.einsum("fji,fmj->fmi", R, positions - t[:, None])
    shape = local.mean(axis=0)
    scatter = local - shape
    moments = (np.einsum("fmi,fmj->mij", scatter, scatter) / max(frames - 1, 1)).reshape(-1)
    arms = shape - shape.mean(axis=0)
    # The rigid fit leaves P·ε of the noise ε (3M,): P = I − J·J⁺, J = [I, −[r_m]×] a marker.
    J = np.concatenate([np.broadcast_to(np.eye(3), (count, 3, 3)), -_skew(arms)], axis=2)
    J = J.reshape(3 * count, 6)
    P = np.eye(3 * count) - J @ np.linalg.pinv(J)
    # effect[:, n, q]: the residuals' moments (9M,) from a unit entry q of marker n's covariance.
    effect = np.zeros((9 * count, count, 6))
    for n in range(count):
        for q in range(6):
            E = np.zeros((3 * count, 3 * count))
            E[3 * n:3 * n + 3, 3 * n:3 * n + 3] = _symmetric_matrix(np.eye(6)[q])
            effect[:, n, q] = _diagonal_blocks(P @ E @ P, count)
    levels, common = np.ones(count), np.array([1.0, 1.0, 1.0, 0.0, 0.0, 0.0])
    levels = levels * float(np.sum(scatter**2)) / (frames * (3 * count - 6))
    for _ in range(50):
        common, *_ = np.linalg.lstsq(np.einsum("knq,n->kq", effect, levels), moments,
                                     rcond=None)
        common = _symmetric_entries(_positive_part(_symmetric_matrix(common)))
        scale = common[:3].sum() / 3.0  # tr Σ₀ = 3: the levels are s_m² (m²)
        if scale <= 0:
            break
        previous = levels
        levels, *_ = np.linalg.lstsq(np.einsum("knq,q->kn", effect, common / scale), moments,
                                     rcond=None)
        levels, common = np.maximum(levels, 0.0), common / scale
        if np.max(np.abs(levels - previous)) <= 1e-4 * np.max(levels):
            break
    jacobian = np.concatenate([np.einsum("knq,q->kn", effect, common),
                               np.einsum("knq,n->kq", effect, levels)], axis=1)
    if np.linalg.matrix_rank(jacobian) == count + 5:
        covariances = levels[:, None, None] * _symmetric_matrix(common)
    else:
        sigma2 = float(np.sum(scatter**2)) / (frames * (3 * count - 6))
        covariances = np.tile(sigma2 * np.eye(3), (count, 1, 1))
    return pose_noise(shape, covariances)


_SYMMETRIC = ((0, 0), (1, 1), (2, 2), (0, 1), (0, 2), (1, 2))
"""The six entries that set a symmetric 3 × 3 matrix."""
def _symmetric_matrix(entries: np.ndarray) -> np.ndarray:
    """The symmetric 3 × 3 matrix of its six ``entries`` (order :data:`_SYMMETRIC`)."""
    matrix = np.zeros((3, 3))
    for value, (i, j) in zip(entries, _SYMMETRIC, strict=True):
        matrix[i, j] = matrix[j, i] = value
    return matrix


def _symmetric_entries(matrix: np.ndarray) -> np.ndarray:
    """The six entries (order :data:`_SYMMETRIC`) of a symmetric 3 × 3 ``matrix``."""
    return np.array([matrix[i, j] for i, j in _SYMMETRIC])


def _positive_part(matrix: np.ndarray) -> np.ndarray:
    """A symmetric ``matrix`` with its negative eigenvalues set to 0."""
    values, vectors = np.linalg.eigh(matrix)
    return (vectors * np.maximum(values, 0.0)) @ vectors.T


def _diagonal_blocks(matrix: np.ndarray, count: int) -> np.ndarray:
    """(9·count,): the 3×3 diagonal blocks of ``matrix`` (3·count, 3·count), flattened."""
    return np.stack([matrix[3 * m:3 * m + 3, 3 * m:3 * m + 3] for m in range(count)]).reshape(-1)


def score(R_t: np.ndarray, t_t: np.ndarray, R_a: np.ndarray, t_a: np.ndarray,
          min_spread_rad: float = MIN_SPREAD_RAD, source: str = "calibration",
          noise: tuple[PoseNoise, PoseNoise] | None = None
          ) -> tuple[np.ndarray, np.ndarray, dict[str, Any]]:
    """SCoRE on poses (F, 3, 3) and (F, 3) of both segments: (c_t (3,), c_a (3,), details:
    residual_m, spread_rad, condition, standard_error_m (3,) of c_t, bias_correction_m (3,)
    added to c_t, lag_frames). ``noise`` (thorax, arm), what each cluster's marker noise does
    to its poses (:func:`estimated_pose_noise`), removes the errors-in-variables bias (module
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
    if noise is not None:
        moment, shift = _noise_moment(R_t, R_a, *noise)
        normal, right = normal - moment, right + shift
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


def _noise_moment(R_t: np.ndarray, R_a: np.ndarray, thorax: PoseNoise, arm: PoseNoise
                  ) -> tuple[np.ndarray, np.ndarray]:
    """(moment (6, 6), shift (6,)): the poses' noise makes SCoRE's normal equations, on
    average at the true x₀ = (c_t, c_a), E[AᵀA]·x₀ − E[Aᵀb] = moment·x₀ + shift, so
    (AᵀA − moment)·x = Aᵀb + shift removes the bias (second order in the noise). A pose is
    R = R₀·exp([δ]×), t = t₀ + R₀·ε̄ (the reference shapes are centred: t is the centroid);
    A_k = A₀,k + E₁ + E₂ with E₁ = [R₀,t·[δ_t]×, −R₀,a·[δ_a]×] (mean 0) and E[E₂] = −R₀·N/2,
    N = tr C·I − C: E[E₁ᵀE₁] = N per segment, the shrunk mean rotation adds A₀ᵀ·E[E₂], and
    E[E₁ᵀ·(translation noise)] = E[ε̄ × δ] per segment (:class:`PoseNoise`)."""
    frames = R_t.shape[0]
    N_t = np.trace(thorax.rotation_covariance) * np.eye(3) - thorax.rotation_covariance
    N_a = np.trace(arm.rotation_covariance) * np.eye(3) - arm.rotation_covariance
    relative = np.einsum("fji,fjk->ik", R_t, R_a)  # Σ R_tᵀ·R_a
    moment = np.zeros((6, 6))
    moment[:3, :3] = 0.5 * frames * N_t
    moment[3:, 3:] = 0.5 * frames * N_a
    moment[:3, 3:] = 0.5 * relative @ N_a
    moment[3:, :3] = 0.5 * relative.T @ N_t
    return moment, frames * np.concatenate([thorax.cross, arm.cross])


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
    noise = None
    if use.sum() >= 10:  # fewer: score() refuses the calibration
        noise = (estimated_pose_noise(thorax_positions[use], R_t[use], t_t[use]),
                 estimated_pose_noise(arm_positions[use], R_a[use], t_a[use]))
        noise_t, noise_a = noise[0].sigma_m, noise[1].sigma_m
    c_t, c_a, details = score(R_t[use], t_t[use], R_a[use], t_a[use], min_spread_rad,
                              markers.source, noise)
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
                     + ") mm exceeds 2 standard errors: where the markers' noise is not "
                     "that model's (independent of the movement, a level per marker, one "
                     "anisotropy) the centre is less certain than the ± says (move the arm "
                     "further)")
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
    temporary = stage(path, text)  # the one atomic writer: checked, then put in place
    try:
        load_profile(temporary)
    except BaseException:
        discard([temporary])
        raise
    put_in_place({path: temporary})
