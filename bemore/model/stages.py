"""Driven state at every stage time of every integration step, precomputed once per trial.

Between samples the driven coordinates follow the quintic Hermite interpolant of (q, q̇, q̈).
:func:`stage_arrays` gives the reference kernel's full arrays (one shared motion);
:func:`driven_table` gives the generated kernels' table of only the values their code reads
(``Program.slots``), for one shared motion or one motion per member. Units SI (m, rad, s).
"""

from __future__ import annotations

import functools
import threading
from dataclasses import dataclass

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
        bases = _bases((o + STAGE_TIMES) / substeps, dt)
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


@dataclass(frozen=True)
class _Rows:
    """Table rows that share their Hermite weights: row ``r`` of the steps ``steps``, each in
    the sample interval starting at ``start`` (slices where contiguous, else index arrays)."""

    r: int
    steps: slice | np.ndarray
    start: slice | np.ndarray
    weights: np.ndarray  # (3, 6): value, rate, acceleration on the six knots


def _span(indices: np.ndarray) -> slice | np.ndarray:
    """``indices`` as a slice when they are evenly spaced and increasing (a view instead of a
    gather)."""
    step = int(indices[1] - indices[0]) if indices.size > 1 else 1
    if step > 0 and np.all(np.diff(indices) == step):
        return slice(int(indices[0]), int(indices[-1]) + 1, step)
    return indices


def _shift(index: slice | np.ndarray) -> slice | np.ndarray:
    """The next sample of every sample of ``index``."""
    if isinstance(index, slice):
        return slice(index.start + 1, index.stop + 1, index.step)
    return index + 1


def _row_groups(interval: np.ndarray, weights: np.ndarray) -> list[_Rows]:
    """Rows of equal weights, per row r: a row's time sits at the same fraction of its sample
    interval at almost every step, so each group is a few scalar weights on a block of steps."""
    groups = []
    for r in range(interval.shape[1]):
        flat = weights[:, r].reshape(len(weights), -1)
        _, inverse = np.unique(flat, axis=0, return_inverse=True)
        inverse = inverse.reshape(-1)
        for g in np.unique(inverse):
            steps = np.flatnonzero(inverse == g)
            groups.append(_Rows(r, _span(steps), _span(interval[steps, r]),
                                weights[steps[0], r]))
    return groups


def _hermite(weights: np.ndarray, knots: tuple, out: np.ndarray, term: np.ndarray) -> None:
    """out = Σ_k weights[k]·knots[k], summed left to right (scalar weights, arrays of knots).

    Terms of weight 0 are left out and weights of 1 not multiplied: at a row on a sample
    (fraction 0 or 1 of its interval, a quarter to a half of all rows) that leaves one copy.
    Equal numbers: x + (±0) == x and 1·x is x; only the sign of an exact zero may differ.
    """
    terms = [(w, knot) for w, knot in zip(weights, knots, strict=True) if w != 0.0]
    if not terms:
        out[...] = 0.0
        return
    w, knot = terms[0]
    if w == 1.0:
        out[...] = knot
    else:
        np.multiply(knot, w, out=out)
    for w, knot in terms[1:]:
        if w == 1.0:
            out += knot
        else:
            np.multiply(knot, w, out=term)
            out += term


def _fill_table(q, qd, qdd, dt, groups, kind, index, const, coef, D) -> None:
    """D[n, r, slot, b] from samples q, qd, qdd (nd, F, B) (members innermost).

    ``groups`` (:func:`_row_groups`): row r of step n is a time in the sample interval
    starting at sample i with Hermite weights (3, 6) of value/rate/acceleration on the knots
    q_i, dt·q̇_i, dt²·q̈_i, dt²·q̈_i+1, dt·q̇_i+1, q_i+1 (dt the sample interval, s). kind per
    slot: 0 cos, 1 sin, 5 value of angle ``index`` (const + coef @ q, rad); 2 q, 3 q̇, 4 q̈ of
    driven coordinate ``index``.

    Elementwise numpy only, every sum in a fixed order (no matmul/einsum, which may reorder or
    block sums by array size): a member's values do not depend on the batch size, so a
    per-member table holds bitwise the members' own tables. Each group of rows is a few numpy
    calls per block of (nd, steps, B) values, whatever the number of members.
    """
    nd, B = q.shape[0], q.shape[2]
    angle_slots = np.flatnonzero((kind <= 1) | (kind == 5))
    frames, position = np.unique(index[angle_slots], return_inverse=True)
    # The angle sums' coordinates, in j order; a coordinate no frame uses is left out (adding
    # 0·q changes no number: x + ±0 == x).
    used = np.flatnonzero(np.any(coef[frames] != 0.0, axis=0))
    by_kind = {c: np.flatnonzero(kind == c) for c in range(6)}
    derivatives = [d for d in (0, 1, 2) if by_kind[d + 2].size or (d == 0 and frames.size)]
    # Steps per block: about TILE values per (nd, steps, B) array, so that a block's passes
    # run in the cache.
    n_max = max(1, min(TILE // max(nd * B, 1), D.shape[0]))
    shape = (nd, n_max, B)
    rate_lo, rate_hi, acc_lo, acc_hi, value, term, angle, trig = _workspace(
        [shape] * 6 + [(len(frames), n_max, B)] * 2)
    for rows, steps, lo in _blocks(groups, D.shape[0], n_max):
        hi = _shift(lo)
        n = _count(steps, D.shape[0])
        # The knots q_i, dt·q̇_i, dt²·q̈_i, dt²·q̈_i+1, dt·q̇_i+1, q_i+1 (nd, n, B) of the block.
        np.multiply(qd[:, lo], dt, out=rate_lo[:, :n])
        np.multiply(qd[:, hi], dt, out=rate_hi[:, :n])
        np.multiply(qdd[:, lo], dt * dt, out=acc_lo[:, :n])
        np.multiply(qdd[:, hi], dt * dt, out=acc_hi[:, :n])
        knots = (q[:, lo], rate_lo[:, :n], acc_lo[:, :n], acc_hi[:, :n], rate_hi[:, :n],
                 q[:, hi])
        block = D[steps, rows.r]  # (n, slots, B); a view unless the steps are scattered
        for d in derivatives:
            out = value[:, :n]
            _hermite(rows.weights[d], knots, out, term[:, :n])
            _store(block, by_kind[d + 2], out, index[by_kind[d + 2]])
            if d == 0 and frames.size:
                sums = angle[:, :n]
                _angle_sums(out, const[frames], coef[frames], used, sums, trig[:, :n])
                for c, function in ((0, np.cos), (1, np.sin), (5, None)):
                    chosen = kind[angle_slots] == c
                    _store(block, angle_slots[chosen], sums, position[chosen], function)
        if not isinstance(steps, slice):
            D[steps, rows.r] = block


def _angle_sums(values, const, coef, used, out, term) -> None:
    """out[k] = const[k] + Σ_j coef[k, j]·values[j] (rad) over the coordinates ``used``, in
    j order (values (nd, n, B), out (frames, n, B)); a coefficient of ±1 is not multiplied."""
    out[...] = const[:, None, None]
    for j in used:
        if np.all(coef[:, j] == 1.0):
            out += values[j]
        elif np.all(coef[:, j] == -1.0):  # x + (−1)·q is x − q, bit for bit
            out -= values[j]
        else:
            np.multiply(values[j], coef[:, j, None, None], out=term)
            out += term


def _store(block, slots, source, picks, function=None) -> None:
    """block[:, slots[i]] = function(source[picks[i]]) (no function: the values); blocks of
    few values in one gathered call, larger ones slot by slot (views, no gathered copy)."""
    if not slots.size:
        return
    n, B = source.shape[1:]
    if n * B <= GATHER:
        part = source[picks]
        if function is not None:
            function(part, out=part)
        block[:, slots] = part.transpose(1, 0, 2)
        return
    for slot, pick in zip(slots, picks, strict=True):
        if function is None:
            block[:, slot] = source[pick]
        else:
            function(source[pick], out=block[:, slot])


TILE = 65536  # values per (nd, steps, members) block: 512 kB, measured best of 16k/64k/256k
GATHER = 4096  # up to this many values per slot, slots are stored together (fewer calls)
_scratch = threading.local()


def _workspace(shapes: list[tuple[int, ...]], name: str = "blocks") -> list[np.ndarray]:
    """Arrays of ``shapes`` carved from the scratch buffer ``name``, kept per thread between
    calls: fresh memory costs a page fault per 4 kB at first touch (≈ 0.5 ms per MB measured
    on the 2-core VM), more than the arithmetic done in it."""
    sizes = [int(np.prod(shape)) for shape in shapes]
    buffer = getattr(_scratch, name, None)
    if buffer is None or buffer.size < sum(sizes):
        buffer = np.empty(sum(sizes))
        setattr(_scratch, name, buffer)
    offsets = np.cumsum([0, *sizes])
    return [buffer[offsets[i]:offsets[i + 1]].reshape(shape) for i, shape in enumerate(shapes)]


def _blocks(groups: list[_Rows], n_steps: int, size: int):
    """(group, steps, interval starts) of every group cut into blocks of at most ``size``
    steps."""
    for rows in groups:
        n = _count(rows.steps, n_steps)
        for a in range(0, n, size):
            yield rows, _part(rows.steps, a, a + size), _part(rows.start, a, a + size)


def _part(index: slice | np.ndarray, a: int, b: int) -> slice | np.ndarray:
    """Elements a..b of a slice (as a slice) or of an index array."""
    if isinstance(index, slice):
        part = range(index.start, index.stop, index.step)[a:b]
        return slice(part.start, part.stop, part.step)
    return index[a:b]


def _count(steps: slice | np.ndarray, n_steps: int) -> int:
    """Number of steps in ``steps``."""
    return len(range(n_steps)[steps]) if isinstance(steps, slice) else len(steps)

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
    position = np.concatenate([frac0[:, None] + STAGE_TIMES[None, :] * length,
                               np.arange(1, samples_per_step)[None, :] + 0 * frac0[:, None]],
                              axis=1)
    shift = np.maximum(np.ceil(position) - 1, 0).astype(np.int64)
    interval = i0[:, None] + shift
    fraction = position - shift
    over = np.maximum(interval - (F - 2), 0)
    return interval - over, fraction + over


@functools.lru_cache(maxsize=8)
def _rows_and_weights(F: int, substeps: int, samples_per_step: int, dt: float
                      ) -> tuple[tuple[int, int], list[_Rows]]:
    """The table's (steps, rows) and its rows grouped by Hermite weights, memoised: an
    optimiser evaluates many motions on one time grid."""
    interval, fraction = table_rows(F, substeps, samples_per_step)
    return interval.shape, _row_groups(interval, np.stack(_bases(fraction, dt), axis=2))


_KIND = {"cd": 0, "sd": 1, "qd": 2, "vd": 3, "ad": 4, "an": 5}


def driven_table(tree: Tree, slots: tuple[tuple[str, int], ...], q, qd, qdd, dt: float,
                 substeps: int, samples_per_step: int = 1) -> np.ndarray:
    """The generated kernels' driven table D (rows: see :func:`table_rows`).

    q, qd, qdd: (F, n_driven) for one shared motion → D (n_steps + 1, R, n_slots); or
    (B, F, n_driven), one motion per member → D (n_steps + 1, R, n_slots, B).
    """
    per_member = q.ndim == 3
    # (n_driven, F, members): a coordinate's samples are one contiguous (F, members) block.
    inputs = [a.transpose(2, 1, 0) if per_member else a.T[..., None] for a in (q, qd, qdd)]
    arrays = _workspace([a.shape for a in inputs], "samples")
    for array, given in zip(arrays, inputs, strict=True):
        array[...] = given
    shape, groups = _rows_and_weights(arrays[0].shape[1], substeps, samples_per_step, dt)
    const, coef = angle_terms(tree)
    kind = np.array([_KIND[k] for k, _ in slots], dtype=np.int64)
    index = np.array([i for _, i in slots], dtype=np.int64)
    D = np.empty((*shape, len(slots), arrays[0].shape[2]))
    _fill_table(*arrays, dt, groups, kind, index, const, coef, D)
    return D if per_member else np.ascontiguousarray(D[..., 0])
