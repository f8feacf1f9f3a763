"""The driven-value table (``table.driven_table``, numpy only): exact on quintic motions, and a
member's columns bitwise independent of the batch they are computed in."""

from __future__ import annotations

import numpy as np
import pytest
from numpy.polynomial import polynomial

from bemore.model.generated import angle_terms
from bemore.model.profiles import clear_hip_circle_profile
from bemore.model.table import driven_table

# ROS34PW2's stage times (Rang & Angermann 2005): 0, 2γ, α31 + α32, 1 (fractions of a step).
STAGES = (0.0, 0.87173304301691801, 0.84457060015369423 - 0.11299064236484185, 1.0)


def _all_slots(model, angles: str) -> tuple[tuple[str, int], ...]:
    """Every kind of slot: the angle sums of every frame (``angles``: "cd"/"sd" or "an") and
    the driven q, q̇, q̈ of every coordinate."""
    frames = range(len(model.tree.frame_parent))
    kinds = ("cd", "sd") if angles == "cd" else ("an",)
    return (tuple((kind, k) for kind in kinds for k in frames)
            + tuple((kind, j) for kind in ("qd", "vd", "ad") for j in range(model.n_driven)))


def _row_times(n_steps: int, substeps: int, spp: int, dt: float) -> np.ndarray:
    """Time (s) of every row (n_steps + 1, R): the four stage times of each step, then the
    samples inside a multi-sample step (written from the definition, not the code)."""
    step = spp / substeps  # sample intervals per step
    n = np.arange(n_steps + 1)[:, None]
    stages = (n + np.array(STAGES)[None, :]) * step
    inside = n * spp + np.arange(1, spp)[None, :]
    return np.concatenate([stages, inside], axis=1) * dt


@pytest.mark.parametrize(("substeps", "spp"), [(1, 1), (2, 1), (1, 2)])
def test_table_reproduces_a_quintic_motion_exactly(real, substeps, spp):
    """The quintic Hermite interpolant of (q, q̇, q̈) IS a quintic polynomial: every row's
    values must be the polynomial's at the row's time (the last step's rows lie past the end,
    extrapolated by the last interval's polynomial: still the same polynomial)."""
    rng = np.random.default_rng(3)
    dt, F = 1e-3, 201
    t = np.arange(F) * dt
    coefficients = rng.uniform(-1.0, 1.0, (real.n_driven, 6)) * np.array(
        [1.0, 5.0, 20.0, 50.0, 200.0, 500.0])  # rad, rad/s … over 0.2 s
    derivative = [[polynomial.polyder(c, m) for c in coefficients] for m in (0, 1, 2)]
    samples = [np.stack([polynomial.polyval(t, c) for c in d], axis=1) for d in derivative]
    slots = _all_slots(real, "cd")
    D = driven_table(real.tree, slots, *samples, dt, substeps, spp)
    times = _row_times((F - 1) * substeps // spp, substeps, spp, dt)
    assert D.shape == (*times.shape, len(slots))
    expected = [np.stack([polynomial.polyval(times, c) for c in d], axis=-1)
                for d in derivative]
    const, coef = angle_terms(real.tree)
    angle = const + expected[0] @ coef.T
    for s, (kind, i) in enumerate(slots):
        if kind in ("cd", "sd"):
            value = (np.cos if kind == "cd" else np.sin)(angle[..., i])
        else:
            value = expected[("qd", "vd", "ad").index(kind)][..., i]
        # Rounding only (the last step's rows, extrapolated up to 2 intervals past the end,
        # amplify it most): a wrong weight, row time or knot is off by 1e-4 or more.
        tolerance = {"ad": 1e-6, "vd": 1e-9}.get(kind, 1e-12) * max(1.0, np.abs(value).max())
        np.testing.assert_allclose(D[:, :, s], value, rtol=0, atol=tolerance,
                                   err_msg=f"{kind} {i}")
    # A demanding motion: accelerations over 50 rad/s², angles over 2 rad.
    assert np.abs(expected[2]).max() > 50.0 and np.abs(angle).max() > 2.0


def _bits(values: np.ndarray) -> np.ndarray:
    """The bit patterns of float64 values (−0.0 and +0.0 differ)."""
    return np.ascontiguousarray(values).view(np.int64)


@pytest.mark.parametrize(("substeps", "spp"), [(1, 1), (2, 1), (1, 2)])
def test_member_columns_are_bitwise_each_members_own_table(real, substeps, spp):
    """64 members, each its own motion: member b's column equals the table of member b's
    motion alone, and the columns of 3 members computed together, to the last bit."""
    base = clear_hip_circle_profile(0.3)
    rng = np.random.default_rng(7)
    B = 64
    scale = 1.0 + 0.2 * rng.standard_normal((B, 1, 1))
    offset = 0.1 * rng.standard_normal((B, 1, real.n_driven))
    q, qd, qdd = base.q * scale + offset, base.qd * scale, base.qdd * scale
    for angles in ("an", "cd"):
        slots = _all_slots(real, angles)
        batch = driven_table(real.tree, slots, q, qd, qdd, base.dt, substeps, spp)
        assert batch.shape[-1] == B
        for b in (0, 1, 37, 63):
            alone = driven_table(real.tree, slots, q[b], qd[b], qdd[b], base.dt, substeps, spp)
            assert np.array_equal(_bits(batch[..., b]), _bits(alone)), (angles, b)
        three = driven_table(real.tree, slots, q[5:8], qd[5:8], qdd[5:8], base.dt, substeps,
                             spp)
        assert np.array_equal(_bits(batch[..., 5:8]), _bits(three)), angles
        # Different motions really give different columns.
        assert np.abs(batch[..., 0] - batch[..., 1]).max() > 1e-3
