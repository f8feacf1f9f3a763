"""Public batch API: simulate a trial for B parameter vectors at once.

>>> import numpy as np
>>> from bemore.model import load_model
>>> from bemore.model.profiles import HANDSTAND_HAND_ROTATION, clear_hip_circle_profile
>>> model = load_model("real_gymnast")
>>> motion = clear_hip_circle_profile(0.05)   # the driven coordinates, 0.05 s at 1 kHz
>>> P = model.parameter_matrix([{}, {"bar.stiffness_y": 9000.0}])   # B = 2 members
>>> q0 = np.zeros(model.n_free)
>>> q0[2] = HANDSTAND_HAND_ROTATION             # rad; springs at rest, free velocities 0
>>> sim = simulate(model, P, motion, q0, np.zeros(model.n_free))
>>> sim.free_q.shape                           # (B, frames, n_free)
(2, 51, 5)
"""

from __future__ import annotations

import functools
import math
import os
import threading
from collections.abc import Hashable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field

import numpy as np

from bemore.errors import DataError, ModelError
from bemore.model import rosenbrock
from bemore.model.core import Model
from bemore.model.generated import (
    LANE_LO_ARG,
    in_chunks,
    kernel_for,
    padded_lane_groups,
    run_calls,
    run_threads,
)
from bemore.model.stages import stage_arrays
from bemore.model.table import driven_table

COST_POINTS = ("bar", "wrist", "elbow", "neck", "hip", "knee", "ankle")
MAX_ABS = 1.0e3  # SI: a lane whose state leaves ±this (or is NaN) dies (reported NaN)

_engine_threads: int | None = None  # None: one per core


def set_engine_threads(threads: int | None) -> int:
    """Set how many threads a batch runs on when :func:`simulate` is not given ``threads``
    (the engine's one thread setting: ``--workers``, a Dask worker's cap); None or 0 = one
    per core (the default). Returns the number now in effect."""
    global _engine_threads
    if threads is not None and (int(threads) != threads or threads < 0):
        raise ModelError(f"engine threads: {threads!r} is not a count (0 = one per core)")
    _engine_threads = int(threads) if threads else None
    return engine_threads()


@contextmanager
def engine_threads_set(threads: int | None) -> Iterator[int]:
    """Run the engine's batches on ``threads`` threads (None or 0: one per core) inside the
    ``with`` block, and give the caller's setting back when it ends (also on an exception);
    yields the number in effect."""
    before = _engine_threads
    try:
        yield set_engine_threads(threads)
    finally:
        set_engine_threads(before)


def engine_threads() -> int:
    """Threads a batch runs on when :func:`simulate` is not given ``threads``."""
    return _engine_threads or os.cpu_count() or 1


@dataclass
class DrivenMotion:
    """Driven coordinates sampled on a uniform time grid t (F,) s.

    q, qd, qdd (SI: m or rad, per s, per s²) are (F, n_driven) for one motion that every
    member of a batch follows, or (B, F, n_driven) for one motion per member (member b follows
    ``q[b]``; the grid t is shared, so members of different durations must be padded by the
    caller, e.g. by holding the last posture). A 1-D array is one driven coordinate.
    """

    t: np.ndarray
    q: np.ndarray
    qd: np.ndarray
    qdd: np.ndarray

    def __post_init__(self) -> None:
        self.t = np.asarray(self.t, dtype=np.float64)
        arrays = [np.asarray(a, dtype=np.float64) for a in (self.q, self.qd, self.qdd)]
        self.q, self.qd, self.qdd = (a[:, None] if a.ndim == 1 else a for a in arrays)
        F = self.t.shape[0] if self.t.ndim == 1 else 0
        if F < 2:
            raise DataError("driven motion: t must be a 1-D array of at least 2 samples")
        shape = self.q.shape
        for name, a in (("q", self.q), ("qd", self.qd), ("qdd", self.qdd)):
            if a.ndim not in (2, 3) or a.shape[-2] != F:
                raise DataError(f"driven motion: {name} has shape {a.shape}, expected "
                                f"({F}, n_driven) or (members, {F}, n_driven) for t of {F}")
            if a.shape != shape:
                raise DataError(f"driven motion: {name} has shape {a.shape}, q has {shape}")
            finite = np.all(np.isfinite(a), axis=-1)
            if not np.all(finite):
                where = np.argwhere(~finite)[0]
                member = f" of member {where[0]}" if a.ndim == 3 else ""
                raise DataError(f"driven motion: {name}{member} is not finite at "
                                f"t = {self.t[where[-1]]:.4f} s")
        dt = np.diff(self.t)
        if np.any(dt <= 0) or np.ptp(dt) > 1e-6 * dt.mean():
            raise DataError("driven motion: t must be uniformly spaced and increasing")

    @property
    def dt(self) -> float:
        """Sampling interval (s)."""
        return float((self.t[-1] - self.t[0]) / (len(self.t) - 1))

    @property
    def members(self) -> int | None:
        """Number of per-member motions, or None for one shared motion."""
        return self.q.shape[0] if self.q.ndim == 3 else None

    @property
    def n_driven(self) -> int:
        """Number of driven coordinates (columns)."""
        return self.q.shape[-1]

    def member(self, b: int) -> DrivenMotion:
        """Member b's motion as a shared (F, n_driven) motion (itself if already shared)."""
        if self.members is None:
            return self
        return DrivenMotion(self.t, self.q[b], self.qd[b], self.qdd[b])


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


_OUTPUTS = ("free_q", "free_qd", "efforts", "points")
_table_cache: dict[tuple, tuple] = {}
_table_lock = threading.Lock()


def _cached(kind: Hashable, model: Model, motion: DrivenMotion, substeps: int, build):
    """``build()`` memoised for the same shared motion object and ``kind`` (an optimiser
    evaluates many populations on one trial; a DrivenMotion is treated as immutable).
    Per-member motions are not cached: each call brings new ones and their tables are large.
    Threads may ask at once (a polish's residuals run beside its Jacobian): one builds, the
    other waits for it."""
    if motion.members is not None:
        return build()
    key = (kind, id(model.tree), id(motion), id(motion.q), id(motion.qd), id(motion.qdd),
           substeps)
    with _table_lock:
        hit = _table_cache.get(key)
        if hit is not None and hit[0] is motion and hit[1] is model.tree:
            return hit[2]
        result = build()
        if len(_table_cache) >= 8:
            _table_cache.pop(next(iter(_table_cache)))
        _table_cache[key] = (motion, model.tree, result)
        return result


def _check_motion(model: Model, motion: DrivenMotion, B: int) -> None:
    if motion.n_driven != model.n_driven:
        raise DataError(
            f"driven motion has {motion.n_driven} columns, model {model.name} drives "
            f"{model.n_driven} ({', '.join(model.driven_coordinates)})"
        )
    if motion.members is not None and motion.members != B:
        raise DataError(
            f"driven motion has {motion.members} per-member motions but the parameter matrix "
            f"has {B} rows (one motion per row, or a shared (F, n_driven) motion)"
        )


def simulate(model: Model, P, motion: DrivenMotion, free_q0, free_qd0,
             outputs: Sequence[str] = _OUTPUTS,
             measured: np.ndarray | None = None, points: Sequence[str] = COST_POINTS,
             substeps: int = 1, max_abs: float = MAX_ABS, engine: str = "auto",
             threads: int | None = None, samples_per_step: int = 1,
             fields: tuple[np.ndarray, np.ndarray] | None = None) -> Simulation:
    """Integrate the trial for every row of P (B, n_parameters); free state (n_free,) or (B, ·).

    ``motion`` is shared by every member ((F, n_driven) arrays) or has one motion per member
    ((B, F, n_driven)). ``outputs`` picks what is stored among free_q, free_qd, efforts (driven
    generalised forces, N or N·m), points. With ``measured`` ((F, len(points), 2) m, NaN =
    missing), ``sim.cost[b]`` is the sum over frames and points of the squared distance (m²)
    between simulated and measured positions. A member with invalid parameters (non-positive
    mass/inertia), or whose state leaves ±max_abs, gets NaN (and ``valid[b] = False``).
    ``substeps`` integrator steps per sample (1 = h of one sample). ``engine``: "auto" or
    "generated" (the specialised kernel) or "reference" (``kernels.py``, the test oracle).
    ``threads``: lane groups run in parallel (default :func:`engine_threads`: one per core
    unless :func:`set_engine_threads` said otherwise).
    ``samples_per_step`` > 1 (generated engine, substeps = 1, no efforts): one integrator step
    spans that many samples (h = 2 ms for 2 at 1 kHz; about half the work); the frames inside a
    step get the cubic Hermite interpolant of (q, q̇) between the step's ends, q̇ its
    derivative. (F − 1) must be a multiple of it.
    ``fields``: ``model.fields(P)`` when the caller has it already (the spring equilibria call
    the engine three times with the same members: :mod:`bemore.model.equilibrium`).
    """
    unknown = set(outputs) - set(_OUTPUTS)
    if unknown:
        raise ModelError(f"simulate: unknown output {sorted(unknown)[0]!r}")
    if substeps < 1:
        raise ModelError("simulate: substeps must be at least 1")
    if engine not in ("auto", "generated", "reference"):
        raise ModelError(f"simulate: unknown engine {engine!r}")
    if samples_per_step > 1 and (substeps > 1 or engine == "reference" or "efforts" in outputs
                                 or (len(motion.t) - 1) % samples_per_step):
        raise ModelError(
            f"simulate: samples_per_step = {samples_per_step} needs substeps = 1, the generated "
            f"engine, no efforts and a multiple of {samples_per_step} sample intervals "
            f"(the motion has {len(motion.t) - 1})")
    V, valid = model.fields(P) if fields is None else fields
    B = V.shape[0]
    _check_motion(model, motion, B)
    nf = model.n_free
    q0 = np.ascontiguousarray(np.broadcast_to(np.asarray(free_q0, np.float64), (B, nf)))
    v0 = np.ascontiguousarray(np.broadcast_to(np.asarray(free_qd0, np.float64), (B, nf)))
    valid = valid & np.all(np.isfinite(q0), axis=1) & np.all(np.isfinite(v0), axis=1)
    F = len(motion.t)
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
    flags = np.array(["free_q" in outputs or "free_qd" in outputs, "efforts" in outputs,
                      "points" in outputs, measured is not None], dtype=np.bool_)
    run = _simulate_reference if engine == "reference" else _simulate_generated
    result = run(model, V, valid, q0, v0, motion, substeps, meas, selection, flags, max_abs,
                 threads, samples_per_step)
    if "free_q" not in outputs:
        result.free_q = None
    if "free_qd" not in outputs:
        result.free_qd = None
    return result


def joint_centre_cost(model: Model, P, motion: DrivenMotion, free_q0, free_qd0,
                      measured: np.ndarray, names: Sequence[str] = COST_POINTS,
                      substeps: int = 1, samples_per_step: int = 1) -> np.ndarray:
    """Identification cost (B,) in m²: Σ frames Σ points |simulated − measured|².

    Stores nothing per frame. NaN for members that cannot be simulated (caller penalises them).
    ``motion`` may be shared or per member, as in :func:`simulate` (also for
    ``samples_per_step``: 2 halves the work for ≈ 0.05 mm on the points).
    """
    sim = simulate(model, P, motion, free_q0, free_qd0, outputs=(), measured=measured,
                   points=names, substeps=substeps, samples_per_step=samples_per_step)
    return sim.cost


def _simulate_reference(model: Model, V, valid, q0, v0, motion, substeps, meas, selection,
                        flags, max_abs, threads, samples_per_step) -> Simulation:
    """The readable reference kernel (one member per numba thread, at most ``threads``);
    per-member motions one by one. numba is imported here only: the generated engine's path
    never loads it."""
    import numba

    from bemore.model import kernels

    B, nf = q0.shape
    F = len(motion.t)
    out_q = np.zeros((B, F if flags[0] else 1, nf))
    out_qd = np.zeros_like(out_q)
    out_eff = np.zeros((B, F if flags[1] else 1, model.n_driven))
    out_pts = np.zeros((B, F if flags[2] else 1, len(model.point_names), 2))
    cost = np.zeros(B)
    groups = [np.arange(B)] if motion.members is None else [np.array([b]) for b in range(B)]
    before = numba.get_num_threads()
    numba.set_num_threads(min(threads or engine_threads(), numba.config.NUMBA_NUM_THREADS))
    try:
        for rows in groups:
            shared = motion.member(int(rows[0]))
            stages = _cached("reference", model, shared, substeps, lambda m=shared: stage_arrays(
                model.tree, m.q, m.qd, m.qdd, m.dt, substeps))
            parts = [out_q[rows], out_qd[rows], out_eff[rows], out_pts[rows], cost[rows]]
            kernels.integrate_batch(model._T, np.ascontiguousarray(V[rows]), valid[rows],
                                    q0[rows], v0[rows], *stages[:5], stages[5], substeps,
                                    kernels.A_T, kernels.C_T, kernels.M_T, kernels.GAMMA, meas,
                                    selection, flags, max_abs, *parts)
            out_q[rows], out_qd[rows], out_eff[rows], out_pts[rows], cost[rows] = parts
    finally:
        numba.set_num_threads(before)
    return Simulation(
        t=motion.t.copy(), free_names=model.free_coordinates,
        driven_names=model.driven_coordinates, point_names=model.point_names,
        free_q=out_q if flags[0] else None, free_qd=out_qd if flags[0] else None,
        efforts=out_eff if flags[1] else None, points=out_pts if flags[2] else None,
        cost=cost if flags[3] else None, valid=valid & np.isfinite(cost),
    )


@functools.lru_cache(maxsize=8)
def _coefficients(h: float) -> np.ndarray:
    """Stage coefficients of the generated kernels' generic stage (4, 6): row s holds
    A_T[s, j] then C_T[s, j] / h (1/s) for j < 3, exactly zero for j ≥ s."""
    out = np.zeros((4, 6))
    for s in range(1, 4):
        for j in range(s):
            out[s, j] = rosenbrock.A_T[s, j]
            out[s, 3 + j] = rosenbrock.C_T[s, j] / h
    out.setflags(write=False)  # shared by every call with this step (memoised)
    return out


ALIGN_BYTES = 64  # a cache line, and one AVX-512 register


def _aligned_arrays(shapes: list[tuple[int, ...]]) -> list[np.ndarray]:
    """Uninitialised C-contiguous arrays of ``shapes``, each starting on a cache line (numpy
    aligns to 16 bytes only), carved from one allocation: with a lane count that is a multiple
    of 8, every row of a (rows, lanes) array then starts on a cache line, and no 8-lane vector
    load or store of the kernel straddles two lines. One allocation for a kernel call's seven
    work arrays: each cost ≈ 10 µs of numpy's and ctypes' Python, ≈ 0.2 ms of a search
    population's 2.8 ms spring equilibria (three one-step engine calls).

    >>> a, b = _aligned_arrays([(3, 5), (2, 16)])
    >>> [x.__array_interface__["data"][0] % ALIGN_BYTES for x in (a, b)], a.shape, b.shape
    ([0, 0], (3, 5), (2, 16))
    >>> b.__array_interface__["data"][0] - a.__array_interface__["data"][0]  # 15 values → 16
    128
    """
    line = ALIGN_BYTES // 8
    sizes = [math.prod(shape) for shape in shapes]
    starts = [0]
    for size in sizes:
        starts.append(starts[-1] + -(-size // line) * line)
    buffer = np.empty(starts[-1] + line)
    first = (-buffer.__array_interface__["data"][0] % ALIGN_BYTES) // 8
    return [buffer[first + start:first + start + size].reshape(shape)
            for start, size, shape in zip(starts[:-1], sizes, shapes, strict=True)]


def _lane_arrays(Vt: np.ndarray, S: np.ndarray, nf: int, tri: int, rows: int,
                 copies: int = 1) -> list[np.ndarray]:
    """The kernel's per-lane arrays of the lanes of ``Vt`` (n_fields, lanes) and ``S``
    (2·n_free, lanes), each on cache lines: the fields and the start state copied, the stage
    increments U zero (the generic stage reads all three earlier ones, with zero coefficients
    for the later ones, and 0 · NaN would kill a lane), the step start S0, M₀ with the Cholesky
    factor of W (MX), the current increment UN and a frame's outputs R left for the kernel.
    ``copies``: the fields' lanes repeated that many times (S has copies × their lanes)."""
    lanes = S.shape[1]
    arrays = _aligned_arrays([(Vt.shape[0], lanes), S.shape, (2 * nf, lanes),
                              (2 * tri + nf, lanes), (4, 2 * nf, lanes), (2 * nf, lanes),
                              (rows, lanes)])
    arrays[0].reshape(Vt.shape[0], copies, Vt.shape[1])[...] = Vt[:, None, :]
    arrays[1][...] = S
    arrays[4][...] = 0.0
    return arrays


def cost_selection(model: Model) -> tuple[int, ...]:
    """The engine's default cost points of ``model`` (indices into its points, in the order
    of :data:`COST_POINTS`): the selection of the kernel module a simulation without a cost
    uses, and the tangent kernels' (``bemore.model.sensitivity.program_selection``)."""
    return tuple(model.point_names.index(p) for p in COST_POINTS if p in model.point_names)


def engine_kernel(model: Model, per_member: bool = False, efforts: bool = False,
                  selection: Sequence[int] | None = None):
    """(kernel, :class:`~bemore.model.generated.Program`) the engine runs for ``model``: the
    per-member or shared-motion kernel, storing efforts or not, costing the points
    ``selection`` (indices; None: :func:`cost_selection`, the module a simulation without a
    cost uses)."""
    selection = cost_selection(model) if selection is None else tuple(selection)
    return kernel_for(model.tree, len(model.point_names), per_member, efforts, selection)


def shared_table(model: Model, slots: tuple, motion: DrivenMotion, substeps: int = 1,
                 samples_per_step: int = 1) -> np.ndarray:
    """The driven table of ``motion`` for a kernel reading ``slots``
    (:func:`bemore.model.table.driven_table`), memoised for a shared motion (:func:`_cached`:
    every kernel of the same slots, step and motion reads the same one); a per-member motion's
    is built at each call."""
    return _cached(("generated", samples_per_step, slots), model, motion, substeps,
                   lambda: driven_table(model.tree, slots, motion.q, motion.qd, motion.qdd,
                                        motion.dt, substeps, samples_per_step))


def work_sizes(model: Model, n_points: int) -> tuple[int, int]:
    """Sizes of a kernel's per-lane work arrays (:func:`_lane_arrays`) for ``n_points``
    stored points: the packed triangle of an n_free × n_free factor, and a frame's output rows
    (free state, points' x and y, driven efforts: the largest)."""
    nf = model.n_free
    return nf * (nf + 1) // 2, max(2 * nf, 2 * n_points, model.n_driven)


def runnable_fields(model: Model, V: np.ndarray, valid: np.ndarray) -> np.ndarray:
    """Fields ``V`` (B, n_fields) with each invalid member's row (``valid`` False) replaced by
    a valid member's, or by the default parameters' fields when none is valid (a copy; ``V``
    itself when all are valid): invalid members run on them, and are then reported NaN."""
    if valid.all():
        return V
    V = V.copy()
    V[~valid] = V[np.argmax(valid)] if valid.any() else model.tree.fields(
        model.parameter_matrix([{}]))[0]
    return V


def one_step_velocities(model: Model, fields: tuple[np.ndarray, np.ndarray], motion: DrivenMotion,
                        free_q0: np.ndarray, copies: int = 1) -> np.ndarray:
    """Free velocities (copies·B, n_free) after ONE integrator step of the two-sample shared
    ``motion`` from the free positions ``free_q0`` (copies·B, n_free) at rest (free velocities
    0), the members' ``fields`` (``model.fields(P)``: V (B, n_fields), valid (B,)) repeated
    ``copies`` times (row k·B + b is member b); NaN rows for members that cannot be simulated.

    The numbers :func:`simulate` gives at sample 1 with ``outputs=("free_qd",)``, one thread
    and the generated engine (the same kernel on the same lanes: a lane's numbers do not depend
    on the lanes beside it), without its general set-up: this is the spring equilibria's call
    (:mod:`bemore.model.equilibrium`, three per population of the search and per round of the
    polish), whose lanes are one step long and whose cost is otherwise mostly that set-up."""
    V, valid = fields
    B, nf = V.shape[0], model.n_free
    lanes = copies * B
    if len(motion.t) != 2 or motion.members is not None:
        raise ModelError("one_step_velocities: a two-sample shared motion")
    selection = cost_selection(model)
    kernel, program = engine_kernel(model, selection=selection)
    D = shared_table(model, program.slots, motion)
    valid = np.tile(valid, copies) & np.all(np.isfinite(free_q0), axis=1)
    if not valid.all():
        V, copies = runnable_fields(model, np.tile(V, (copies, 1)), valid), 1
    tri, rows = work_sizes(model, len(model.point_names))
    S = np.zeros((2 * nf, lanes))
    S[:nf] = free_q0.T
    work = _lane_arrays(V.T, S, nf, tri, rows, copies)
    out_q = np.empty((lanes, 2, nf))
    out_v = np.empty_like(out_q)
    alive = valid.astype(np.float64)
    h = motion.dt
    kernel(*work, _coefficients(h), D, h, 1, 1, 0, lanes, np.zeros((1, len(selection), 2)),
           np.zeros((1, len(selection))), True, False, False, MAX_ABS, out_q, out_v,
           np.empty((1, 1, 1, 1)), np.empty((1, 1, 1)), np.zeros(lanes), alive)
    velocities = out_v[:, 1]
    velocities[alive <= 0.0] = np.nan
    return velocities


def _simulate_generated(model: Model, V, valid, q0, v0, motion, substeps, meas, selection,
                        flags, max_abs, threads, samples_per_step) -> Simulation:
    """The same integration with the specialised kernel (shared or per-member motion)."""
    per_member = motion.members is not None
    B, nf = q0.shape
    F, nd = len(motion.t), model.n_driven
    n_points = len(model.point_names)
    if not flags[3]:
        # No cost asked: the module of the default cost points (the one an identification
        # compiles anyway), not a module of its own.
        selection = np.array(cost_selection(model), dtype=np.int64)
    kernel, program = engine_kernel(model, per_member, bool(flags[1]), selection)
    slots = program.member_slots if per_member else program.slots
    # One table per layout of its slots (a kernel storing other points may use other slots).
    D = shared_table(model, slots, motion, substeps, samples_per_step)
    V = runnable_fields(model, V, valid)
    threads = threads or engine_threads()
    # A shared motion's lanes may be padded to a whole vector (copies of lane 0, dropped at the
    # end); a lane's numbers do not depend on the lanes beside it.
    lanes, groups = (B, None) if per_member else padded_lane_groups(B, threads)
    if lanes > B:
        V, q0, v0 = (np.concatenate([a, np.repeat(a[:1], lanes - B, axis=0)])
                     for a in (V, q0, v0))
    Vt = V.T
    S = np.empty((2 * nf, lanes))
    S[:nf], S[nf:] = q0.T, v0.T
    store_state, store_efforts, store_points, do_cost = (bool(x) for x in flags)
    out_q = np.empty((lanes, F, nf) if store_state else (1, 1, 1))
    out_v = np.empty_like(out_q)
    out_pts = np.empty((lanes, F, n_points, 2) if store_points else (1, 1, 1, 1))
    out_eff = np.empty((lanes, F, nd) if store_efforts else (1, 1, 1))
    # Measured points in the selection's order, missing ones (NaN) with weight 0.
    meas_full = np.zeros((F if do_cost else 1, len(selection), 2))
    wts = np.zeros((F if do_cost else 1, len(selection)))
    if do_cost:
        finite = np.all(np.isfinite(meas), axis=-1)
        meas_full[:] = np.where(finite[..., None], meas, 0.0)
        wts[:] = finite
    cost = np.zeros(lanes)
    alive = np.ones(lanes)
    alive[:B] = valid
    # The kernel's outputs, each with whether it has a row per lane (else a placeholder).
    per_lane = ((out_q, store_state), (out_v, store_state), (out_pts, store_points),
                (out_eff, store_efforts), (cost, True), (alive, True))
    tri, rows = work_sizes(model, n_points)
    h = motion.dt * samples_per_step / substeps
    coefficients = _coefficients(h)
    after = (meas_full, wts, store_state, store_points, do_cost, max_abs)
    if F * substeps > 2:
        kernel = in_chunks(kernel, LANE_LO_ARG)  # each thread's lanes LANE_CHUNK at a time
    # else one integrator step (the spring equilibria's two-sample oracle motion): a thread's
    # lanes in one call. Chunks keep a lane's arrays in L1 from step to step, which one step
    # does not need, and each call costs ≈ 0.1 ms of its own (measured: 160 lanes in chunks of
    # 16, 1.46 ms; in one call, 0.40 ms); a lane's numbers do not depend on its call.
    if per_member:
        work = _lane_arrays(Vt, S, nf, tri, rows)
        run_threads(kernel, B, threads, (*work, coefficients, D, h, substeps, samples_per_step),
                    (*after, out_q, out_v, out_pts, out_eff, cost, alive))
    else:
        # Each thread's lanes in arrays of their own: two threads writing the rows of shared
        # (rows, lanes) arrays met in one cache line per row, bounced between the cores at
        # every stage (measured: 26.2 → 21.5 ms for 200 × 1521 with 2-sample steps).
        calls = []
        for lo, hi in groups:
            work = _lane_arrays(Vt[:, lo:hi], S[:, lo:hi], nf, tri, rows)
            outputs = [a[lo:hi] if stored else a for a, stored in per_lane]
            calls.append((*work, coefficients, D, h, substeps, samples_per_step, 0, hi - lo,
                          *after, *outputs))
        run_calls(kernel, calls)
    if lanes > B:
        out_q, out_v, out_pts, out_eff, cost, alive = (a[:B] if stored else a
                                                       for a, stored in per_lane)
    ok = alive > 0.0
    result = Simulation(t=motion.t.copy(), free_names=model.free_coordinates,
                        driven_names=model.driven_coordinates, point_names=model.point_names,
                        valid=ok)
    if store_state:
        out_q[~ok] = np.nan
        out_v[~ok] = np.nan
        result.free_q, result.free_qd = out_q, out_v
    if store_efforts:
        out_eff[~ok] = np.nan
        result.efforts = out_eff
    if store_points:
        out_pts[~ok] = np.nan
        result.points = out_pts
    if do_cost:
        cost[~ok] = np.nan
        result.cost = cost
    return result
