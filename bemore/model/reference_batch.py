"""The :class:`~bemore.model.core.Model`'s state-level helpers as numba loops over states.

Point positions, hybrid dynamics and energy of many states, each a loop over the scalar
reference functions of :mod:`bemore.model.dynamics`. They live apart from ``core.py`` so that
``import bemore.model`` does not import numba: the Model methods that need them import this
module when first called (the identification path never does). Units SI.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from bemore.model import dynamics as dyn


@njit(cache=True)
def points_batch(T, Vs, q, nf, out):
    """Named points for states q (B, N, n) with per-member fields Vs (B, n_fields)."""
    width = max(T[0].shape[0], T[7].shape[0], 1)
    ws = np.zeros((dyn.N_ROWS, width))
    zeros = np.zeros(q.shape[2])
    for b in range(q.shape[0]):
        for i in range(q.shape[1]):
            qf = q[b, i, :nf]
            qd = q[b, i, nf:]
            dyn.prepare(T, Vs[b], qf, zeros[:nf], qd, zeros[nf:], zeros[nf:], ws)
            dyn.point_positions_one(T, Vs[b], ws, out[b, i])


@njit(cache=True)
def hybrid_batch(T, Vs, qf, vf, qd, vd, ad, acc, eff, ok):
    """Free accelerations and driven efforts for N states (member index per state in Vs)."""
    nf = qf.shape[1]
    nd = qd.shape[1]
    width = max(T[0].shape[0], T[7].shape[0], 1)
    ws = np.zeros((dyn.N_ROWS, width))
    Mff = np.zeros((nf, nf))
    L = np.zeros((nf, nf))
    Mdf = np.zeros((nd, nf))
    rhs = np.zeros(nf)
    tau0d = np.zeros(nd)
    for i in range(qf.shape[0]):
        dyn.prepare(T, Vs[i], qf[i], vf[i], qd[i], vd[i], ad[i], ws)
        dyn.free_dynamics(T, Vs[i], qf[i], vf[i], qd[i], vd[i], ad[i], ws, Mff, Mdf, rhs, tau0d)
        ok[i] = dyn.cholesky_factor(Mff, L)
        if not ok[i]:
            continue
        dyn.cholesky_solve(L, rhs, acc[i])
        for r in range(nd):
            s = tau0d[r]
            for j in range(nf):
                s += Mdf[r, j] * acc[i, j]
            eff[i, r] = s


@njit(cache=True)
def energy_batch(T, Vs, qf, vf, qd, vd, out):
    """Total mechanical energy (J) of N states (member index per state in Vs) → out (N,)."""
    width = max(T[0].shape[0], T[7].shape[0], 1)
    ws = np.zeros((dyn.N_ROWS, width))
    for i in range(qf.shape[0]):
        dyn.prepare(T, Vs[i], qf[i], vf[i], qd[i], vd[i], vd[i] * 0.0, ws)
        dyn.motion(T, ws, True)
        out[i] = dyn.energy_one(T, Vs[i], qf[i], vf[i], ws)
