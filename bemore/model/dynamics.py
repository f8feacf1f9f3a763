"""Planar tree dynamics for one state: kinematics, RNEA, mass matrix, hybrid dynamics.

Scalar numba functions over the compiled :class:`~bemore.model.tree.Tree` arrays (``T``, see
``Tree.kernel_arrays``) and one member's field vector ``V``. They are the reference the batched
integrator (``kernels.py``) calls, and what the tests compare with Pinocchio.

Recursion (world frame, z out of the plane, ``zx(u) = ẑ × u = (−u_y, u_x)``): frame k hangs
from frame p at ``d_k = R(A_p)·at_k (+ q_k·e_k if prismatic)``; ``ω_k = ω_p + s·q̇_k`` (revolute),
``v_k = v_p + ω_p zx(d_k) + q̇_k e_k``, ``a_k = a_p + ε_p zx(d_k) − ω_p² d_k + 2ω_p q̇_k zx(e_k) +
q̈_k e_k``. Backward: body force ``m(a_c − g)``, moment ``I ε``; the generalised force of a
coordinate is ``s·N_k`` (revolute) or ``e_k·F_k`` (prismatic). Units SI.

Workspace rows (``ws`` is (N_ROWS, max(nF, nb)) float64, allocated once per member): see
:mod:`bemore.model.kinematics`, whose plain-Python frame kinematics are compiled here.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from bemore.model import kinematics as _kinematics
from bemore.model.kinematics import (  # noqa: F401  (the workspace's rows, used below and by kernels)
    AX,
    AY,
    CA,
    CD,
    CP,
    DX,
    DY,
    EPS,
    EX,
    EY,
    FX,
    FY,
    N_ROWS,
    NZ,
    OX,
    OY,
    QDDF,
    QDF,
    QF,
    SA,
    SD,
    SP,
    TAU,
    VX,
    VY,
    W,
    workspace,
)

# The kinematics' plain-Python definitions, compiled.
driven_angles = njit(cache=True)(_kinematics.driven_angles)
load_coordinates = njit(cache=True)(_kinematics.load_coordinates)
positions = njit(cache=True)(_kinematics.positions)


@njit(cache=True)
def motion(T, ws, use_velocity):
    """Angular/linear velocity and acceleration of every frame origin (q̈ from row QDDF)."""
    parent, kind, axis = T[0], T[1], T[2]
    for k in range(parent.shape[0]):
        p = parent[k]
        if p < 0:
            wp = ep = vx = vy = ax = ay = 0.0
        else:
            wp, ep = ws[W, p], ws[EPS, p]
            vx, vy, ax, ay = ws[VX, p], ws[VY, p], ws[AX, p], ws[AY, p]
        if not use_velocity:
            wp = 0.0
        dx, dy = ws[DX, k], ws[DY, k]
        qd, qdd = ws[QDF, k], ws[QDDF, k]
        w, e = wp, ep
        vx += -wp * dy
        vy += wp * dx
        ax += -ep * dy - wp * wp * dx
        ay += ep * dx - wp * wp * dy
        if kind[k] == 1:
            if use_velocity:
                w += axis[k] * qd
            e += axis[k] * qdd
        elif kind[k] == 2:
            ex, ey = ws[EX, k], ws[EY, k]
            if use_velocity:
                vx += qd * ex
                vy += qd * ey
                ax += -2.0 * wp * qd * ey
                ay += 2.0 * wp * qd * ex
            ax += qdd * ex
            ay += qdd * ey
        ws[W, k], ws[EPS, k] = w, e
        ws[VX, k], ws[VY, k], ws[AX, k], ws[AY, k] = vx, vy, ax, ay


@njit(cache=True)
def backward(T, V, ws, gravity_on, use_velocity):
    """Generalised forces of every frame's coordinate into row TAU (RNEA backward pass)."""
    parent, kind, axis = T[0], T[1], T[2]
    body_frame, body_fields, gfield = T[7], T[8], T[12]
    n = parent.shape[0]
    g = V[gfield] if gravity_on else 0.0
    for k in range(n):
        ws[FX, k] = 0.0
        ws[FY, k] = 0.0
        ws[NZ, k] = 0.0
    for b in range(body_frame.shape[0]):
        k = body_frame[b]
        m, cx, cy, inertia = (V[body_fields[b, 0]], V[body_fields[b, 1]],
                              V[body_fields[b, 2]], V[body_fields[b, 3]])
        ca, sa = ws[CA, k], ws[SA, k]
        rx = ca * cx - sa * cy
        ry = sa * cx + ca * cy
        w = ws[W, k] if use_velocity else 0.0
        e = ws[EPS, k]
        acx = ws[AX, k] - e * ry - w * w * rx
        acy = ws[AY, k] + e * rx - w * w * ry
        fx = m * acx
        fy = m * (acy + g)
        ws[FX, k] += fx
        ws[FY, k] += fy
        ws[NZ, k] += inertia * e + rx * fy - ry * fx
    for k in range(n - 1, -1, -1):
        if kind[k] == 1:
            ws[TAU, k] = axis[k] * ws[NZ, k]
        elif kind[k] == 2:
            ws[TAU, k] = ws[EX, k] * ws[FX, k] + ws[EY, k] * ws[FY, k]
        else:
            ws[TAU, k] = 0.0
        p = parent[k]
        if p >= 0:
            ws[FX, p] += ws[FX, k]
            ws[FY, p] += ws[FY, k]
            ws[NZ, p] += ws[NZ, k] + ws[DX, k] * ws[FY, k] - ws[DY, k] * ws[FX, k]


@njit(cache=True)
def unit_column(T, V, ws, frame):
    """M[:, coordinate of ``frame``] into row TAU (needs positions; clobbers motion rows)."""
    n = T[0].shape[0]
    saved = np.empty(n)
    for k in range(n):
        saved[k] = ws[QDDF, k]
        ws[QDDF, k] = 1.0 if k == frame else 0.0
    motion(T, ws, False)
    backward(T, V, ws, False, False)
    for k in range(n):
        ws[QDDF, k] = saved[k]


@njit(cache=True)
def free_dynamics(T, V, qf, vf, qd, vd, ad, ws, Mff, Mdf, rhs, tau0d):
    """Assemble M_ff q̈_f = rhs at one state (free q̈ = 0 in tau0); positions must be loaded.

    ``rhs`` = spring-damper forces − RNEA(q, q̇, q̈_f = 0, q̈_d) on the free coordinates;
    ``tau0d`` = RNEA on the driven ones; ``Mdf`` the driven-free block (for the efforts).
    """
    ffree, fdrv = T[3], T[4]
    springs = T[9]
    n = ffree.shape[0]
    motion(T, ws, True)
    backward(T, V, ws, True, True)
    for k in range(n):
        if ffree[k] >= 0:
            i = ffree[k]
            s = 0.0
            if springs[i, 0] >= 0:
                s = -V[springs[i, 0]] * (qf[i] - V[springs[i, 2]]) - V[springs[i, 1]] * vf[i]
            rhs[i] = s - ws[TAU, k]
        elif fdrv[k] >= 0:
            tau0d[fdrv[k]] = ws[TAU, k]
    for j_frame in range(n):
        j = ffree[j_frame]
        if j < 0:
            continue
        unit_column(T, V, ws, j_frame)
        for k in range(n):
            if ffree[k] >= 0:
                Mff[ffree[k], j] = ws[TAU, k]
            elif fdrv[k] >= 0:
                Mdf[fdrv[k], j] = ws[TAU, k]


@njit(cache=True)
def cholesky_factor(A, L):
    """Cholesky factor L of a small symmetric matrix A; returns False if A is not SPD."""
    n = A.shape[0]
    for i in range(n):
        for j in range(i + 1):
            s = A[i, j]
            for k in range(j):
                s -= L[i, k] * L[j, k]
            if i == j:
                if not s > 0.0:
                    return False
                L[i, i] = np.sqrt(s)
            else:
                L[i, j] = s / L[j, j]
    return True


@njit(cache=True)
def cholesky_solve(L, b, x):
    """Solve L Lᵀ x = b (x may not alias b)."""
    n = L.shape[0]
    for i in range(n):
        s = b[i]
        for k in range(i):
            s -= L[i, k] * x[k]
        x[i] = s / L[i, i]
    for i in range(n - 1, -1, -1):
        s = x[i]
        for k in range(i + 1, n):
            s -= L[k, i] * x[k]
        x[i] = s / L[i, i]


@njit(cache=True)
def prepare(T, V, qf, vf, qd, vd, ad, ws):
    """Load a state and compute positions (driven trig computed here, not precomputed)."""
    load_coordinates(T, qf, vf, qd, vd, ad, ws)
    driven_angles(T, qd, ws)
    positions(T, V, ws)


@njit(cache=True)
def point_positions_one(T, V, ws, out):
    """Named points (np, 2) from loaded positions."""
    pframe, pfields = T[10], T[11]
    for i in range(pframe.shape[0]):
        k = pframe[i]
        px, py = V[pfields[i, 0]], V[pfields[i, 1]]
        ca, sa = ws[CA, k], ws[SA, k]
        out[i, 0] = ws[OX, k] + ca * px - sa * py
        out[i, 1] = ws[OY, k] + sa * px + ca * py


@njit(cache=True)
def energy_one(T, V, qf, vf, ws):
    """Kinetic + gravity + spring energy (J) from a loaded state with velocities (motion done)."""
    body_frame, body_fields, springs = T[7], T[8], T[9]
    g = V[T[12]]
    total = 0.0
    for b in range(body_frame.shape[0]):
        k = body_frame[b]
        m, cx, cy, inertia = (V[body_fields[b, 0]], V[body_fields[b, 1]],
                              V[body_fields[b, 2]], V[body_fields[b, 3]])
        ca, sa = ws[CA, k], ws[SA, k]
        rx = ca * cx - sa * cy
        ry = sa * cx + ca * cy
        w = ws[W, k]
        vx = ws[VX, k] - w * ry
        vy = ws[VY, k] + w * rx
        total += 0.5 * m * (vx * vx + vy * vy) + 0.5 * inertia * w * w
        total += m * g * (ws[OY, k] + ry)
    for i in range(springs.shape[0]):
        if springs[i, 0] >= 0:
            dq = qf[i] - V[springs[i, 2]]
            total += 0.5 * V[springs[i, 0]] * dq * dq
    return total


@njit(cache=True)
def set_free_accelerations(T, af, ws):
    """Put given free accelerations into row QDDF (for inverse dynamics with every q̈ known)."""
    ffree = T[3]
    for k in range(ffree.shape[0]):
        if ffree[k] >= 0:
            ws[QDDF, k] = af[ffree[k]]


@njit(cache=True)
def full_matrices(T, V, qf, vf, qd, vd, af, ad, ws, M, tau):
    """Full mass matrix M (n, n) and inverse dynamics τ (n,), coordinates ordered free, driven.

    τ = M q̈ + bias (Coriolis, centrifugal, gravity); spring-dampers are not included.
    """
    ffree, fdrv = T[3], T[4]
    nf = qf.shape[0]
    n = ffree.shape[0]
    prepare(T, V, qf, vf, qd, vd, ad, ws)
    set_free_accelerations(T, af, ws)
    motion(T, ws, True)
    backward(T, V, ws, True, True)
    for k in range(n):
        if ffree[k] >= 0:
            tau[ffree[k]] = ws[TAU, k]
        elif fdrv[k] >= 0:
            tau[nf + fdrv[k]] = ws[TAU, k]
    for jf in range(n):
        if ffree[jf] >= 0:
            j = ffree[jf]
        elif fdrv[jf] >= 0:
            j = nf + fdrv[jf]
        else:
            continue
        unit_column(T, V, ws, jf)
        for k in range(n):
            if ffree[k] >= 0:
                M[ffree[k], j] = ws[TAU, k]
            elif fdrv[k] >= 0:
                M[nf + fdrv[k], j] = ws[TAU, k]
