"""Planar tree kinematics for one state, in plain Python: frame origins and orientations.

The first steps of :mod:`bemore.model.dynamics` (which compiles these same functions with numba
for its kernels), kept importable without numba: the exemplary model's lumping
(:func:`bemore.model.gymnasts.exemplary_parameters`) needs one straight posture's frames, and
loading numba for it cost ≈ 1 s of every ``bemore synthesize``. Angles in radians, lengths in m;
``math.cos``/``math.sin`` (libm), what numba's compiled code calls too.

Workspace rows (``ws`` is (N_ROWS, max(nF, nb)) float64, allocated once per member): OX, OY
frame origin; CA, SA cos/sin of the frame's absolute angle; CP, SP of its free-rotation part;
CD, SD of its placement and driven part; the other rows belong to the dynamics.
"""

from __future__ import annotations

import math

import numpy as np

OX, OY, CA, SA, CP, SP, W, EPS, VX, VY, AX, AY, DX, DY, EX, EY = range(16)
FX, FY, NZ, QF, QDF, QDDF, TAU, CD, SD = range(16, 25)
N_ROWS = 25


def workspace(tree) -> np.ndarray:
    """A zeroed workspace for one member of ``tree``."""
    width = max(len(tree.frame_parent), len(tree.body_frame), 1)
    return np.zeros((N_ROWS, width))


def driven_angles(T, q_driven, ws):
    """cos/sin of each frame's driven angle sum (placement angles + driven revolutes) → ws."""
    parent, kind, axis, _, fdrv = T[0], T[1], T[2], T[3], T[4]
    angle = T[6]
    n = parent.shape[0]
    total = np.empty(n)
    for k in range(n):
        base = 0.0 if parent[k] < 0 else total[parent[k]]
        base += angle[k]
        if kind[k] == 1 and fdrv[k] >= 0:
            base += axis[k] * q_driven[fdrv[k]]
        total[k] = base
        ws[CD, k] = math.cos(base)
        ws[SD, k] = math.sin(base)


def load_coordinates(T, qf, vf, qd, vd, ad, ws):
    """Copy the free and driven state into per-frame rows (q, q̇, q̈ with free q̈ = 0)."""
    kind, ffree, fdrv = T[1], T[3], T[4]
    for k in range(kind.shape[0]):
        if ffree[k] >= 0:
            ws[QF, k] = qf[ffree[k]]
            ws[QDF, k] = vf[ffree[k]]
            ws[QDDF, k] = 0.0
        elif fdrv[k] >= 0:
            ws[QF, k] = qd[fdrv[k]]
            ws[QDF, k] = vd[fdrv[k]]
            ws[QDDF, k] = ad[fdrv[k]]
        else:
            ws[QF, k] = 0.0
            ws[QDF, k] = 0.0
            ws[QDDF, k] = 0.0


def positions(T, V, ws):
    """Frame origins, orientations, hang vectors d_k and prismatic axes e_k (needs CD/SD, QF)."""
    parent, kind, axis, ffree = T[0], T[1], T[2], T[3]
    at = T[5]
    for k in range(parent.shape[0]):
        p = parent[k]
        if p < 0:
            ox, oy, pc, ps, cp, sp = 0.0, 0.0, 1.0, 0.0, 1.0, 0.0
        else:
            ox, oy, pc, ps = ws[OX, p], ws[OY, p], ws[CA, p], ws[SA, p]
            cp, sp = ws[CP, p], ws[SP, p]
        if kind[k] == 1 and ffree[k] >= 0:
            # Only free rotations need a sine and cosine here.
            th = axis[k] * ws[QF, k]
            c, s = math.cos(th), math.sin(th)
            cp, sp = cp * c - sp * s, sp * c + cp * s
        ws[CP, k], ws[SP, k] = cp, sp
        ca = cp * ws[CD, k] - sp * ws[SD, k]
        sa = sp * ws[CD, k] + cp * ws[SD, k]
        ws[CA, k], ws[SA, k] = ca, sa
        lx, ly = V[at[k, 0]], V[at[k, 1]]
        dx = pc * lx - ps * ly
        dy = ps * lx + pc * ly
        if kind[k] == 2:
            if axis[k] == 0:
                ex, ey = ca, sa
            else:
                ex, ey = -sa, ca
            dx += ws[QF, k] * ex
            dy += ws[QF, k] * ey
            ws[EX, k], ws[EY, k] = ex, ey
        ws[DX, k], ws[DY, k] = dx, dy
        ws[OX, k], ws[OY, k] = ox + dx, oy + dy


def placements(T, V, qf, qd):
    """Frame origins and orientations of F configurations at once (numpy over the samples).

    ``qf`` (F, n_free) and ``qd`` (F, n_driven) are the coordinates (rad or m); returns
    ``(ox, oy, ca, sa)``, each (n_frames, F): origin (m) and cos/sin of the absolute angle —
    the recursion of :func:`driven_angles` and :func:`positions`, vectorised.
    """
    parent, kind, axis, ffree, fdrv, at, angle = T[:7]
    qf, qd = np.atleast_2d(qf), np.atleast_2d(qd)
    n, samples = parent.shape[0], qf.shape[0]
    ox, oy, ca, sa, cp, sp, total = (np.zeros((n, samples)) for _ in range(7))
    for k in range(n):
        p = parent[k]
        if p < 0:
            pox, poy, pc, ps, pcp, psp, base = 0.0, 0.0, 1.0, 0.0, 1.0, 0.0, 0.0
        else:
            pox, poy, pc, ps, pcp, psp, base = ox[p], oy[p], ca[p], sa[p], cp[p], sp[p], total[p]
        q = qf[:, ffree[k]] if ffree[k] >= 0 else qd[:, fdrv[k]] if fdrv[k] >= 0 else 0.0
        base = base + angle[k]
        if kind[k] == 1 and fdrv[k] >= 0:
            base = base + axis[k] * q
        total[k] = base
        cd, sd = np.cos(base), np.sin(base)
        if kind[k] == 1 and ffree[k] >= 0:
            c, s = np.cos(axis[k] * q), np.sin(axis[k] * q)
            pcp, psp = pcp * c - psp * s, psp * c + pcp * s
        cp[k], sp[k] = pcp, psp
        ca[k] = pcp * cd - psp * sd
        sa[k] = psp * cd + pcp * sd
        lx, ly = V[at[k, 0]], V[at[k, 1]]
        dx, dy = pc * lx - ps * ly, ps * lx + pc * ly
        if kind[k] == 2:
            ex, ey = (ca[k], sa[k]) if axis[k] == 0 else (-sa[k], ca[k])
            dx, dy = dx + q * ex, dy + q * ey
        ox[k], oy[k] = pox + dx, poy + dy
    return ox, oy, ca, sa


def static_driven_effort(T, V, qf, qd, coordinate: int) -> np.ndarray:
    """Generalised force (F,) that holds driven coordinate ``coordinate`` still against gravity
    at F configurations (``qf`` (F, n_free), ``qd`` (F, n_driven)): the inverse dynamics with
    zero velocities and accelerations, without spring-dampers, = ∂(potential)/∂q (N·m for a
    revolute, N for a prismatic coordinate)."""
    parent, kind, axis, fdrv = T[0], T[1], T[2], T[4]
    body_frame, body_fields, gravity = T[7], T[8], V[T[12]]
    (joint,) = np.flatnonzero(np.asarray(fdrv) == coordinate)
    ox, _, ca, sa = placements(T, V, qf, qd)
    below = np.zeros(parent.shape[0], dtype=bool)  # frames carried by the joint
    for k in range(parent.shape[0]):
        below[k] = k == joint or (parent[k] >= 0 and below[parent[k]])
    moment = np.zeros(ox.shape[1])
    mass = 0.0
    for b in range(body_frame.shape[0]):
        k = body_frame[b]
        if not below[k]:
            continue
        m, cx, cy = V[body_fields[b, 0]], V[body_fields[b, 1]], V[body_fields[b, 2]]
        moment = moment + m * (ox[k] + ca[k] * cx - sa[k] * cy - ox[joint])
        mass += m
    if kind[joint] == 1:
        # Turning by dq about the joint's origin lifts each centre of mass by axis·dq·(x − x_j).
        return gravity * axis[joint] * moment
    ey = sa[joint] if axis[joint] == 0 else ca[joint]
    return gravity * mass * ey
