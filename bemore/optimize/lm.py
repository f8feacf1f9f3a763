"""Levenberg–Marquardt least squares within bounds: projected steps on the free unknowns.

:func:`lm_bounds` minimises ½·Σ f(x)² for lb ≤ x ≤ ub. Each iteration:

* **Active set.** An unknown at a bound whose gradient pushes it out of the box (at lb with
  ∂cost/∂x > 0, at ub with ∂cost/∂x < 0) is held there for the iteration, and so is one at a
  bound that the step of the others would push out (a coupled unknown's step can point outwards
  against its own gradient; the step is recomputed each time one is added); the others are free.
* **Step.** The Levenberg–Marquardt step of the free unknowns, minimising
  ‖J_F·p + f‖² + μ·‖D_F·p‖², D² the largest diagonal of JᵀJ seen so far (Marquardt's scaling as
  MINPACK keeps it: the step does not depend on the unknowns' units). It is solved from one
  n × n factor per Jacobian (:func:`jacobian_factors`: R with RᵀR = JᵀJ and q with Rᵀq = Jᵀf,
  from the Cholesky factor of JᵀJ when it is well conditioned, else from the Householder QR of
  ``[J | f]``): ‖J_F·p + f‖² = ‖R_F·p + q‖² + const, so every damping tried solves an n-row
  problem.
* **Projection.** The trial point is x + p clipped into the box (Kanzow, Yamashita & Fukushima
  2004; Ceres Solver projects its steps the same way); the predicted reduction is the linear
  model's for the clipped step, and ρ = actual / predicted.
* **Damping.** Nielsen's update (Madsen, Nielsen & Tingleff 2004, "Methods for non-linear least
  squares problems", §3.2): accepted (ρ > 0) μ ← μ·max(1/3, 1 − (2ρ − 1)³), ν ← 2; rejected
  μ ← μ·ν, ν ← 2ν; μ₀ = 1e-2 (:data:`INITIAL_DAMPING`). A large μ makes the
  step the scaled steepest descent of the free unknowns, which the projection never shortens to
  an ascent: the iteration always finds a decrease, like a projected gradient method.
* **Termination** as scipy's ``least_squares``: ``ftol`` (the cost's decrease below ftol·cost
  with ρ > 0.25, and, at the new point, the decrease the linear model predicts for the
  Gauss–Newton step below 1e-2·ftol·cost: a damped step's small gain does not stop it short of
  the minimum, :data:`MODEL_GAIN`), ``xtol`` (‖Δx‖ < xtol·(xtol + ‖x‖)), ``gtol`` (the
  projected gradient's largest entry, the active unknowns' left out, below gtol), or
  ``max_nfev`` calls of ``fun``.

Unlike trust-region reflective (:mod:`bemore.optimize.trf`), whose steps stay strictly inside
the box and shrink with the distance to a bound (Coleman–Li scaling), a step here may land on a
bound, and the unknowns held there drop out of the step. From the same start the two may end in
different minima of a problem that has several: on the bundled sample (two minima, 0.434 and
0.449 mm) Levenberg–Marquardt alone took 31 Jacobians per start on average against trf's 41, but
reached the lower minimum from 75 of 90 search points against trf's 82 (30 GWO seeds × 3
starts; measured with a first damping of 1e-2–1e-1). :func:`trf_then_lm_bounds`, the polish's
default, takes trf's first 8 evaluations and then Levenberg–Marquardt: the lower minimum from 79
of the 90 points and, as trf, on all 30 seeds' kept starts, in 20 % fewer Jacobians (33.2 per
start on average; docs/identify.md, "Algorithms").
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from numpy.linalg import norm

from bemore.errors import OptimisationError
from bemore.optimize.lapack import flapack, solve_upper_triangular


@dataclass
class LeastSquaresResult:
    """What a bounded least-squares solver found: x, its residuals f and Jacobian J (at x), the
    cost ½·Σ f², the evaluations and the status (scipy's codes: 0 max_nfev reached, 1 gtol,
    2 ftol, 3 xtol, 4 ftol and xtol)."""

    x: np.ndarray
    fun: np.ndarray
    jac: np.ndarray
    cost: float
    nfev: int
    njev: int
    status: int


INITIAL_DAMPING = 1e-2
"""μ₀: the first damping, relative to each unknown's own curvature (the damping term is μ·D²,
D² the diagonal of JᵀJ). On the sample's seed-0 starts Levenberg–Marquardt alone took 33, 29
and 25 Jacobians with it, and 36, 39 and 32 with a first damping of 20–130 (the first steps
spent shrinking μ); Madsen, Nielsen & Tingleff advise a small one for a start near the minimum,
as the polish's are."""


def finite_jacobian(J: np.ndarray, x: np.ndarray) -> np.ndarray:
    """``J`` as a float array; OptimisationError when it holds NaN or ±inf (the step would be
    NaN; a factorisation refuses such a matrix too)."""
    J = np.asarray(J, dtype=float)
    # A finite sum has no NaN or ±inf among its terms (either makes it NaN or ±inf): one pass
    # without a temporary; the element test only where the sum is not finite (or overflowed).
    with np.errstate(over="ignore", invalid="ignore"):
        total = np.sum(J)
    if not (np.isfinite(total) or np.all(np.isfinite(J))):
        raise OptimisationError(f"least squares: the Jacobian at x = {np.round(x, 6).tolist()} "
                                "is not finite")
    return J


def qr_factors(J: np.ndarray, f: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """R (n, n; upper triangular) and Qᵀf (n,) of J = Q·R ((m, n), m ≥ n), from one QR of
    ``[J | f]``."""
    m, n = J.shape
    stacked = np.empty((m, n + 1), order="F")
    stacked[:, :n] = J
    stacked[:, n] = f
    qr, _, _, info = flapack().dgeqrf(stacked, overwrite_a=True)
    if info != 0:
        raise OptimisationError(f"least squares: LAPACK dgeqrf failed (info {info})")
    return np.triu(qr[:n, :n]), qr[:n, n].copy()


NORMAL_CONDITION_LIMIT = 1e10
"""Largest condition number of the Jacobian's column-scaled Gram matrix C = S⁻¹·JᵀJ·S⁻¹
(S² = diag JᵀJ) for which :func:`jacobian_factors` takes R from the Cholesky factor of JᵀJ;
above it (or with a zero column) R comes from the Householder QR. The computed Cholesky factor
of a positive definite A satisfies RᵀR = A + E with |E_ij| ≤ c·n·ε·√(A_ii·A_jj) (van der Sluis:
the column scaling costs nothing), so a step solved from it is the exact step of a problem whose
scaled Gram matrix is off by ≈ n·ε ≈ 4e-15, and its relative error is at most
≈ cond(C)·n·ε ≈ 4e-5 at this limit. The solvers need no more: they accept or reject a step on
the actual cost, and test convergence on the gradient Jᵀf computed from J and f themselves, so
the minimum they stop at (gradient 0) does not depend on the factor's rounding. On the bundled
sample cond(C) is 6e5–2e6 (cond(J) ≈ 3e4), and the Cholesky factor equals the QR's R (up to
the rows' signs) to 8e-12 of each row's largest entry."""


def jacobian_factors(J: np.ndarray, f: np.ndarray, g: np.ndarray
                     ) -> tuple[np.ndarray, np.ndarray]:
    """R (n, n; upper triangular) and a vector q (n,) with RᵀR = JᵀJ and Rᵀq = Jᵀf = ``g``, for
    J (m, n), f (m,): every step the solvers take depends on J and f only through these (‖Jp +
    f‖² = ‖Rp + q‖² + a constant). From the Cholesky factor of the n × n Gram matrix JᵀJ (one
    pass over J: 0.55 ms for the sample's 22 414 × 17 Jacobian against 2.4 ms for the QR of
    ``[J | f]``, single-thread BLAS, quiet Xeon) when its column-scaled condition number is at
    most :data:`NORMAL_CONDITION_LIMIT`, else R and Qᵀf from :func:`qr_factors`."""
    with np.errstate(over="ignore", invalid="ignore"):  # a huge J: the QR below
        A = J.T @ J
    scale = np.sqrt(np.diag(A))
    if np.all(np.isfinite(A)) and np.all(scale > 0):
        eigenvalues = np.linalg.eigvalsh(A / np.outer(scale, scale))
        if eigenvalues[0] > eigenvalues[-1] / NORMAL_CONDITION_LIMIT:
            try:
                lower = np.linalg.cholesky(A)
            except np.linalg.LinAlgError:
                return qr_factors(J, f)
            R = lower.T  # Fortran order: LAPACK reads it without a copy
            q, info = flapack().dtrtrs(R, g, lower=False, trans=1, unitdiag=False)
            if info == 0:
                return R, q
    return qr_factors(J, f)


def damped_step(R: np.ndarray, qtf: np.ndarray, D: np.ndarray, mu: float,
                free: np.ndarray) -> np.ndarray:
    """The step p (n,; 0 on the unknowns not ``free``) minimising ‖R_F·p + Qᵀf‖² + μ·‖D_F·p‖²
    over the free unknowns F, from a QR of the (n + |F|) × |F| stacked matrix."""
    n = R.shape[1]
    p = np.zeros(n)
    columns = np.flatnonzero(free)
    if columns.size == 0:
        return p
    A = np.vstack([R[:, columns], np.diag(np.sqrt(mu) * D[columns])])
    b = np.concatenate([-qtf, np.zeros(columns.size)])
    q, r = np.linalg.qr(A)
    p[columns] = solve_upper_triangular(r, q.T @ b)
    return p


def _step_within(R: np.ndarray, qtf: np.ndarray, D: np.ndarray, mu: float, x: np.ndarray,
                 lb: np.ndarray, ub: np.ndarray, active: np.ndarray
                 ) -> np.ndarray:
    """The damped step with the unknowns ``active`` held, then also every unknown at a bound
    that the step would push out of the box (the step recomputed each time one is added: a
    coupled unknown's step can point outwards against its own gradient)."""
    held = active.copy()
    at_lower, at_upper = x <= lb, x >= ub
    while True:
        p = damped_step(R, qtf, D, mu, ~held)
        outwards = ~held & ((at_lower & (p < 0)) | (at_upper & (p > 0)))
        if not outwards.any():
            return p
        held |= outwards


MODEL_GAIN = 1e-2
"""The ftol test also asks that the Gauss–Newton step from the new point is predicted to gain
less than this fraction of ftol·cost: stopped on a small step's small gain alone, a start ended
3e-5 of the box from the minimum trf reaches (a synthetic trial, cost 2e-9 relative above it)."""


def _model_gain(R: np.ndarray, qtf: np.ndarray, g: np.ndarray, D2: np.ndarray, x: np.ndarray,
                lb: np.ndarray, ub: np.ndarray) -> float:
    """The decrease of ½·Σ f² the linear model predicts for the Gauss–Newton step from x (the
    bound-held unknowns held, the step clipped into the box; damped by 1e-12 of each unknown's
    curvature, so that an unknown the residuals barely see gives no infinite step)."""
    active = ((x <= lb) & (g > 0)) | ((x >= ub) & (g < 0))
    p = _step_within(R, qtf, np.sqrt(D2), 1e-12, x, lb, ub, active)
    step = np.clip(x + p, lb, ub) - x
    Rs = R @ step
    return -(float(g @ step) + 0.5 * float(Rs @ Rs))


def lm_bounds(
    fun: Callable[[np.ndarray], np.ndarray],
    jac: Callable[[np.ndarray], np.ndarray],
    x0: np.ndarray,
    lb: np.ndarray,
    ub: np.ndarray,
    max_nfev: int,
    ftol: float = 1e-8,
    xtol: float = 1e-8,
    gtol: float = 1e-8,
    at_start: tuple[np.ndarray, np.ndarray] | None = None,
) -> LeastSquaresResult:
    """Minimise ½·Σ fun(x)² for lb ≤ x ≤ ub from ``x0`` (clipped into the box) by projected
    Levenberg–Marquardt steps (module docstring). ``fun(x)`` gives the residuals (m,),
    ``jac(x)`` their Jacobian (m, n), x in any units (the tolerances are relative, as
    scipy's). ``max_nfev`` bounds the calls of ``fun`` (the first included); the Jacobian is
    evaluated at x0 and at every accepted point, and must be finite (OptimisationError
    otherwise). ``at_start``: the residuals and Jacobian at x0 when already known (x0 in the
    box; neither function is then called there, and nfev and njev count the calls made).
    Status: 0 max_nfev reached, 1 gtol, 2 ftol, 3 xtol, 4 ftol and xtol."""
    lb, ub = np.asarray(lb, dtype=float), np.asarray(ub, dtype=float)
    x = np.clip(np.asarray(x0, dtype=float), lb, ub)
    if at_start is None:
        f = np.asarray(fun(x), dtype=float)
        J = finite_jacobian(jac(x), x)
        nfev, njev = 1, 1
    else:
        f, J = np.asarray(at_start[0], dtype=float), finite_jacobian(at_start[1], x)
        nfev, njev = 0, 0
    cost = 0.5 * float(np.dot(f, f))
    g = J.T @ f
    R, qtf = jacobian_factors(J, f, g)
    D2 = np.maximum(np.sum(R * R, axis=0), np.finfo(float).tiny)  # diag(JᵀJ) = column norms²
    mu, nu = INITIAL_DAMPING, 2.0
    status = None
    while True:
        active = ((x <= lb) & (g > 0)) | ((x >= ub) & (g < 0))
        if norm(np.where(active, 0.0, g), ord=np.inf) < gtol:
            status = 1
        if status is not None or nfev >= max_nfev:
            break
        D = np.sqrt(D2)
        accepted = False
        while not accepted and nfev < max_nfev:
            p = _step_within(R, qtf, D, mu, x, lb, ub, active)
            x_new = np.clip(x + p, lb, ub)
            step = x_new - x
            step_norm = norm(step)
            Rs = R @ step
            predicted = -(float(g @ step) + 0.5 * float(Rs @ Rs))
            if predicted <= 0:  # the clipped step is no descent for the model: damp more
                if step_norm == 0:
                    status = 3
                    break
                mu, nu = mu * nu, 2.0 * nu
                continue
            f_new = np.asarray(fun(x_new), dtype=float)
            nfev += 1
            if not np.all(np.isfinite(f_new)):
                mu, nu = mu * nu, 2.0 * nu
                continue
            cost_new = 0.5 * float(np.dot(f_new, f_new))
            actual = cost - cost_new
            ratio = actual / predicted
            if actual > 0:
                accepted = True
                mu *= max(1.0 / 3.0, 1.0 - (2.0 * ratio - 1.0) ** 3)
                nu = 2.0
            else:
                mu, nu = mu * nu, 2.0 * nu
            ftol_met = actual < ftol * cost and ratio > 0.25
            xtol_met = step_norm < xtol * (xtol + norm(x))
            if ftol_met and xtol_met:
                status = 4
            elif xtol_met:
                status = 3
            if status is not None:
                break
        if accepted:
            x, f, cost = x_new, f_new, cost_new
            J = finite_jacobian(jac(x), x)
            njev += 1
            g = J.T @ f
            R, qtf = jacobian_factors(J, f, g)
            D2 = np.maximum(D2, np.sum(R * R, axis=0))
            if (status is None and ftol_met
                    and _model_gain(R, qtf, g, D2, x, lb, ub) < MODEL_GAIN * ftol * cost):
                status = 2
    return LeastSquaresResult(x=x, fun=f, jac=J, cost=cost, nfev=nfev, njev=njev,
                              status=0 if status is None else status)


TRF_EVALUATIONS = 8
"""Residual evaluations of trust-region reflective before :func:`trf_then_lm_bounds` hands over
to Levenberg–Marquardt (module docstring of :mod:`bemore.optimize.lm`)."""


def trf_then_lm_bounds(
    fun: Callable[[np.ndarray], np.ndarray],
    jac: Callable[[np.ndarray], np.ndarray],
    x0: np.ndarray,
    lb: np.ndarray,
    ub: np.ndarray,
    max_nfev: int,
    ftol: float = 1e-8,
    xtol: float = 1e-8,
    gtol: float = 1e-8,
    trf_evaluations: int = TRF_EVALUATIONS,
) -> LeastSquaresResult:
    """Minimise ½·Σ fun(x)² for lb ≤ x ≤ ub: trust-region reflective
    (:func:`bemore.optimize.trf.trf_bounds`) for its first ``trf_evaluations`` calls of
    ``fun``, then :func:`lm_bounds` from its point, with its residuals and Jacobian there (no
    call repeated). Arguments, counts and status as :func:`lm_bounds`; trf's result when it
    converges first."""
    from bemore.optimize.trf import trf_bounds

    first = trf_bounds(fun, jac, x0, lb, ub, min(trf_evaluations, max_nfev), ftol, xtol, gtol)
    if first.status != 0 or first.nfev >= max_nfev:
        return first
    second = lm_bounds(fun, jac, first.x, lb, ub, max_nfev - first.nfev, ftol, xtol, gtol,
                       at_start=(first.fun, first.jac))
    second.nfev += first.nfev
    second.njev += first.njev
    return second
