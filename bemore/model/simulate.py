"""Public batch API: simulate a trial for B parameter vectors at once.

>>> model = load_model("real_gymnast")                                     # doctest: +SKIP
>>> sim = simulate(model, model.parameter_matrix([{}]), motion, q0, qd0)   # doctest: +SKIP
>>> sim.free_q.shape  # (B, frames, n_free)                               # doctest: +SKIP
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from bemore.errors import DataError, ModelError
from bemore.model import kernels
from bemore.model.core import Model

# Powers 0..5 of the quintic Hermite basis: q0, h·v0, h²·a0, h²·a1, h·v1, q1.
_HERMITE = np.array([
    [1, 0, 0, -10, 15, -6],
    [0, 1, 0, -6, 8, -3],
    [0, 0, 0.5, -1.5, 1.5, -0.5],
    [0, 0, 0, 0.5, -1, 0.5],
    [0, 0, 0, -4, 7, -3],
    [0, 0, 0, 10, -15, 6],
], dtype=np.float64)

COST_POINTS = ("bar", "wrist", "elbow", "neck", "hip", "knee", "ankle")


@dataclass
class DrivenMotion:
    """Driven coordinates sampled on a uniform grid: t (F,) s; q, qd, qdd (F, n_driven) SI."""

    t: np.ndarray
    q: np.ndarray
    qd: np.ndarray
    qdd: np.ndarray

    def __post_init__(self) -> None:
        self.t = np.asarray(self.t, dtype=np.float64)
        self.q, self.qd, self.qdd = (np.atleast_2d(np.asarray(a, dtype=np.float64).T).T
                                     for a in (self.q, self.qd, self.qdd))
        F = self.t.shape[0]
        if F < 2 or self.t.ndim != 1:
            raise DataError("driven motion: t must be a 1-D array of at least 2 samples")
        for name, a in (("q", self.q), ("qd", self.qd), ("qdd", self.qdd)):
            if a.shape[0] != F:
                raise DataError(f"driven motion: {name} has {a.shape[0]} rows, t has {F}")
            if not np.all(np.isfinite(a)):
                bad = int(np.argmax(~np.all(np.isfinite(a), axis=1)))
                raise DataError(f"driven motion: {name} is not finite at t = {self.t[bad]:.4f} s")
        dt = np.diff(self.t)
        if np.any(dt <= 0) or np.ptp(dt) > 1e-6 * dt.mean():
            raise DataError("driven motion: t must be uniformly spaced and increasing")

    @property
    def dt(self) -> float:
        """Sampling interval (s)."""
        return float((self.t[-1] - self.t[0]) / (len(self.t) - 1))


@dataclass
class Simulation:
    """Result of :func:`simulate`; arrays are (B, F, …) and NaN for members that failed."""

    t: np.ndarray  # (F,) s
    free_names: tuple[str, ...]
    driven_names: tuple[str, ...]
    point_names: tuple[str, ...]
    free_q: np.ndarray | None = None  # (B, F, n_free)
    free_qd: np.ndarray | None = None  # (B, F, n_free)
    efforts: np.ndarray | None = None  # (B, F, n_driven) N or N·m
    points: np.ndarray | None = None  # (B, F, n_points, 2) m
    cost: np.ndarray | None = None  # (B,) m², only with measured points
    valid: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=bool))  # (B,)

    def to_dict(self) -> dict:
        """JSON-ready dict (lists)."""
        out = {"t": self.t.tolist(), "free_names": list(self.free_names),
               "driven_names": list(self.driven_names), "point_names": list(self.point_names),
               "valid": self.valid.tolist()}
        for key in ("free_q", "free_qd", "efforts", "points", "cost"):
            value = getattr(self, key)
            out[key] = None if value is None else value.tolist()
        return out


_stage_cache: dict[tuple, tuple] = {}


def _cached_stage_arrays(model: Model, motion: DrivenMotion, substeps: int) -> tuple:
    """:func:`stage_arrays`, memoised for the same motion object (an optimiser evaluates many
    populations on one trial; a DrivenMotion is treated as immutable)."""
    key = (id(model.tree), id(motion), id(motion.q), id(motion.qd), id(motion.qdd), substeps)
    hit = _stage_cache.get(key)
    if hit is not None and hit[0] is motion and hit[1] is model.tree:
        return hit[2]
    result = stage_arrays(model, motion, substeps)
    if len(_stage_cache) >= 8:
        _stage_cache.pop(next(iter(_stage_cache)))
    _stage_cache[key] = (motion, model.tree, result)
    return result


def stage_arrays(model: Model, motion: DrivenMotion, substeps: int) -> tuple:
    """Driven state at every stage time of every step, shared by the whole batch.

    Quintic Hermite interpolation of (q, q̇, q̈) between samples; returns qd, vd, ad
    (n_steps + 1, 4, n_driven) and the cos/sin of each frame's driven angle sum
    (n_steps + 1, 4, n_frames).
    """
    if motion.q.shape[1] != model.n_driven:
        raise DataError(
            f"driven motion has {motion.q.shape[1]} columns, model {model.name} drives "
            f"{model.n_driven} ({', '.join(model.driven_coordinates)})"
        )
    F = len(motion.t)
    dt = motion.dt
    h = dt / substeps
    n_steps = (F - 1) * substeps
    step = np.arange(n_steps + 1)
    interval = np.minimum(step // substeps, F - 2)
    offset = (step - interval * substeps)[:, None]
    tau = (offset + kernels.STAGE_TIMES[None, :]) / substeps  # fraction of the sample interval
    i0 = interval[:, None].repeat(4, axis=1)
    powers = tau[..., None] ** np.arange(6)
    d1 = np.zeros_like(powers)
    d1[..., 1:] = powers[..., :-1] * np.arange(1, 6)
    d2 = np.zeros_like(powers)
    d2[..., 2:] = powers[..., :-2] * (np.arange(2, 6) * np.arange(1, 5))
    basis = powers @ _HERMITE.T, d1 @ _HERMITE.T / dt, d2 @ _HERMITE.T / dt**2
    q0, q1 = motion.q[i0], motion.q[i0 + 1]
    v0, v1 = motion.qd[i0], motion.qd[i0 + 1]
    a0, a1 = motion.qdd[i0], motion.qdd[i0 + 1]
    out = []
    for H in basis:
        H = H[..., None]
        out.append(H[..., 0, :] * q0 + H[..., 1, :] * dt * v0 + H[..., 2, :] * dt**2 * a0
                   + H[..., 3, :] * dt**2 * a1 + H[..., 4, :] * dt * v1 + H[..., 5, :] * q1)
    qd, vd, ad = (np.ascontiguousarray(a) for a in out)
    tree = model.tree
    nF = len(tree.frame_parent)
    total = np.zeros((n_steps + 1, 4, nF))
    for k in range(nF):
        base = np.zeros((n_steps + 1, 4)) if tree.frame_parent[k] < 0 else total[
            ..., tree.frame_parent[k]].copy()
        base += tree.frame_angle[k]
        if tree.frame_kind[k] == 1 and tree.frame_driven[k] >= 0:
            base += tree.frame_axis[k] * qd[..., tree.frame_driven[k]]
        total[..., k] = base
    return qd, vd, ad, np.cos(total), np.sin(total), h


def simulate(model: Model, P, motion: DrivenMotion, free_q0, free_qd0,
             outputs: Sequence[str] = ("free_q", "free_qd", "efforts", "points"),
             measured: np.ndarray | None = None, points: Sequence[str] = COST_POINTS,
             substeps: int = 1, max_abs: float = 1.0e3, engine: str = "auto",
             threads: int | None = None) -> Simulation:
    """Integrate the trial for every row of P (B, n_parameters); free state (n_free,) or (B, ·).

    ``outputs`` picks what is stored among free_q, free_qd, efforts, points. With ``measured``
    ((F, len(points), 2) m, NaN = missing), ``sim.cost[b]`` is the sum over frames and points of
    the squared distance (m²) between simulated and measured positions. A member with invalid
    parameters (non-positive mass/inertia), or whose state leaves ±max_abs, gets NaN (and
    ``valid[b] = False``). ``substeps`` integrator steps per sample (1 = h of one sample).
    """
    unknown = set(outputs) - {"free_q", "free_qd", "efforts", "points"}
    if unknown:
        raise ModelError(f"simulate: unknown output {sorted(unknown)[0]!r}")
    if substeps < 1:
        raise ModelError("simulate: substeps must be at least 1")
    V, valid = model.fields(P)
    B = V.shape[0]
    nf, nd = model.n_free, model.n_driven
    q0 = np.ascontiguousarray(np.broadcast_to(np.asarray(free_q0, np.float64), (B, nf)))
    v0 = np.ascontiguousarray(np.broadcast_to(np.asarray(free_qd0, np.float64), (B, nf)))
    valid = valid & np.all(np.isfinite(q0), axis=1) & np.all(np.isfinite(v0), axis=1)
    qd, vd, ad, cd, sd, h = _cached_stage_arrays(model, motion, substeps)
    F = len(motion.t)
    store_state = "free_q" in outputs or "free_qd" in outputs
    flags = np.array([store_state, "efforts" in outputs, "points" in outputs,
                      measured is not None], dtype=np.bool_)
    selection = np.zeros(0, dtype=np.int64)
    meas = np.zeros((1, 0, 2))
    if measured is not None:
        missing = [p for p in points if p not in model.point_names]
        if missing:
            raise ModelError(f"model {model.name} has no point {missing[0]!r}")
        selection = np.array([model.point_names.index(p) for p in points], dtype=np.int64)
        meas = np.ascontiguousarray(measured, dtype=np.float64)
        if meas.shape != (F, len(points), 2):
            raise DataError(
                f"measured points: shape {meas.shape}, expected ({F}, {len(points)}, 2)")
    if engine not in ("auto", "generated", "reference"):
        raise ModelError(f"simulate: unknown engine {engine!r}")
    if engine == "generated" or (engine == "auto" and not flags[1]):
        if flags[1]:
            raise ModelError("simulate: the generated engine does not compute efforts")
        return _simulate_generated(model, V, valid, q0, v0, (qd, vd, ad, cd, sd), h, substeps,
                                   motion, outputs, meas, selection, flags, max_abs, threads)
    out_q = np.zeros((B, F if store_state else 1, nf))
    out_qd = np.zeros_like(out_q)
    out_eff = np.zeros((B, F if flags[1] else 1, nd))
    out_pts = np.zeros((B, F if flags[2] else 1, len(model.point_names), 2))
    cost = np.zeros(B)
    kernels.integrate_batch(model._T, np.ascontiguousarray(V), valid, q0, v0, qd, vd, ad, cd, sd,
                            h, substeps, kernels.A_T, kernels.C_T, kernels.M_T, kernels.GAMMA,
                            meas, selection, flags, max_abs, out_q, out_qd, out_eff, out_pts,
                            cost)
    valid = valid & np.isfinite(cost)
    return Simulation(
        t=motion.t.copy(), free_names=model.free_coordinates,
        driven_names=model.driven_coordinates, point_names=model.point_names,
        free_q=out_q if "free_q" in outputs else None,
        free_qd=out_qd if "free_qd" in outputs else None,
        efforts=out_eff if flags[1] else None, points=out_pts if flags[2] else None,
        cost=cost if measured is not None else None, valid=valid,
    )


def joint_centre_cost(model: Model, P, motion: DrivenMotion, free_q0, free_qd0,
                      measured: np.ndarray, names: Sequence[str] = COST_POINTS,
                      substeps: int = 1) -> np.ndarray:
    """Identification cost (B,) in m²: Σ frames Σ points |simulated − measured|².

    Stores nothing per frame. NaN for members that cannot be simulated (caller penalises them).
    """
    sim = simulate(model, P, motion, free_q0, free_qd0, outputs=(), measured=measured,
                   points=names, substeps=substeps)
    return sim.cost


def _simulate_generated(model: Model, V, valid, q0, v0, stages, h, substeps, motion, outputs,
                        meas, selection, flags, max_abs, threads) -> Simulation:
    """The same integration with the specialised kernel (states/points/cost only)."""
    from bemore.model.codegen import kernel_for, run_threads

    B, nf = q0.shape
    F = len(motion.t)
    n_points = len(model.point_names)
    kernel = kernel_for(model.tree, n_points)
    safe = V.copy()
    if not valid.all():
        # Invalid members run on a valid member's fields, then are reported as NaN.
        fallback = V[np.argmax(valid)] if valid.any() else model.tree.fields(
            model.parameter_matrix([{}]))[0]
        safe[~valid] = fallback
    Vt = np.ascontiguousarray(safe.T)
    S = np.ascontiguousarray(np.concatenate([q0, v0], axis=1).T)
    store_state = bool(flags[0])
    out_state = np.zeros((F, 2 * nf, B) if store_state else (1, 1, 1))
    out_pts = np.zeros((F, n_points, 2, B) if flags[2] else (1, 1, 1, 1))
    meas_full = np.zeros((F if flags[3] else 1, n_points, 2))
    wts = np.zeros((F if flags[3] else 1, n_points))
    if flags[3]:
        finite = np.all(np.isfinite(meas), axis=-1)
        meas_full[:, selection] = np.where(finite[..., None], meas, 0.0)
        wts[:, selection] = finite
    cost = np.zeros(B)
    alive = valid.astype(np.float64)
    qd, vd, ad, cd, sd = stages
    tri = nf * (nf + 1) // 2
    MX = np.zeros((2 * tri + nf, B))  # M0 and the Cholesky factor of W, per lane
    U0, U1, U2 = (np.zeros((2 * nf, B)) for _ in range(3))  # stage increments
    run_threads(kernel, B, threads or os.cpu_count() or 1,
                (Vt, S, MX, U0, U1, U2, qd, vd, ad, cd, sd, h, substeps),
                (meas_full, wts, store_state, bool(flags[2]), bool(flags[3]), max_abs, out_state,
                 out_pts, cost, alive))
    ok = alive > 0.0
    result = Simulation(t=motion.t.copy(), free_names=model.free_coordinates,
                        driven_names=model.driven_coordinates, point_names=model.point_names,
                        valid=ok)
    if store_state:
        state = out_state.transpose(2, 0, 1)
        state[~ok] = np.nan
        if "free_q" in outputs:
            result.free_q = np.ascontiguousarray(state[:, :, :nf])
        if "free_qd" in outputs:
            result.free_qd = np.ascontiguousarray(state[:, :, nf:])
    if flags[2]:
        points = np.ascontiguousarray(out_pts.transpose(3, 0, 1, 2))
        points[~ok] = np.nan
        result.points = points
    if flags[3]:
        cost[~ok] = np.nan
        result.cost = cost
    return result
