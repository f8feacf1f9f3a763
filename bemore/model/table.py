"""The generated kernels' driven table: the driven values their code reads, at every row time.

Row r of step n is a time inside one sample interval (rows 0-3: the ROS34PW2 stage times;
rows 4…: the samples inside a multi-sample step). Between samples the driven coordinates follow
the quintic Hermite interpolant of (q, q̇, q̈) (``stages.hermite_bases``); a slot of the table is
one driven value (``Program.slots``): cos/sin of a frame's driven angle sum, or a driven
coordinate's value, rate or acceleration; per-member tables hold the angle sum itself.

numpy only (no numba): the rows are grouped by their Hermite weights (a row's time sits at the
same fraction of its interval at almost every step), so a group is a few numpy calls with scalar
weights on a block of (driven coordinates, steps, members) values. Every value is a fixed
sequence of elementwise operations (no matmul or einsum, which may reorder sums by array size):
a member's column does not depend on the batch it is computed in. Units SI (m, rad, s).
"""

from __future__ import annotations

import functools
import math
import threading
from dataclasses import dataclass

import numpy as np

from bemore.model.generated import angle_terms
from bemore.model.rosenbrock import STAGE_TIMES
from bemore.model.stages import hermite_bases
from bemore.model.tree import Tree

TILE = 65536  # values per (driven, steps, members) block: 512 kB, best of 16k/64k/256k measured
GATHER = 4096  # up to this many values per slot, a block's slots are stored in one call
_KIND = {"cd": 0, "sd": 1, "qd": 2, "vd": 3, "ad": 4, "an": 5}


def driven_table(tree: Tree, slots: tuple[tuple[str, int], ...], q, qd, qdd, dt: float,
                 substeps: int, samples_per_step: int = 1) -> np.ndarray:
    """The driven table D (rows: see :func:`table_rows`) of samples every ``dt`` s.

    q, qd, qdd: (F, n_driven) for one shared motion → D (n_steps + 1, R, n_slots); or
    (B, F, n_driven), one motion per member → D (n_steps + 1, R, n_slots, B).
    """
    per_member = q.ndim == 3
    # (n_driven, F, members): a coordinate's samples are one contiguous (F, members) block.
    given = [a.transpose(2, 1, 0) if per_member else a.T[..., None] for a in (q, qd, qdd)]
    samples = _workspace([a.shape for a in given], "samples")
    for array, values in zip(samples, given, strict=True):
        array[...] = values
    grid = (samples[0].shape[1], substeps, samples_per_step, dt)
    shape = _grid(*grid)[0]
    D = np.empty((*shape, len(slots), samples[0].shape[2]))
    _fill(*samples, dt, grid, _plan(tree, tuple(slots)), D)
    return D if per_member else np.ascontiguousarray(D[..., 0])


def table_rows(F: int, substeps: int, samples_per_step: int) -> tuple[np.ndarray, np.ndarray]:
    """Sample interval (n_steps + 1, R) and fraction in it of every row of the driven table.

    Rows 0-3: the stage times of step n (a step is 1/substeps or samples_per_step sample
    intervals); rows 4…: the sample times inside a multi-sample step (frames n·s + j).
    A stage time on an interval's end stays in that interval (fraction 1), as in
    :func:`bemore.model.stages.interpolate`.
    """
    n_steps = (F - 1) * substeps // samples_per_step
    n = np.arange(n_steps + 1)
    start = n * samples_per_step
    i0 = start // substeps
    frac0 = (start - i0 * substeps) / substeps
    length = samples_per_step / substeps  # sample intervals per step
    position = np.concatenate([frac0[:, None] + STAGE_TIMES[None, :] * length,
                               np.arange(1, samples_per_step)[None, :] + 0 * frac0[:, None]],
                              axis=1)
    shift = np.maximum(np.ceil(position) - 1, 0).astype(np.int64)
    interval = i0[:, None] + shift
    fraction = position - shift
    over = np.maximum(interval - (F - 2), 0)
    return interval - over, fraction + over


@dataclass(frozen=True)
class _Rows:
    """Row ``r`` of the steps ``steps``, each in the sample interval starting at ``start``
    (slices where evenly spaced, else index arrays), with one set of Hermite weights: per
    derivative (value, rate, acceleration), its nonzero (knot, weight) terms in knot order."""

    r: int
    steps: slice | np.ndarray
    start: slice | np.ndarray
    terms: tuple[tuple[tuple[int, float], ...], ...]


@dataclass(frozen=True)
class _Step:
    """Rows ``rows`` (m,) of step ``n``, each in the sample interval starting at ``start`` (m,),
    with its Hermite weights (m, 3, 6): all six terms of every row (a few values)."""

    n: int
    rows: np.ndarray
    start: np.ndarray
    weights: np.ndarray


@functools.lru_cache(maxsize=16)
def _grid(F: int, substeps: int, samples_per_step: int, dt: float
          ) -> tuple[tuple[int, int], list[_Rows], list[_Step]]:
    """The table's (steps, rows), its rows grouped by Hermite weights and the steps whose rows
    are computed together (:class:`_Step`), memoised: an optimiser evaluates many motions on
    one time grid."""
    interval, fraction = table_rows(F, substeps, samples_per_step)
    # One set of weights per distinct fraction: a handful (the grid is periodic), and the same
    # bits as computing them for every row (checked on the grids of identify and synthesis).
    unique, which = np.unique(fraction, return_inverse=True)
    which = which.reshape(fraction.shape)
    weights = np.stack(hermite_bases(unique, dt), axis=1)  # (distinct fractions, 3, 6)
    groups, alone = [], {}
    for r in range(interval.shape[1]):
        for u in np.unique(which[:, r]):
            steps = np.flatnonzero(which[:, r] == u)
            if len(steps) == 1:
                # A one-step group (the last step's rows, past the end of the samples) costs as
                # many numpy calls as a group of a thousand: its rows go together (_Step).
                alone.setdefault(int(steps[0]), []).append(r)
                continue
            terms = tuple(tuple((k, float(weights[u, d, k])) for k in range(6)
                                if weights[u, d, k] != 0.0) for d in range(3))
            groups.append(_Rows(r, _span(steps), _span(interval[steps, r]), terms))
    together = [_Step(n, np.array(rs), interval[n, rs], weights[which[n, rs]])
                for n, rs in sorted(alone.items())]
    return interval.shape, groups, together


@dataclass(frozen=True)
class _Plan:
    """What a table's slots ask for, worked out once per (tree, slots)."""

    derivatives: tuple[int, ...]  # 0 value, 1 rate, 2 acceleration: those computed
    stores: tuple[tuple[np.ndarray, np.ndarray], ...]  # per derivative: slots, coordinates
    const: np.ndarray  # (frames, 1, 1) rad: the constant part of each angle sum needed
    sum_terms: tuple[tuple[int, object], ...]  # (j, +1.0 / −1.0 / coefficients (frames, 1, 1))
    angle_stores: tuple[tuple[np.ndarray, np.ndarray, object], ...]  # slots, frames, cos/sin


_plans: dict[tuple[int, tuple], tuple[Tree, _Plan]] = {}


def _plan(tree: Tree, slots: tuple[tuple[str, int], ...]) -> _Plan:
    """The :class:`_Plan` of ``slots`` on ``tree`` (memoised per tree object)."""
    known = _plans.get((id(tree), slots))
    if known is not None and known[0] is tree:
        return known[1]
    kind = np.array([_KIND[k] for k, _ in slots], dtype=np.int64)
    index = np.array([i for _, i in slots], dtype=np.int64)
    const, coef = angle_terms(tree)
    angle_slots = np.flatnonzero((kind <= 1) | (kind == 5))
    frames, position = np.unique(index[angle_slots], return_inverse=True)
    sum_terms = []
    # In j order; a coordinate no frame's sum contains is left out (x + 0·q == x), and ±1
    # coefficients are not multiplied (x + 1·q and x + (−1)·q are x + q and x − q, bit for bit).
    for j in np.flatnonzero(np.any(coef[frames] != 0.0, axis=0)):
        column = coef[frames, j]
        sign = 1.0 if np.all(column == 1.0) else -1.0 if np.all(column == -1.0) else None
        sum_terms.append((int(j), sign if sign is not None else column[:, None, None]))
    stores = tuple((np.flatnonzero(kind == d + 2), index[kind == d + 2]) for d in range(3))
    derivatives = tuple(d for d in range(3) if stores[d][0].size or (d == 0 and frames.size))
    angle_stores = tuple(
        (angle_slots[kind[angle_slots] == c], position[kind[angle_slots] == c], function)
        for c, function in ((0, np.cos), (1, np.sin), (5, None)) if np.any(kind == c))
    plan = _Plan(derivatives, stores, const[frames][:, None, None], tuple(sum_terms),
                 angle_stores)
    if len(_plans) >= 16:
        _plans.pop(next(iter(_plans)))
    _plans[(id(tree), slots)] = (tree, plan)
    return plan


def _fill(q, qd, qdd, dt, grid: tuple, plan: _Plan, D) -> None:
    """D[n, r, slot, b] from samples q, qd, qdd (nd, F, B) every ``dt`` s, group by group,
    each cut into blocks of about TILE values (nd, steps, B) so that a block's passes run in
    the cache."""
    nd, F, B = q.shape
    n_max = max(1, min(TILE // max(nd * B, 1), D.shape[0]))
    shape, n_frames = (nd, n_max, B), len(plan.const)
    rate_lo, rate_hi, acc_lo, acc_hi, value, term, sums, sum_term, rate, acc = _workspace(
        [shape] * 6 + [(n_frames, n_max, B)] * 2 + [(nd, F, B) if q.size <= TILE else (0,)] * 2)
    if rate.size:  # a small table: the scaled samples once, not per block
        np.multiply(qd, dt, out=rate)
        np.multiply(qdd, dt * dt, out=acc)
    for rows, steps, lo, hi, n in _blocks(grid, n_max):
        # The knots q_i, dt·q̇_i, dt²·q̈_i, dt²·q̈_i+1, dt·q̇_i+1, q_i+1 (nd, n, B).
        if rate.size:
            knots = (q[:, lo], rate[:, lo], acc[:, lo], acc[:, hi], rate[:, hi], q[:, hi])
        else:
            np.multiply(qd[:, lo], dt, out=rate_lo[:, :n])
            np.multiply(qd[:, hi], dt, out=rate_hi[:, :n])
            np.multiply(qdd[:, lo], dt * dt, out=acc_lo[:, :n])
            np.multiply(qdd[:, hi], dt * dt, out=acc_hi[:, :n])
            knots = (q[:, lo], rate_lo[:, :n], acc_lo[:, :n], acc_hi[:, :n], rate_hi[:, :n],
                     q[:, hi])
        block = D[steps, rows.r]  # (n, slots, B); a view unless the steps are scattered
        for d in plan.derivatives:
            out = value[:, :n]
            _hermite(rows.terms[d], knots, out, term[:, :n])
            _store(block, *plan.stores[d], out)
            if d == 0 and n_frames:
                _angle_sums(out, plan, sums[:, :n], sum_term[:, :n])
                for slots, frames, function in plan.angle_stores:
                    _store(block, slots, frames, sums[:, :n], function)
        if not isinstance(steps, slice):
            D[steps, rows.r] = block
    for step in _grid(*grid)[2]:
        _fill_step(q, qd, qdd, dt, step, plan, D)


def _fill_step(q, qd, qdd, dt, step: _Step, plan: _Plan, D) -> None:
    """The rows of one step together: (nd, m, B) arrays, per-row weights, all six terms."""
    lo, hi = step.start, step.start + 1
    knots = (q[:, lo], dt * qd[:, lo], (dt * dt) * qdd[:, lo], (dt * dt) * qdd[:, hi],
             dt * qd[:, hi], q[:, hi])  # (nd, m, B)
    for d in plan.derivatives:
        w = step.weights[:, d, :, None]  # (m, 6, 1)
        out = w[:, 0] * knots[0]
        for k in range(1, 6):
            out += w[:, k] * knots[k]
        for slot, j in zip(*plan.stores[d], strict=True):
            D[step.n, step.rows, slot] = out[j]
        if d == 0 and len(plan.const):
            sums = np.empty((len(plan.const), *out.shape[1:]))
            _angle_sums(out, plan, sums, np.empty_like(sums))
            for slots, frames, function in plan.angle_stores:
                for slot, frame in zip(slots, frames, strict=True):
                    value = sums[frame] if function is None else function(sums[frame])
                    D[step.n, step.rows, slot] = value


def _hermite(terms: tuple[tuple[int, float], ...], knots: tuple, out, term) -> None:
    """out = Σ weight·knots[k] over the nonzero ``terms`` (k, weight), left to right.

    Leaving out the zero terms (at a row on a sample, fraction 0 or 1 of its interval, one term
    is left) changes no number: x + (±0) == x (only an exact zero's sign may differ from the
    full sum); a weight of 1 is not multiplied (1·x is x).
    """
    if not terms:
        out[...] = 0.0
        return
    for i, (k, w) in enumerate(terms):
        if i == 0:
            if w == 1.0:
                out[...] = knots[k]
            else:
                np.multiply(knots[k], w, out=out)
        elif w == 1.0:
            out += knots[k]
        else:
            np.multiply(knots[k], w, out=term)
            out += term


def _angle_sums(values, plan: _Plan, out, term) -> None:
    """out[f] = const[f] + Σ_j coef[f, j]·values[j] (rad) for the plan's frames, in j order
    (values (nd, n, B), out (frames, n, B))."""
    out[...] = plan.const
    for j, factor in plan.sum_terms:
        if isinstance(factor, float):
            if factor > 0:
                out += values[j]
            else:
                out -= values[j]
        else:
            np.multiply(values[j], factor, out=term)
            out += term


def _store(block, slots, picks, source, function=None) -> None:
    """block[:, slots[i]] = function(source[picks[i]]) (no function: the values themselves);
    blocks of few values in one gathered call, larger ones slot by slot (views, no copy)."""
    if not slots.size:
        return
    n, B = source.shape[1:]
    if n * B <= GATHER and slots.size > 1:
        part = source[picks]
        if function is not None:
            function(part, out=part)
        block[:, slots] = part.transpose(1, 0, 2)
        return
    if function is None and _consecutive(slots) and _consecutive(picks):
        # Consecutive slots of consecutive values (a per-member table's accelerations, rates,
        # angle sums): one copy, each step's slots written in one run (slot by slot, every
        # step's row is revisited once per slot: 10–15 % more time for the copies' tables).
        block[:, slots[0]:slots[-1] + 1] = source[picks[0]:picks[-1] + 1].transpose(1, 0, 2)
        return
    for slot, pick in zip(slots, picks, strict=True):
        if function is None:
            block[:, slot] = source[pick]
        else:
            function(source[pick], out=block[:, slot])


def _consecutive(indices: np.ndarray) -> bool:
    """Whether ``indices`` are at least two consecutive increasing integers."""
    return indices.size > 1 and bool(np.all(np.diff(indices) == 1))


_scratch = threading.local()


def _workspace(shapes: list[tuple[int, ...]], name: str = "blocks") -> list[np.ndarray]:
    """Arrays of ``shapes`` carved from the scratch buffer ``name``, kept per thread between
    calls: fresh memory costs a page fault per 4 kB at first touch (≈ 0.5 ms per MB measured
    on the 2-core VM), more than the arithmetic done in it."""
    sizes = [math.prod(shape) for shape in shapes]
    buffer = getattr(_scratch, name, None)
    if buffer is None or buffer.size < sum(sizes):
        buffer = np.empty(sum(sizes))
        setattr(_scratch, name, buffer)
    offsets = np.cumsum([0, *sizes])
    return [buffer[offsets[i]:offsets[i + 1]].reshape(shape) for i, shape in enumerate(shapes)]


@functools.lru_cache(maxsize=16)
def _blocks(grid: tuple, size: int) -> list[tuple]:
    """(group, steps, interval starts, next samples, number of steps) of every group of the
    grid (F, substeps, samples_per_step, dt) cut into blocks of at most ``size`` steps."""
    shape, groups, _ = _grid(*grid)
    out = []
    for rows in groups:
        n = _count(rows.steps, shape[0])
        for a in range(0, n, size):
            start = _part(rows.start, a, a + size)
            steps = _part(rows.steps, a, a + size)
            out.append((rows, steps, start, _shift(start), _count(steps, shape[0])))
    return out


def _span(indices: np.ndarray) -> slice | np.ndarray:
    """``indices`` as a slice when evenly spaced and increasing (a view instead of a gather)."""
    step = int(indices[1] - indices[0]) if indices.size > 1 else 1
    if step > 0 and np.all(np.diff(indices) == step):
        return slice(int(indices[0]), int(indices[-1]) + 1, step)
    return indices


def _shift(index: slice | np.ndarray) -> slice | np.ndarray:
    """The next sample of every sample of ``index``."""
    if isinstance(index, slice):
        return slice(index.start + 1, index.stop + 1, index.step)
    return index + 1


def _part(index: slice | np.ndarray, a: int, b: int) -> slice | np.ndarray:
    """Elements a..b of a slice (as a slice) or of an index array."""
    if isinstance(index, slice):
        part = range(index.start, index.stop, index.step)[a:b]
        return slice(part.start, part.stop, part.step)
    return index[a:b]


def _count(steps: slice | np.ndarray, n_steps: int) -> int:
    """Number of steps in ``steps``."""
    return len(range(n_steps)[steps]) if isinstance(steps, slice) else len(steps)
