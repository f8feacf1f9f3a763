"""Gaps (missing samples, NaN) in marker trajectories: find them, fill the short ones."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from bemore.errors import DataError
from bemore.trial.filtering import evaluate_spline, interpolating_spline


@dataclass(frozen=True)
class Gap:
    """One run of missing samples of one marker.

    Attributes:
        marker: label; start_s, end_s: times of the first and last missing samples (s);
        frames: number of missing frames.
    """

    marker: str
    start_s: float
    end_s: float
    frames: int

    def describe(self) -> str:
        """``"R_ELBOW 0.120–0.180 s (7 frames)"``."""
        return f"{self.marker} {self.start_s:.3f}–{self.end_s:.3f} s ({self.frames} frames)"


def find_runs(missing: np.ndarray) -> list[tuple[int, int]]:
    """(first, last) indices of every run of True in a 1-D boolean array."""
    padded = np.concatenate([[False], missing, [False]])
    edges = np.flatnonzero(np.diff(padded.astype(np.int8)))
    return [(int(a), int(b) - 1) for a, b in zip(edges[::2], edges[1::2], strict=True)]


def find_gaps(t: np.ndarray, positions: np.ndarray, labels: tuple[str, ...]) -> list[Gap]:
    """Every gap of every marker, from (F,) times (s) and (F, M, 3) positions (m)."""
    missing = np.isnan(positions).any(axis=2)
    gaps = []
    for m, label in enumerate(labels):
        for first, last in find_runs(missing[:, m]):
            gaps.append(Gap(label, float(t[first]), float(t[last]), last - first + 1))
    return gaps


def fill_gaps(
    t: np.ndarray, trajectory: np.ndarray, label: str, max_gap_s: float, source: str
) -> tuple[np.ndarray, list[Gap]]:
    """Fill the gaps of one (F, 3) trajectory (m) by a cubic spline through its valid samples.

    A gap is filled when the time between the valid samples around it is at most
    ``max_gap_s + 1/rate`` (i.e. the gap itself lasts at most ``max_gap_s``); a longer gap, or one
    touching the start or end of the trial, raises DataError naming the marker and time range.
    Returns the filled copy and the gaps filled.
    """
    missing = np.isnan(trajectory).any(axis=1)
    if not missing.any():
        return trajectory, []
    step = float(np.median(np.diff(t)))
    filled_gaps = []
    for first, last in find_runs(missing):
        gap = Gap(label, float(t[first]), float(t[last]), last - first + 1)
        if first == 0 or last == len(t) - 1:
            where = "start" if first == 0 else "end"
            raise DataError(
                f"{source}: marker {gap.describe()} missing at the {where} of the trial; "
                "it cannot be interpolated: trim the trial ([trim] in trial.toml)"
            )
        if gap.frames * step > max_gap_s + 1e-9:
            raise DataError(
                f"{source}: marker {gap.describe()} is missing for longer than the "
                f"{max_gap_s:g} s that can be filled ([gaps] max_gap_s)"
            )
        filled_gaps.append(gap)
    valid = ~missing
    filled = trajectory.copy()
    filled[missing] = cubic_through(t[valid], trajectory[valid], t[missing])
    return filled, filled_gaps


def cubic_through(x: np.ndarray, samples: np.ndarray, x_new: np.ndarray) -> np.ndarray:
    """Values at ``x_new`` of scipy's ``CubicSpline(x, samples)`` (not-a-knot), units of
    ``samples`` (N, ...): the cubic spline for N ≥ 4, the interpolating polynomial of degree
    N − 1 for 2 or 3 samples (what not-a-knot reduces to)."""
    if len(x) >= 4:
        knots, coefficients = interpolating_spline(x, samples, 3)
        return evaluate_spline(knots, coefficients, 3, x_new)
    flat = samples.reshape(len(x), -1)
    # Lagrange form of the polynomial through the 2 or 3 samples.
    weights = np.ones((len(x_new), len(x)))
    for i in range(len(x)):
        for j in range(len(x)):
            if i != j:
                weights[:, i] *= (x_new - x[j]) / (x[i] - x[j])
    return (weights @ flat).reshape((len(x_new), *samples.shape[1:]))
