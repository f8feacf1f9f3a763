"""Spring equilibria from the engine's own kernel: one short integrator step reads the free
accelerations, a few chord-Newton steps zero the springs' (the definition of
:meth:`bemore.model.Model.equilibrium`, which stays the readable reference and the tests' oracle).

Why not ``Model.equilibrium`` on the hot paths: it runs the reference dynamics (numba), which
costs ≈ 12-27 s to compile on a first run and ≈ 1 s to load from numba's cache on every run,
while the engine's generated kernel is loaded anyway (identification: every population's start
states; synthesis: the handstand). Units SI.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from bemore.model.simulate import DrivenMotion, one_step_velocities

ORACLE_STEP_S = 1e-5  # one integrator step this long reads the accelerations (see below)


def oracle_motion(driven_q: np.ndarray, driven_qd: np.ndarray, driven_qdd: np.ndarray) -> Any:
    """The driven state (n_driven,) each, SI, as a two-sample motion one ``ORACLE_STEP_S`` long
    (exact for a constant acceleration). Built once per trial: the engine caches its tables per
    motion object, and a new object per call would evict the trial's own."""
    h = ORACLE_STEP_S
    q, qd, qdd = (np.asarray(a, dtype=float) for a in (driven_q, driven_qd, driven_qdd))
    return DrivenMotion(
        t=np.array([0.0, h]),
        q=np.stack([q, q + qd * h + 0.5 * qdd * h * h]),
        qd=np.stack([qd, qd + qdd * h]),
        qdd=np.stack([qdd, qdd]),
    )


def free_accelerations(model: Any, P: np.ndarray | None, free_q: np.ndarray, oracle: Any,
                       fields: tuple[np.ndarray, np.ndarray] | None = None,
                       copies: int = 1) -> np.ndarray:
    """Free accelerations (B, n_free) at the free positions ``free_q`` (B, n_free), free
    velocities 0, at the driven start of ``oracle`` (:func:`oracle_motion`), read from ONE
    engine step of ``ORACLE_STEP_S``: v(h)/h, the Rosenbrock step's (M + γhC + γ²h²K)⁻¹·force.

    Not ``model.hybrid`` (see the module doc). The damping term makes these accelerations up
    to a few % off, but not where the springs' accelerations vanish: with a_s = 0,
    (M + γhC)·a = M·a because C acts on the spring coordinates only, so the first stage is
    exact there and only the hand rotation's motion during the step (O(h²)) moves the zero.
    Measured: the equilibrium lands within 0.1 µm of ``model.equilibrium`` over 200 members
    across the box (h = 1e-5 s; shorter steps lose digits to rounding: 17 µm at 3e-7 s).
    NaN rows: not simulable. ``fields``: ``model.fields(P)`` when the caller has it (P is then
    not read); ``copies``: the members (rows of P or of the fields) repeated that many times,
    free_q holding a row per copy (:func:`bemore.model.simulate.one_step_velocities`, the
    engine on one thread: a step of 200–1000 members lasts 0.1–0.3 ms).
    """
    h = float(oracle.t[1] - oracle.t[0])
    fields = model.fields(P) if fields is None else fields
    return one_step_velocities(model, fields, oracle, np.asarray(free_q, dtype=float),
                               copies) / h


def spring_equilibrium(
    model: Any,
    P: np.ndarray,
    free_q: np.ndarray,
    oracle: Any,
    step_m: float = 1e-7,
    chord_steps: int = 3,
) -> np.ndarray:
    """Free states (B, n_free) where the spring coordinates do not accelerate: the definition of
    ``model.equilibrium`` (free velocities 0, at the driven start of ``oracle``, springs from
    their rest), in
    ``chord_steps`` Newton steps sharing ONE batched finite-difference Jacobian taken at the
    rest: 7 states per member in 3 engine calls (:func:`free_accelerations`), for every
    population of the identification.

    The deflections are millimetres, so the Jacobian barely changes on the way: each step
    divides the error by ~40 (tests/identify/test_initial.py checks the result against
    ``model.equilibrium``). Members the engine cannot simulate get NaN rows.
    """
    P = model.as_matrix(P)
    B, nf = P.shape[0], model.n_free
    V, valid = model.fields(P)
    springs = [model.free_coordinates.index(c) for c in model.spring_coordinates]
    n = len(springs)
    q = np.array(np.broadcast_to(np.asarray(free_q, dtype=float), (B, nf)))
    rest = model.tree.spring_fields[springs, 2]
    q[:, springs] = V[:, rest]
    # One batch: the state, then the state with each spring coordinate moved by step_m.
    states = np.repeat(q[None], n + 1, axis=0)
    for c, i in enumerate(springs):
        states[c + 1, :, i] += step_m
    # The members' fields once for the three engine calls.
    acc = free_accelerations(model, None, states.reshape(-1, nf), oracle, fields=(V, valid),
                             copies=n + 1)
    acc = acc[:, springs].reshape(n + 1, B, n)
    J = np.moveaxis((acc[1:] - acc[0][None]) / step_m, 0, -1)  # (B, n, n): d acc_i / d q_c
    solvable = valid & np.all(np.isfinite(J), axis=(1, 2)) & np.all(np.isfinite(acc[0]), axis=1)
    J[~solvable] = np.eye(n)
    residual = np.where(solvable[:, None], acc[0], 0.0)
    q[:, springs] -= np.linalg.solve(J, residual[..., None])[..., 0]
    for _ in range(chord_steps - 1):
        acc = free_accelerations(model, P, q, oracle, fields=(V, valid))
        residual = np.where(solvable[:, None], np.nan_to_num(acc[:, springs]), 0.0)
        q[:, springs] -= np.linalg.solve(J, residual[..., None])[..., 0]
    q[~solvable] = np.nan
    return q
