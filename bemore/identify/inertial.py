"""Physically consistent inertial parameters of every segment, from motion and the bar force.

The dynamics of a rigid-body tree are linear in each body's inertial parameters: planar, four
per body, π_b = (m, h_x, h_y, I_o) — mass, first moment h = m·c (c the centre of mass in the
body's frame, m), second moment about the body frame's origin I_o = I_c + m·|c|² (kg·m²).
Two sets of equations hold whatever the unknown joint torques and spring forces inside the
body (they cancel), frame by frame:

* **force**: Σ_b m_b·a_c,b − (Σ_b m_b)·g = F_bar — the whole system's momentum rate against
  gravity and the force the bar's spring-dampers exert on it (the measured bar force, N);
* **moment about the bar** (the hands turn freely about it): Σ_b [(o_b − P) × m_b·(a_o,b − g) +
  (o_b − P) × (ε_b·(R_b h_b)⊥ − ω_b²·R_b h_b) + (R_b h_b) × (a_o,b − g) + I_o,b·ε_b] = 0.

Stacked over the frames: Y(q, q̇, q̈)·π = f, the **regressor form** (:func:`regressor`). A
trial determines only some combinations of π (e.g. mass at a joint cannot be told between the
two segments it joins); the **linear estimate** (:func:`linear_estimate`) is the least squares
of ``Y π = f`` with a small pull towards the anthropometric table for the directions the trial
does not see, under bounds (m ≥ 0, I_o ≥ 0): ``scipy.optimize.lsq_linear``.

**Physical consistency**: π is realisable by a mass distribution only if the planar
pseudo-inertia J = ∫ [x; y; 1][x; y; 1]ᵀ dm = [[Σxx, Σxy, h_x], [Σxy, Σyy, h_y], [h_x, h_y, m]]
is positive definite (m > 0 and a positive-definite second moment about the centre of mass),
with I_o = Σxx + Σyy. :func:`consistent_fit` parametrises each J by its log-Cholesky factor
(J = U·Uᵀ, U upper triangular with exponentiated diagonal, any real values give J ≻ 0), with
the gauge a planar motion cannot see fixed — the second moment about the centre of mass
isotropic, so 4 numbers per body for the 4 of π (:func:`pseudo_inertia`) — starts from the
linear estimate (or any start) and minimises the same weighted residuals: the optimiser cannot
leave the consistent set, and no direction of its parameters is free.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from bemore.errors import DataError

PARAMETERS_PER_BODY = ("mass", "first_moment_x", "first_moment_y", "inertia_origin")


@dataclass(frozen=True)
class FrameMotion:
    """Every frame's kinematics at F samples (arrays (n_frames, F)): origin (m), cos/sin of
    the absolute angle, angular velocity (rad/s) and acceleration (rad/s²), origin
    acceleration (m/s²)."""

    ox: np.ndarray
    oy: np.ndarray
    ca: np.ndarray
    sa: np.ndarray
    w: np.ndarray
    eps: np.ndarray
    ax: np.ndarray
    ay: np.ndarray


def frame_motion(model: Any, P: np.ndarray, qf: np.ndarray, vf: np.ndarray, af: np.ndarray,
                 qd: np.ndarray, vd: np.ndarray, ad: np.ndarray) -> FrameMotion:
    """Frame kinematics of ``model`` with parameters P (n_parameters,) at F samples of the free
    (qf, vf, af: (F, n_free)) and driven (qd, vd, ad: (F, n_driven)) coordinates and rates."""
    from bemore.model.kinematics import placements

    T = model._T
    parent, kind, axis, ffree, fdrv = T[0], T[1], T[2], T[3], T[4]
    V = model.tree.fields(np.asarray(P, dtype=float)[None, :])[0]
    ox, oy, ca, sa = placements(T, V, qf, qd)
    n, samples = parent.shape[0], qf.shape[0]
    w, eps, vx, vy, ax, ay = (np.zeros((n, samples)) for _ in range(6))
    for k in range(n):
        p = parent[k]
        if p < 0:
            wp = ep = vpx = vpy = apx = apy = np.zeros(samples)
            dx, dy = ox[k], oy[k]
        else:
            wp, ep, vpx, vpy, apx, apy = w[p], eps[p], vx[p], vy[p], ax[p], ay[p]
            dx, dy = ox[k] - ox[p], oy[k] - oy[p]
        if ffree[k] >= 0:
            q1, q2 = vf[:, ffree[k]], af[:, ffree[k]]
        elif fdrv[k] >= 0:
            q1, q2 = vd[:, fdrv[k]], ad[:, fdrv[k]]
        else:
            q1 = q2 = np.zeros(samples)
        wk, ek = wp.copy(), ep.copy()
        vkx, vky = vpx - wp * dy, vpy + wp * dx
        akx, aky = apx - ep * dy - wp * wp * dx, apy + ep * dx - wp * wp * dy
        if kind[k] == 1:
            wk, ek = wk + axis[k] * q1, ek + axis[k] * q2
        elif kind[k] == 2:
            ex, ey = (ca[k], sa[k]) if axis[k] == 0 else (-sa[k], ca[k])
            vkx, vky = vkx + q1 * ex, vky + q1 * ey
            akx = akx + q2 * ex - 2.0 * wp * q1 * ey
            aky = aky + q2 * ey + 2.0 * wp * q1 * ex
        w[k], eps[k], vx[k], vy[k], ax[k], ay[k] = wk, ek, vkx, vky, akx, aky
    return FrameMotion(ox, oy, ca, sa, w, eps, ax, ay)


def regressor(model: Any, P: np.ndarray, motion: FrameMotion, pivot_point: str = "bar"
              ) -> np.ndarray:
    """Y (F, 3, 4·n_bodies): rows force x, force y (N), moment about ``pivot_point`` (N·m);
    columns π_b = (m, h_x, h_y, I_o) of each body in ``model.description.bodies`` order (see
    the module docstring). ``Y·π`` is (F·3,) = (F_bar_x, F_bar_y, 0) frame by frame."""
    tree = model.tree
    V = tree.fields(np.asarray(P, dtype=float)[None, :])[0]
    g = V[tree.gravity_field]
    point = model.point_names.index(pivot_point)
    frame_p = tree.point_frame[point]
    lx, ly = V[tree.point_fields[point, 0]], V[tree.point_fields[point, 1]]
    px = motion.ox[frame_p] + motion.ca[frame_p] * lx - motion.sa[frame_p] * ly
    py = motion.oy[frame_p] + motion.sa[frame_p] * lx + motion.ca[frame_p] * ly
    samples = motion.ox.shape[1]
    Y = np.zeros((samples, 3, 4 * len(tree.body_frame)))
    for b, k in enumerate(tree.body_frame):
        ca, sa, w, e = motion.ca[k], motion.sa[k], motion.w[k], motion.eps[k]
        gx, gy = motion.ax[k], motion.ay[k] + g  # a_o − g with g = (0, −9.81)
        rx, ry = motion.ox[k] - px, motion.oy[k] - py
        c = 4 * b
        Y[:, 0, c], Y[:, 1, c] = gx, gy
        Y[:, 2, c] = rx * gy - ry * gx
        for j, (ux, uy) in enumerate(((ca, sa), (-sa, ca))):  # R's columns: h_x, h_y
            tx, ty = -e * uy - w * w * ux, e * ux - w * w * uy
            Y[:, 0, c + 1 + j], Y[:, 1, c + 1 + j] = tx, ty
            Y[:, 2, c + 1 + j] = (rx * ty - ry * tx) + (ux * gy - uy * gx)
        Y[:, 2, c + 3] = e
    return Y


def table_parameters(model: Any, P: np.ndarray) -> np.ndarray:
    """π (4·n_bodies,) of the bodies as the parameters P give them (the segment table's)."""
    tree = model.tree
    V = tree.fields(np.asarray(P, dtype=float)[None, :])[0]
    pi = np.empty(4 * len(tree.body_frame))
    for b, fields in enumerate(tree.body_fields):
        m, cx, cy, inertia = (V[f] for f in fields)
        pi[4 * b: 4 * b + 4] = (m, m * cx, m * cy, inertia + m * (cx * cx + cy * cy))
    return pi


def _weighted_rows(Y: np.ndarray, f, weights) -> tuple[np.ndarray, np.ndarray]:
    """The regressor ``Y`` (F, 3, n) or (rows, n) as a matrix (rows, n) and ``f`` as a vector
    (rows,), both scaled by ``weights`` per row when given (e.g. 1/noise)."""
    A = Y.reshape(-1, Y.shape[-1])
    b = np.asarray(f, dtype=float).reshape(-1)
    if weights is not None:
        w = np.asarray(weights, dtype=float).reshape(-1)
        A, b = A * w[:, None], b * w
    return A, b


def _prior_rows(A: np.ndarray, prior: np.ndarray, prior_weight: float,
                prior_sigma: np.ndarray | None) -> np.ndarray:
    """Per-parameter weights (n,) of the pull π − prior: 1/``prior_sigma`` (the prior's
    standard deviations, π's units, data rows weighted by 1/noise), else
    √prior_weight·‖A‖/√n / scale with scale the prior's magnitudes."""
    if prior_sigma is not None:
        return 1.0 / np.asarray(prior_sigma, dtype=float)
    scale = np.maximum(np.abs(prior), 1e-3)
    return np.sqrt(prior_weight) * np.linalg.norm(A) / np.sqrt(A.shape[1]) / scale


def linear_estimate(Y: np.ndarray, f: np.ndarray, prior: np.ndarray,
                    prior_weight: float = 1e-6, weights: np.ndarray | None = None,
                    prior_sigma: np.ndarray | None = None) -> np.ndarray:
    """π (n,) minimising Σ (w·(Y π − f))² + prior_weight·‖Y‖²·‖(π − prior)/scale‖² with
    m ≥ 0 and I_o ≥ 0 (``scipy.optimize.lsq_linear``). ``Y`` (F, 3, n) or (rows, n), ``f``
    matching, ``weights`` per row (default 1; e.g. 1/noise), ``prior`` the table's π, ``scale``
    its magnitudes: the pull decides only the directions the data do not see. With
    ``prior_sigma`` (n,) the pull is Σ ((π − prior)/prior_sigma)² instead (a Gaussian prior
    against noise-normalised rows)."""
    from scipy.optimize import lsq_linear

    A, b = _weighted_rows(Y, f, weights)
    pull = _prior_rows(A, prior, prior_weight, prior_sigma)
    A_full = np.vstack([A, np.diag(pull)])
    b_full = np.concatenate([b, pull * prior])
    lower = np.full(A.shape[1], -np.inf)
    lower[0::4] = 0.0
    lower[3::4] = 0.0
    return lsq_linear(A_full, b_full, bounds=(lower, np.inf), lsmr_tol="auto").x


def pseudo_inertia(theta: np.ndarray) -> np.ndarray:
    """Planar pseudo-inertias J (n, 3, 3) = U·Uᵀ from log-Cholesky parameters θ (n, 4):
    U = [[e^θ0, 0, θ2], [0, e^θ0, θ3], [0, 0, e^θ1]] (positive definite for any θ).

    The factor is the general upper-triangular one with its planar gauge fixed: a planar motion
    sees the second moment only through I_o = Σxx + Σyy, so the split of the second moment
    about the centre of mass between x and y (and its product Σxy) is taken isotropic,
    Σ_c = e^(2θ0)·I. Then m = e^(2θ1), h = e^θ1·(θ2, θ3), I_o = 2e^(2θ0) + θ2² + θ3², and
    θ ↔ π is one-to-one onto the consistent set (m > 0, I_c = I_o − |h|²/m > 0): no direction
    of θ leaves the residuals unchanged."""
    theta = np.atleast_2d(theta)
    U = np.zeros((theta.shape[0], 3, 3))
    U[:, 0, 0] = U[:, 1, 1] = np.exp(theta[:, 0])
    U[:, 2, 2] = np.exp(theta[:, 1])
    U[:, 0, 2], U[:, 1, 2] = theta[:, 2], theta[:, 3]
    return U @ np.transpose(U, (0, 2, 1))


def parameters_of(J: np.ndarray) -> np.ndarray:
    """π (4·n,) of pseudo-inertias J (n, 3, 3): m = J22, h = (J02, J12), I_o = J00 + J11."""
    return np.stack([J[:, 2, 2], J[:, 0, 2], J[:, 1, 2], J[:, 0, 0] + J[:, 1, 1]],
                    axis=1).reshape(-1)


def log_cholesky_of(pi: np.ndarray) -> np.ndarray:
    """θ (n, 4) of :func:`pseudo_inertia` for each body's π (m > 0, I_o > m·|c|²; SI). Raises
    DataError for a π no mass distribution has.

    >>> theta = log_cholesky_of(np.array([2.0, 0.4, -0.2, 0.3]))  # kg, kg·m, kg·m, kg·m²
    >>> np.round(parameters_of(pseudo_inertia(theta)), 12).tolist()
    [2.0, 0.4, -0.2, 0.3]
    """
    rows = []
    for m, hx, hy, io in np.asarray(pi, dtype=float).reshape(-1, 4):
        rest = io - (hx * hx + hy * hy) / max(m, 1e-300)
        if m <= 0 or rest <= 0:
            raise DataError(f"inertial parameters m {m:.4g}, I_o {io:.4g}: no mass "
                            "distribution has them (J not positive definite)")
        root_m = np.sqrt(m)
        rows.append([0.5 * np.log(rest / 2.0), np.log(root_m), hx / root_m, hy / root_m])
    return np.array(rows)


@dataclass
class ConsistentFit:
    """Result of :func:`consistent_fit`: π (4·n,), the pseudo-inertias J (n, 3, 3), θ (n, 4),
    the weighted residual's RMS, and scipy's status."""

    parameters: np.ndarray
    J: np.ndarray
    theta: np.ndarray
    residual_rms: float
    status: int


def _parameter_jacobian(theta: np.ndarray) -> np.ndarray:
    """dπ/dθ (n, 4, 4) of :func:`parameters_of` ∘ :func:`pseudo_inertia`."""
    theta = np.atleast_2d(theta)
    n = theta.shape[0]
    centre, root_m = np.exp(2.0 * theta[:, 0]), np.exp(theta[:, 1])
    out = np.zeros((n, 4, 4))
    out[:, 0, 1] = 2.0 * root_m * root_m                       # m = e^(2θ1)
    out[:, 1, 1], out[:, 1, 2] = root_m * theta[:, 2], root_m   # h_x = e^θ1·θ2
    out[:, 2, 1], out[:, 2, 3] = root_m * theta[:, 3], root_m   # h_y = e^θ1·θ3
    out[:, 3, 0] = 4.0 * centre                                 # I_o = 2e^(2θ0) + θ2² + θ3²
    out[:, 3, 2], out[:, 3, 3] = 2.0 * theta[:, 2], 2.0 * theta[:, 3]
    return out


THETA_PRIOR = 1e-3
"""Weight of θ − θ_start in :func:`consistent_fit`, relative to the data's scale: a weak pull
that keeps a factor the data would push towards the consistent set's edge (a mass or a central
inertia → 0, θ → −∞) at a finite value."""


def consistent_fit(Y: np.ndarray, f: np.ndarray, prior: np.ndarray, theta0: np.ndarray,
                   prior_weight: float = 1e-6, weights: np.ndarray | None = None,
                   theta_reference: np.ndarray | None = None, max_nfev: int = 200,
                   prior_sigma: np.ndarray | None = None) -> ConsistentFit:
    """Minimise the residuals of :func:`linear_estimate` (same ``prior_weight`` or
    ``prior_sigma``) over log-Cholesky parameters θ (n, 4) from ``theta0`` (analytic
    Jacobian), with a weak pull (:data:`THETA_PRIOR`) of θ towards ``theta_reference``
    (default ``theta0``): every iterate's J is positive definite (module docstring)."""
    from scipy.optimize import least_squares

    A, b = _weighted_rows(Y, f, weights)
    pull_pi = _prior_rows(A, prior, prior_weight, prior_sigma)
    size = np.linalg.norm(A) / np.sqrt(A.shape[1])
    shape = np.asarray(theta0).shape
    full_A, full_b = A, b
    # ‖A π − b‖² = ‖R π − Qᵀ b‖² + constant: the fit iterates on the (n, n) triangle.
    Q, A = np.linalg.qr(A)
    b = Q.T @ b
    reference = np.asarray(theta0 if theta_reference is None else theta_reference,
                           dtype=float).reshape(-1)
    pull = np.sqrt(THETA_PRIOR) * size * float(np.median(np.abs(prior)))

    def residuals(theta: np.ndarray) -> np.ndarray:
        pi = parameters_of(pseudo_inertia(theta.reshape(shape)))
        return np.concatenate([A @ pi - b, pull_pi * (pi - prior),
                               pull * (theta - reference)])

    def jacobian(theta: np.ndarray) -> np.ndarray:
        blocks = _parameter_jacobian(theta.reshape(shape))  # (n, 4, 6)
        n = blocks.shape[0]
        D = np.zeros((4 * n, 4 * n))
        for k in range(n):
            D[4 * k: 4 * k + 4, 4 * k: 4 * k + 4] = blocks[k]
        return np.vstack([A @ D, pull_pi[:, None] * D, pull * np.eye(4 * n)])

    from threadpoolctl import threadpool_limits

    # One BLAS thread: the matrices are (126, 54); threads only contend on a shared machine.
    with threadpool_limits(limits=1, user_api="blas"):
        result = least_squares(residuals, np.asarray(theta0, dtype=float).reshape(-1),
                               jac=jacobian, max_nfev=max_nfev, x_scale="jac")
    theta = result.x.reshape(shape)
    J = pseudo_inertia(theta)
    pi = parameters_of(J)
    return ConsistentFit(pi, J, theta, float(np.sqrt(np.mean((full_A @ pi - full_b) ** 2))),
                         int(result.status))


def table_comparison(model: Any, estimate: np.ndarray, table: np.ndarray
                     ) -> list[dict[str, Any]]:
    """Per body: mass (kg), centre of mass (m, body frame) and inertia about it (kg·m²),
    identified against the table's (JSON-ready)."""
    rows = []
    for b, body in enumerate(model.description.bodies):
        row = {"body": body.name}
        for label, pi in (("identified", estimate), ("table", table)):
            m, hx, hy, io = pi[4 * b: 4 * b + 4]
            cx, cy = (hx / m, hy / m) if m > 0 else (float("nan"), float("nan"))
            row[label] = {"mass_kg": float(m), "com_m": [float(cx), float(cy)],
                          "inertia_com_kgm2": float(io - m * (cx * cx + cy * cy))}
        rows.append(row)
    return rows
