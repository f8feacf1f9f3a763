"""Driven state at every stage time of every integration step, precomputed once per trial.

Between samples the driven coordinates follow the quintic Hermite interpolant of (q, q̇, q̈)
(:func:`hermite_bases`). :func:`stage_arrays` gives the reference kernel's full arrays (one
shared motion); ``table.py`` builds the generated kernels' table of only the values their code
reads. numpy only. Units SI (m, rad, s).
"""

from __future__ import annotations

import numpy as np

from bemore.model.generated import angle_terms
from bemore.model.rosenbrock import STAGE_TIMES
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


def hermite_bases(tau: np.ndarray, dt: float) -> tuple[np.ndarray, ...]:
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
        bases = hermite_bases((o + STAGE_TIMES) / substeps, dt)
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
