"""Sampled series with the standard library only: the bench side installs without numpy.

A series is a sequence of numbers (``array('d')`` of floats or ``array('q')`` of integers as
this package returns them; lists, or numpy arrays a caller passes, work the same). The
functions here define the numerical operations the bench side shares — linear interpolation
and percentiles exactly as numpy's ``interp`` and default ``percentile`` compute them (same
formulas, same rounding), so that plans and timing figures do not depend on which one ran.
``numpy.asarray`` turns any returned array into a numpy array without copying.
"""

from __future__ import annotations

import math
from array import array
from bisect import bisect_right
from collections.abc import Iterable, Sequence
from itertools import islice, repeat
from operator import mul, sub, truediv

# Series up to this many samples (200 s at 1 kHz) may be remembered by their contents between
# calls (the feasible window checks a hundred plans that share most of their columns).
REMEMBERED_SAMPLES = 200_000


def floats(values: Iterable[float]) -> array:
    """``values`` as an ``array('d')`` (float64)."""
    return values if isinstance(values, array) and values.typecode == "d" else array(
        "d", values if isinstance(values, list) else list(values))


def ints(values: Iterable[int]) -> array:
    """``values`` as an ``array('q')`` (int64)."""
    return values if isinstance(values, array) and values.typecode == "q" else array(
        "q", values if isinstance(values, list) else list(values))


def interp(x: Iterable[float], xp: Sequence[float], fp: Sequence[float]) -> array:
    """Linear interpolation of the points (``xp``, ``fp``) at each (finite) value of ``x``, as
    ``numpy.interp``: ``xp`` increasing; outside it the end values are held; at a sample point
    its value; in between ``slope·(x − xp[j]) + fp[j]`` with ``slope = (fp[j+1] − fp[j]) /
    (xp[j+1] − xp[j])``. Units: those of ``fp``."""
    x, xp, fp = _float_list(x), _float_list(xp), _float_list(fp)
    low, high = xp[0], xp[-1]
    if x and (min(x) < low or max(x) > high):
        x = [low if value < low else high if value > high else value for value in x]
    # k = bisect_right(xp, v) ∈ 1..n for low ≤ v ≤ high: xp[k-1] ≤ v < xp[k] (k = n at high).
    # Indexed by k: the segment's start, its value and its slope (0 past the last point).
    starts, values = [math.nan, *xp], [math.nan, *fp]
    slopes = [math.nan, *map(truediv, differences(fp), differences(xp)), 0.0]
    out = [slopes[k] * (v - starts[k]) + values[k]
           for k, v in zip(map(bisect_right, repeat(xp), x), x, strict=True)]
    if any(map(math.isnan, out)):  # a non-finite slope: numpy's own case analysis
        out = [_interp_one(v, xp, fp) if math.isnan(y) else y
               for v, y in zip(x, out, strict=True)]
    return array("d", out)


def _interp_one(v: float, xp: list[float], fp: list[float]) -> float:
    """One value of :func:`interp`, case by case as numpy's C code (``low ≤ v ≤ high``)."""
    j = bisect_right(xp, v) - 1
    if j == len(xp) - 1 or xp[j] == v:
        return fp[j]
    slope = (fp[j + 1] - fp[j]) / (xp[j + 1] - xp[j])
    result = slope * (v - xp[j]) + fp[j]
    if math.isnan(result):  # from the other end, then a flat segment
        result = slope * (v - xp[j + 1]) + fp[j + 1]
        if math.isnan(result) and fp[j] == fp[j + 1]:
            result = fp[j]
    return result


def scaled(values: Iterable[float], factor: float) -> array:
    """``value · factor`` for each of ``values`` (an ``array('d')``)."""
    return array("d", list(map(mul, values, repeat(factor))))


def differences(values: Sequence[float]) -> array:
    """``values[i + 1] − values[i]`` for each consecutive pair (an ``array('d')``, one
    shorter than ``values``)."""
    return array("d", list(map(sub, islice(values, 1, None), values)))


def _float_list(values: Iterable[float]) -> list[float]:
    """``values`` as a list of Python floats (``tolist`` of an array when it has one)."""
    to_list = getattr(values, "tolist", None)
    values = to_list() if to_list is not None else list(values)
    return values if not values or type(values[0]) is float else [float(v) for v in values]


def percentile(values: Iterable[float], q: float) -> float:
    """The ``q``-th percentile (0 ≤ q ≤ 100) of ``values``, as numpy's default ``percentile``
    (method "linear"): with the n values sorted as v₀ ≤ … ≤ vₙ₋₁ and h = (n − 1)·q/100, it is
    v⌊h⌋ + (h − ⌊h⌋)·(v⌊h⌋₊₁ − v⌊h⌋) (computed from the upper neighbour when the fraction is
    ≥ 0.5, as numpy does). Units: those of ``values``. Raises ValueError when empty."""
    ordered = sorted(values)
    if not ordered:
        raise ValueError("percentile of no values")
    if not 0.0 <= q <= 100.0:
        raise ValueError(f"percentile {q}: must be within 0..100")
    index = (len(ordered) - 1) * (q / 100)
    below = math.floor(index)
    if below >= len(ordered) - 1:
        return float(ordered[-1])
    a, b = float(ordered[below]), float(ordered[below + 1])
    fraction = index - below
    if fraction >= 0.5:
        return b - (b - a) * (1 - fraction)
    return a + (b - a) * fraction
