"""Batched integrator: ROS34PW2 Rosenbrock-W steps for a population of parameter vectors.

Free state y = (q, v). The approximate Jacobian J = [[0, I], [−M₀⁻¹K, −M₀⁻¹C]] (K, C: the
spring-damper stiffness and damping, M₀ the free-free mass matrix frozen at the step start)
makes the spring-dampers implicit; with it, (I/(γh) − J) u = r reduces to one SPD solve with
W = M₀ + γhC + γ²h²K per stage: W u_v = γh(M₀ r_v − γhK r_q), u_q = γh(r_q + u_v).
ROS34PW2 (Rang & Angermann 2005, tableau in ``rosenbrock.py``) is a W-method: order 3 whatever
J is, L-stable.
The stage accelerations are exact (M(Y_i) q̈ = rhs solved at every stage). Everything that depends
only on the driven coordinates (their values and the cos/sin of the driven angle sums at every
stage time) is precomputed once per trial and shared by the batch; members run in parallel.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from bemore.model.dynamics import (
    CD,
    SD,
    cholesky_factor,
    cholesky_solve,
    free_dynamics,
    load_coordinates,
    point_positions_one,
    positions,
)
from bemore.model.rosenbrock import A_T, C_T, GAMMA, M_T, STAGE_TIMES

# The tableau, re-exported: callers of the reference kernel pass these (one definition, in
# rosenbrock.py, which needs no numba).
__all__ = ["A_T", "C_T", "GAMMA", "M_T", "STAGE_TIMES", "integrate_batch"]


@njit(cache=True)
def _eval(T, V, q, v, qd, vd, ad, cd, sd, ws, Mff, Mdf, rhs, tau0d):
    load_coordinates(T, q, v, qd, vd, ad, ws)
    nF = cd.shape[0]
    for k in range(nF):
        ws[CD, k] = cd[k]
        ws[SD, k] = sd[k]
    positions(T, V, ws)
    free_dynamics(T, V, q, v, qd, vd, ad, ws, Mff, Mdf, rhs, tau0d)


@njit(cache=True)
def _nan_lane(b, out_q, out_qd, out_eff, out_pts, cost, from_frame):
    for f in range(from_frame, out_q.shape[1]):
        out_q[b, f, :] = np.nan
        out_qd[b, f, :] = np.nan
    for f in range(from_frame, out_eff.shape[1]):
        out_eff[b, f, :] = np.nan
    for f in range(from_frame, out_pts.shape[1]):
        out_pts[b, f, :, :] = np.nan
    cost[b] = np.nan


@njit(cache=True)
def _record(T, V, b, f, ws, q, v, qd_f, vd_f, ad_f, cd_f, sd_f, Mff, Mdf, rhs, tau0d, L, acc,
            pts, out_q, out_qd, out_eff, out_pts, measured, selection, flags):
    """Evaluate at frame f and store what is asked; returns the squared error (or -1 on fault)."""
    _eval(T, V, q, v, qd_f, vd_f, ad_f, cd_f, sd_f, ws, Mff, Mdf, rhs, tau0d)
    nf = q.shape[0]
    if flags[0]:
        for i in range(nf):
            out_q[b, f, i] = q[i]
            out_qd[b, f, i] = v[i]
    if flags[1]:
        if not cholesky_factor(Mff, L):
            return -1.0
        cholesky_solve(L, rhs, acc)
        for i in range(tau0d.shape[0]):
            s = tau0d[i]
            for j in range(nf):
                s += Mdf[i, j] * acc[j]
            out_eff[b, f, i] = s
    err = 0.0
    if flags[2] or flags[3]:
        point_positions_one(T, V, ws, pts)
        if flags[2]:
            out_pts[b, f, :, :] = pts
        if flags[3]:
            for s_i in range(selection.shape[0]):
                mx, my = measured[f, s_i, 0], measured[f, s_i, 1]
                if np.isfinite(mx) and np.isfinite(my):
                    ex = pts[selection[s_i], 0] - mx
                    ey = pts[selection[s_i], 1] - my
                    err += ex * ex + ey * ey
    return err


@njit(cache=True, parallel=True)
def integrate_batch(T, Vs, valid, q0, v0, qd_s, vd_s, ad_s, cd_s, sd_s, h, n_sub, a_t, c_t,
                    m_t, gamma, measured, selection, flags, max_abs,
                    out_q, out_qd, out_eff, out_pts, cost):
    """Integrate every member b (row of Vs) over the trial; see simulate.py for the shapes.

    Stage arrays (``qd_s``…, shape (n_steps + 1, 4, ·)) hold the driven state at each stage time
    of each step (row n_steps, stage 0: the final time). flags: store state, efforts, points,
    accumulate the cost against ``measured`` (F, n_sel, 2) at points ``selection``.
    A member whose state leaves ±max_abs or stops being finite gets NaN from then on.
    """
    B = Vs.shape[0]
    nf = q0.shape[1]
    nd = qd_s.shape[2]
    n_steps = qd_s.shape[0] - 1
    n_points = T[10].shape[0]
    nF = T[0].shape[0]
    width = max(nF, T[7].shape[0], 1)
    hg = h * gamma
    for b in prange(B):
        if not valid[b]:
            _nan_lane(b, out_q, out_qd, out_eff, out_pts, cost, 0)
            continue
        V = Vs[b]
        ws = np.zeros((25, width))
        Mff = np.zeros((nf, nf))
        M0 = np.zeros((nf, nf))
        Wm = np.zeros((nf, nf))
        L = np.zeros((nf, nf))
        LW = np.zeros((nf, nf))
        Mdf = np.zeros((nd, nf))
        rhs = np.zeros(nf)
        acc = np.zeros(nf)
        tmp = np.zeros(nf)
        tau0d = np.zeros(nd)
        pts = np.zeros((n_points, 2))
        q = q0[b].copy()
        v = v0[b].copy()
        Yq = np.zeros(nf)
        Yv = np.zeros(nf)
        Uq = np.zeros((4, nf))
        Uv = np.zeros((4, nf))
        K = np.zeros(nf)
        C = np.zeros(nf)
        springs = T[9]
        for i in range(nf):
            if springs[i, 0] >= 0:
                K[i] = V[springs[i, 0]]
                C[i] = V[springs[i, 1]]
        total = 0.0
        failed = False
        frame = 0
        for n in range(n_steps + 1):
            at_frame = n % n_sub == 0
            if at_frame:
                err = _record(T, V, b, frame, ws, q, v, qd_s[n, 0], vd_s[n, 0], ad_s[n, 0],
                              cd_s[n, 0], sd_s[n, 0], Mff, Mdf, rhs, tau0d, L, acc, pts,
                              out_q, out_qd, out_eff, out_pts, measured, selection, flags)
                if err < 0.0 or not np.isfinite(err):
                    failed = True
                    break
                total += err
                frame += 1
            if n == n_steps:
                break
            for s in range(4):
                if s == 0:
                    for i in range(nf):
                        Yq[i] = q[i]
                        Yv[i] = v[i]
                else:
                    for i in range(nf):
                        yq = q[i]
                        yv = v[i]
                        for j in range(s):
                            yq += a_t[s, j] * Uq[j, i]
                            yv += a_t[s, j] * Uv[j, i]
                        Yq[i] = yq
                        Yv[i] = yv
                _eval(T, V, Yq, Yv, qd_s[n, s], vd_s[n, s], ad_s[n, s], cd_s[n, s],
                      sd_s[n, s], ws, Mff, Mdf, rhs, tau0d)
                if s == 0:
                    for i in range(nf):
                        for j in range(nf):
                            M0[i, j] = Mff[i, j]
                            Wm[i, j] = Mff[i, j]
                        Wm[i, i] += hg * C[i] + hg * hg * K[i]
                    if not cholesky_factor(Wm, LW):
                        failed = True
                        break
                    # M0 · acc = rhs exactly at the step start.
                    for i in range(nf):
                        tmp[i] = rhs[i]
                else:
                    if not cholesky_factor(Mff, L):
                        failed = True
                        break
                    cholesky_solve(L, rhs, acc)
                    for i in range(nf):
                        sm = 0.0
                        for j in range(nf):
                            sm += M0[i, j] * acc[j]
                        tmp[i] = sm
                # r_q = Yv + Σ c/h Uq_j ; r_v = acc + Σ c/h Uv_j ; tmp holds M0·acc so far.
                for i in range(nf):
                    rq = Yv[i]
                    cv = 0.0
                    for j in range(s):
                        rq += c_t[s, j] / h * Uq[j, i]
                        cv += c_t[s, j] / h * Uv[j, i]
                    Yq[i] = rq  # reuse Yq as r_q
                    acc[i] = cv
                for i in range(nf):
                    sm = 0.0
                    for j in range(nf):
                        sm += M0[i, j] * acc[j]
                    rhs[i] = hg * (tmp[i] + sm) - hg * hg * K[i] * Yq[i]
                cholesky_solve(LW, rhs, tmp)
                for i in range(nf):
                    Uv[s, i] = tmp[i]
                    Uq[s, i] = hg * (Yq[i] + tmp[i])
            if failed:
                break
            for i in range(nf):
                for j in range(4):
                    q[i] += m_t[j] * Uq[j, i]
                    v[i] += m_t[j] * Uv[j, i]
                if not (abs(q[i]) < max_abs and abs(v[i]) < max_abs):
                    failed = True
        if failed:
            _nan_lane(b, out_q, out_qd, out_eff, out_pts, cost, max(frame - 1, 0))
        else:
            cost[b] = total

