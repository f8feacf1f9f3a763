"""Driven state at every stage time of every integration step, precomputed once per trial.

Between samples the driven coordinates follow the quintic Hermite interpolant of (q, q̇, q̈).
:func:`stage_arrays` gives the reference kernel's full arrays (one shared motion);
:func:`driven_table` gives the generated kernels' table of only the values their code reads
(``Program.slots``), for one shared motion or one motion per member. Units SI (m, rad, s).
"""

from __future__ import annotations

import functools

import numpy as np
from numba import njit

from bemore.model import kernels
from bemore.model.generated import angle_terms
from bemore.model.tree import Tree

# Powers 0..5 of the quintic Hermite basis: q0, h·v0, h²·a0, h²·a1, h·v1, q1.
_HERMITE = np.array([
    [1, 0, 0, -10, 15, -6],
    [0, 1, 0, -6, 8, -3],
    [0, 0, 0.5, -1.5, 1.5, -0.5],
    [0, 0, 0, 0.5, -1, 0.5],
    [0, 0, 0, -4, 7, -3],
    [0, 0, 0, 10, -15, 6],
], dtype=np.float64)


def _step_layout(F: int, substeps: int) -> tuple[np.ndarray, np.ndarray]:
    """Sample interval (n_steps + 1,) of every step and its sub-step offset within it."""
    n_steps = (F - 1) * substeps
    step = np.arange(n_steps + 1)
    interval = np.minimum(step // substeps, F - 2)
    return interval, step - interval * substeps


def _bases(tau: np.ndarray, dt: float) -> tuple[np.ndarray, ...]:
    """Hermite weights (..., 6) of value, rate, acceleration at fractions ``tau`` (...) of a
    sample interval of ``dt`` s."""
    tau = np.asarray(tau, dtype=np.float64)
    powers = np.cumprod(np.concatenate([np.ones_like(tau)[..., None],
                                        np.repeat(tau[..., None], 5, axis=-1)], axis=-1), axis=-1)
    d1 = np.zeros_like(powers)
    d1[..., 1:] = powers[..., :-1] * np.arange(1, 6)
    d2 = np.zeros_like(powers)
    d2[..., 2:] = powers[..., :-2] * (np.arange(2, 6) * np.arange(1, 5))
    return powers @ _HERMITE.T, d1 @ _HERMITE.T / dt, d2 @ _HERMITE.T / dt**2


def interpolate(q: np.ndarray, qd: np.ndarray, qdd: np.ndarray, dt: float, substeps: int,
                derivatives: tuple[int, ...] = (0, 1, 2)) -> list[np.ndarray]:
    """Driven value/rate/acceleration (``derivatives``) at every stage time.

    q, qd, qdd: samples (F, C) (any columns); returns arrays (n_steps + 1, 4, C).
    """
    F = q.shape[0]
    interval, offset = _step_layout(F, substeps)
    knots = np.stack([q[interval], dt * qd[interval], dt**2 * qdd[interval],
                      dt**2 * qdd[interval + 1], dt * qd[interval + 1], q[interval + 1]],
                     axis=1)  # (n_steps + 1, 6, C)
    out = [np.empty((len(interval), 4, q.shape[1])) for _ in derivatives]
    for o in np.unique(offset):
        rows = np.flatnonzero(offset == o)
        bases = _bases((o + kernels.STAGE_TIMES) / substeps, dt)
        block = knots[rows]
        for target, d in zip(out, derivatives, strict=True):
            # Elementwise sums (no BLAS): a column's values do not depend on how many other
            # columns there are, so a per-member table equals the members' own tables.
            for s in range(4):
                w = bases[d][s]
                target[rows, s] = (w[0] * block[:, 0] + w[1] * block[:, 1] + w[2] * block[:, 2]
                                   + w[3] * block[:, 3] + w[4] * block[:, 4] + w[5] * block[:, 5])
    return out


def stage_arrays(tree: Tree, q, qd, qdd, dt: float, substeps: int) -> tuple:
    """The reference kernel's stage arrays for one motion (samples (F, n_driven)).

    Returns qd, vd, ad (n_steps + 1, 4, n_driven), the cos/sin of each frame's driven angle
    sum (n_steps + 1, 4, n_frames) and the step h (s).
    """
    qs, vs, accs = interpolate(q, qd, qdd, dt, substeps)
    const, coef = angle_terms(tree)
    total = const + qs @ coef.T
    return (np.ascontiguousarray(qs), np.ascontiguousarray(vs), np.ascontiguousarray(accs),
            np.cos(total), np.sin(total), dt / substeps)


@njit(cache=True)
def _fill_table(q, qd, qdd, dt, interval, weights, kind, index, const, coef, D):
    """D[n, r, slot, b] from samples q, qd, qdd (F, nd, B) (members innermost).

    Row r of step n is a time in sample interval ``interval[n, r]`` with Hermite weights
    ``weights[n, r]`` (3, 6) of value/rate/acceleration on the knots q0, dt·q̇0, dt²·q̈0,
    dt²·q̈1, dt·q̇1, q1 (dt the sample interval, s). kind per slot: 0 cos, 1 sin, 5 value of
    angle ``index`` (const + coef @ q); 2 q, 3 q̇, 4 q̈ of driven coordinate ``index``. A
    member's values do not depend on the batch size (same operations in the same order).
    """
    nd, B = q.shape[1], q.shape[2]
    dt2 = dt * dt
    value = np.empty((3, nd, B))
    for n in range(interval.shape[0]):
        for r in range(interval.shape[1]):
            i = interval[n, r]
            for d in range(3):
                w = weights[n, r, d]
                for j in range(nd):
                    for b in range(B):
                        value[d, j, b] = (w[0] * q[i, j, b] + w[1] * (dt * qd[i, j, b])
                                          + w[2] * (dt2 * qdd[i, j, b])
                                          + w[3] * (dt2 * qdd[i + 1, j, b])
                                          + w[4] * (dt * qd[i + 1, j, b]) + w[5] * q[i + 1, j, b])
            for slot in range(kind.shape[0]):
                c, k = kind[slot], index[slot]
                if 2 <= c <= 4:
                    for b in range(B):
                        D[n, r, slot, b] = value[c - 2, k, b]
                    continue
                for b in range(B):
                    angle = const[k]
                    for j in range(nd):
                        angle += coef[k, j] * value[0, j, b]
                    if c == 0:
                        angle = np.cos(angle)
                    elif c == 1:
                        angle = np.sin(angle)
                    D[n, r, slot, b] = angle


def table_rows(F: int, substeps: int, samples_per_step: int) -> tuple[np.ndarray, np.ndarray]:
    """Sample interval (n_steps + 1, R) and fraction in it of every row of the driven table.

    Rows 0-3: the stage times of step n (a step is 1/substeps or samples_per_step sample
    intervals); rows 4…: the sample times inside a multi-sample step (frames n·s + j).
    A stage time on an interval's end stays in that interval (fraction 1), as in
    :func:`interpolate`.
    """
    n_steps = (F - 1) * substeps // samples_per_step
    n = np.arange(n_steps + 1)
    start = n * samples_per_step
    i0 = start // substeps
    frac0 = (start - i0 * substeps) / substeps
    length = samples_per_step / substeps  # sample intervals per step
    position = np.concatenate([frac0[:, None] + kernels.STAGE_TIMES[None, :] * length,
                               np.arange(1, samples_per_step)[None, :] + 0 * frac0[:, None]],
                              axis=1)
    shift = np.maximum(np.ceil(position) - 1, 0).astype(np.int64)
    interval = i0[:, None] + shift
    fraction = position - shift
    over = np.maximum(interval - (F - 2), 0)
    return interval - over, fraction + over


@functools.lru_cache(maxsize=8)
def _rows_and_weights(F: int, substeps: int, samples_per_step: int, dt: float
                      ) -> tuple[np.ndarray, np.ndarray]:
    """Table rows and their Hermite weights (N, R, 3, 6), memoised: an optimiser evaluates many
    motions on one time grid."""
    interval, fraction = table_rows(F, substeps, samples_per_step)
    return interval, np.ascontiguousarray(np.stack(_bases(fraction, dt), axis=2))


_KIND = {"cd": 0, "sd": 1, "qd": 2, "vd": 3, "ad": 4, "an": 5}


def driven_table(tree: Tree, slots: tuple[tuple[str, int], ...], q, qd, qdd, dt: float,
                 substeps: int, samples_per_step: int = 1) -> np.ndarray:
    """The generated kernels' driven table D (rows: see :func:`table_rows`).

    q, qd, qdd: (F, n_driven) for one shared motion → D (n_steps + 1, R, n_slots); or
    (B, F, n_driven), one motion per member → D (n_steps + 1, R, n_slots, B).
    """
    per_member = q.ndim == 3
    arrays = [np.ascontiguousarray(a.transpose(1, 2, 0) if per_member else a[..., None],
                                   dtype=np.float64) for a in (q, qd, qdd)]
    interval, weights = _rows_and_weights(arrays[0].shape[0], substeps, samples_per_step, dt)
    const, coef = angle_terms(tree)
    kind = np.array([_KIND[k] for k, _ in slots], dtype=np.int64)
    index = np.array([i for _, i in slots], dtype=np.int64)
    D = np.empty((*interval.shape, len(slots), arrays[0].shape[2]))
    _fill_table(*arrays, dt, interval, weights, kind, index, const, coef, D)
    return D if per_member else np.ascontiguousarray(D[..., 0])
