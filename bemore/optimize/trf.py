"""Trust-region reflective least squares within bounds, with the step from a QR of the Jacobian.

scipy's ``least_squares(method="trf", tr_solver="exact")`` takes, at every iteration, the
singular value decomposition of the scaled, augmented Jacobian ``[J·D; diag]`` ((m + n) × n,
for the identification m ≈ 22 000 rows and n ≈ 17 unknowns) with its left factor U, only to
form ``Uᵀ f``. :func:`trf_bounds` is the same algorithm (Branch, Coleman & Li 1999, as scipy
implements it: Coleman–Li scaling, reflected and gradient steps, the same trust-region radius
updates and termination tests, the same helper functions) with one change: the SVD's three
numbers are obtained from one Householder QR of ``[J·D | f]`` augmented as scipy does
(LAPACK ``dgeqrf``, ≈ 2·m·n² flop) followed by the SVD of its n × n triangle R = Ur·S·Vᵀ:
``s`` and ``V`` are R's, and ``Uᵀ f = Urᵀ (Qᵀ f)``, Qᵀ f being the QR's last column. The m × n
U is never formed. The numbers are those of the SVD to rounding (a QR is what LAPACK's SVD
of a tall matrix starts with); on the identification's 22 414 × 17 Jacobian it takes ≈ a
quarter of the SVD's time (docs/speed.md).

The tall matrix itself is not factorised at every iteration either: once per Jacobian,
:func:`bemore.optimize.lm.jacobian_factors` gives an n × n R with RᵀR = JᵀJ and q with
Rᵀq = Jᵀf, and each iteration factorises the (2n) × n matrix ``[R·D; diag]`` with ``[q; 0]``,
which has the same Gram matrix and the same product with the residuals as scipy's augmented
Jacobian and residuals, hence the same s, V and Uᵀf to rounding; ``select_step`` gets R·D for
J·D (it uses only ‖J·D·s‖).

Only the case bemore uses is kept: finite bounds on some or all unknowns, a plain (not robust)
loss, ``x_scale = 1``.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from numpy.linalg import norm

from bemore.optimize.lapack import thin_svd
from bemore.optimize.lm import (
    LeastSquaresResult,
    finite_jacobian,
    jacobian_factors,
    qr_factors,
)
from bemore.optimize.trf_steps import (
    CL_scaling_vector,
    check_termination,
    compute_grad,
    make_strictly_feasible,
    select_step,
    solve_lsq_trust_region,
    update_tr_radius,
)

TrustRegionResult = LeastSquaresResult
"""What :func:`trf_bounds` found (the fields and status codes of every bounded solver here)."""


def svd_factors(J_augmented: np.ndarray, f_augmented: np.ndarray
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Singular values s (n,), right singular vectors V (n, n; columns) of ``J_augmented``
    ((M, n), M ≥ n) and ``Uᵀ f_augmented`` (n,), U its left singular vectors (M, n), from one
    QR of ``[J_augmented | f_augmented]`` and an SVD of the n × n triangle (module docstring)."""
    R, qtf = qr_factors(J_augmented, f_augmented)
    Ur, s, Vt = thin_svd(R)
    return s, Vt.T, Ur.T @ qtf


def trf_bounds(
    fun: Callable[[np.ndarray], np.ndarray],
    jac: Callable[[np.ndarray], np.ndarray],
    x0: np.ndarray,
    lb: np.ndarray,
    ub: np.ndarray,
    max_nfev: int,
    ftol: float = 1e-8,
    xtol: float = 1e-8,
    gtol: float = 1e-8,
) -> TrustRegionResult:
    """Minimise ½·Σ fun(x)² for lb ≤ x ≤ ub from ``x0`` (scipy's trust-region reflective
    algorithm with the exact trust-region solver; module docstring). ``fun(x)`` gives the
    residuals (m,), ``jac(x)`` their Jacobian (m, n), x in any units (the tolerances are
    scipy's, relative). ``max_nfev`` bounds the calls of ``fun`` (the first included); the
    Jacobian is evaluated at x0 and at every accepted point, and must be finite
    (OptimisationError otherwise)."""
    lb, ub = np.asarray(lb, dtype=float), np.asarray(ub, dtype=float)
    x = make_strictly_feasible(np.asarray(x0, dtype=float), lb, ub)
    f = np.asarray(fun(x), dtype=float)
    J = finite_jacobian(jac(x), x)
    nfev, njev = 1, 1
    m, n = J.shape
    cost = 0.5 * float(np.dot(f, f))
    g = compute_grad(J, f)

    v, dv = CL_scaling_vector(x, g, lb, ub)
    Delta = norm(x / v**0.5)
    if Delta == 0:
        Delta = 1.0
    R, q = jacobian_factors(J, f, g)
    alpha = 0.0  # Levenberg–Marquardt parameter
    status = None
    while True:
        v, dv = CL_scaling_vector(x, g, lb, ub)
        g_norm = norm(g * v, ord=np.inf)
        if g_norm < gtol:
            status = 1
        if status is not None or nfev == max_nfev:
            break
        d = v**0.5
        diag_h = g * dv
        g_h = d * g
        # scipy's SVD of [J·D; diag(diag_h)^½] with [f; 0], from the n × n factors: R·D has
        # the Gram matrix of J·D, and J·D enters select_step only through ‖J·D·s‖.
        J_h = R * d
        s, V, uf = svd_factors(np.vstack([J_h, np.diag(diag_h**0.5)]),
                               np.concatenate([q, np.zeros(n)]))
        theta = max(0.995, 1 - g_norm)  # how far short of a bound a step stops

        actual_reduction = -1.0
        while actual_reduction <= 0 and nfev < max_nfev:
            p_h, alpha, _ = solve_lsq_trust_region(n, m, uf, s, V, Delta, initial_alpha=alpha)
            p = d * p_h
            step, step_h, predicted_reduction = select_step(
                x, J_h, diag_h, g_h, p, p_h, d, Delta, lb, ub, theta)
            x_new = make_strictly_feasible(x + step, lb, ub, rstep=0)
            f_new = np.asarray(fun(x_new), dtype=float)
            nfev += 1
            step_h_norm = norm(step_h)
            if not np.all(np.isfinite(f_new)):
                Delta = 0.25 * step_h_norm
                continue
            cost_new = 0.5 * float(np.dot(f_new, f_new))
            actual_reduction = cost - cost_new
            Delta_new, ratio = update_tr_radius(
                Delta, actual_reduction, predicted_reduction, step_h_norm,
                step_h_norm > 0.95 * Delta)
            status = check_termination(actual_reduction, cost, norm(step), norm(x), ratio,
                                       ftol, xtol)
            if status is not None:
                break
            alpha *= Delta / Delta_new
            Delta = Delta_new

        if actual_reduction > 0:
            x, f, cost = x_new, f_new, cost_new
            J = finite_jacobian(jac(x), x)
            njev += 1
            g = compute_grad(J, f)
            R, q = jacobian_factors(J, f, g)
    return TrustRegionResult(x=x, fun=f, jac=J, cost=cost, nfev=nfev, njev=njev,
                             status=0 if status is None else status)
