"""The filter and the spline evaluated for many columns at once give each column's numbers bit
for bit: the trial chain's copies (bemore.trial.realisations) are the chain however many run
together, and the low-pass as matrices is the low-pass."""

from __future__ import annotations

import numpy as np
import pytest

from bemore.trial.filtering import (
    EVALUATE_BLOCK,
    evaluate_spline,
    interpolating_spline,
    low_pass,
    low_pass_matrices,
)

FILTERS = [(6.0, 0.9), (3.0, 1.2), (4.0, 1.2), (6.0, 1.2)]  # (cutoff Hz, edge cycles)


@pytest.mark.parametrize("frames", [45, 161])
def test_low_pass_matrices_are_the_low_pass_of_the_identity(frames) -> None:
    matrices = low_pass_matrices(frames, 100.0, FILTERS, 4)
    for (cutoff, edges), matrix in zip(FILTERS, matrices, strict=True):
        alone = low_pass(np.eye(frames), 100.0, cutoff, 4, edge_cycles=edges)
        assert np.array_equal(matrix, alone), (cutoff, edges)
    # Applied to samples, a matrix is the filter (the filter is linear; sums reordered).
    samples = np.random.default_rng(3).normal(size=(frames, 5))
    for (cutoff, edges), matrix in zip(FILTERS, matrices, strict=True):
        direct = low_pass(samples, 100.0, cutoff, 4, edge_cycles=edges)
        assert np.abs(matrix @ samples - direct).max() < 1e-12 * np.abs(direct).max()


def test_low_pass_matrices_refuse_what_the_low_pass_refuses() -> None:
    from bemore.errors import DataError

    with pytest.raises(DataError, match="below the Nyquist"):
        low_pass_matrices(161, 100.0, [(6.0, 0.9), (60.0, 0.9)], 4)
    with pytest.raises(DataError, match="too few"):
        low_pass_matrices(10, 100.0, [(3.0, 1.2)], 4)


@pytest.mark.parametrize("nu", [0, 1, 2])
def test_a_splines_value_at_a_point_does_not_depend_on_the_others_evaluated(nu) -> None:
    """evaluate_spline runs EVALUATE_BLOCK points at a time: a point's number is the same
    whatever block it falls in, so the blocks change nothing."""
    rng = np.random.default_rng(7)
    x = np.arange(161) / 100.0
    samples = np.cumsum(rng.normal(size=(161, 3, 40)), axis=0)
    knots, coefficients = interpolating_spline(x, samples, 5)
    x_new = np.arange(1601) / 1000.0
    together = evaluate_spline(knots, coefficients, 5, x_new, nu)
    assert together.shape == (1601, 3, 40)
    for piece in [slice(0, 1), slice(5, 42), slice(EVALUATE_BLOCK - 3, 3 * EVALUATE_BLOCK + 1),
                  slice(1590, 1601)]:
        alone = evaluate_spline(knots, coefficients, 5, x_new[piece], nu)
        assert np.array_equal(together[piece], alone), piece
    if nu == 0:  # and the spline goes through its samples
        assert np.abs(together[::10] - samples).max() < 1e-9 * np.abs(samples).max()
