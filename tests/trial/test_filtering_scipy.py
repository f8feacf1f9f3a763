"""The numpy Butterworth filter and splines of bemore.trial.filtering against scipy (the oracle).

bemore reimplements them so that `bemore identify` does not import scipy.signal and
scipy.interpolate (≈ 3 s of start-up, docs/identify.md); they must give scipy's numbers.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy.interpolate import CubicSpline, make_interp_spline
from scipy.signal import butter, sosfiltfilt

from bemore.errors import DataError
from bemore.trial import filtering, gaps, pipeline
from bemore.trial.filtering import (
    butterworth_sos,
    forward_backward,
    low_pass,
    spline_derivatives,
)
from bemore.trial.gaps import cubic_through, fill_gaps
from bemore.trial.readers import read_markers

SAMPLE = pipeline.Path(__file__).resolve().parents[2] / "data" / "sample_trial.c3d"


def _relative(a: np.ndarray, b: np.ndarray) -> float:
    """Largest difference relative to the largest magnitude of the oracle ``b``."""
    return float(np.nanmax(np.abs(a - b)) / np.nanmax(np.abs(b)))


@pytest.mark.parametrize("order", range(1, 9))
def test_butterworth_sections_are_scipys(order):
    for wn in (0.005, 0.06, 0.12, 0.3, 0.5, 0.8, 0.95):
        ours, theirs = butterworth_sos(order, wn), butter(order, wn, btype="low", output="sos")
        assert ours.shape == theirs.shape == ((order + 1) // 2, 6)
        np.testing.assert_allclose(ours, theirs, rtol=1e-12, atol=1e-300)


def _real_positions(real_c3d) -> np.ndarray:
    """(F, C) the real file's markers (m) without gaps, flattened."""
    markers = read_markers(real_c3d)
    flat = markers.positions.reshape(len(markers.t), -1)
    return flat[:, ~np.isnan(flat).any(axis=0)]


@pytest.mark.parametrize("order, wn", [(4, 0.12), (2, 0.04), (3, 0.3), (6, 0.5)])
def test_forward_backward_is_sosfiltfilt_on_real_markers(real_c3d, order, wn):
    flat = _real_positions(real_c3d)
    assert flat.shape[0] == 580 and flat.shape[1] == 114
    sos = butter(order, wn, output="sos")
    expected = sosfiltfilt(sos, flat, axis=0, padlen=0)
    assert _relative(forward_backward(butterworth_sos(order, wn), flat), expected) <= 1e-10


@pytest.mark.parametrize("frames", [1, 2, 3, 7])
def test_forward_backward_on_short_signals(frames):
    x = np.random.default_rng(frames).normal(size=(frames, 3, 2))
    sos = butter(4, 0.12, output="sos")
    expected = sosfiltfilt(sos, x, axis=0, padlen=0)
    np.testing.assert_allclose(forward_backward(sos, x), expected, rtol=1e-10, atol=1e-12)


def test_nan_spreads_as_in_scipy():
    x = np.cumsum(np.random.default_rng(2).normal(size=(80, 4)), axis=0)
    x[40, 1] = np.nan  # a gap the pipeline did not fill (an unused marker)
    sos = butter(4, 0.12, output="sos")
    expected = sosfiltfilt(sos, x, axis=0, padlen=0)
    ours = forward_backward(sos, x)
    np.testing.assert_array_equal(np.isnan(ours), np.isnan(expected))
    assert np.isnan(ours[:, 1]).all() and not np.isnan(ours[:, [0, 2, 3]]).any()
    assert _relative(ours[:, [0, 2, 3]], expected[:, [0, 2, 3]]) <= 1e-10


def _scipy_low_pass(monkeypatch):
    """Make bemore's low_pass use scipy's design and filter (the reference implementation)."""
    monkeypatch.setattr(filtering, "butterworth_sos",
                        lambda order, wn: butter(order, wn, btype="low", output="sos"))
    monkeypatch.setattr(filtering, "forward_backward",
                        lambda sos, x: sosfiltfilt(sos, x, axis=0, padlen=0))


def test_low_pass_with_its_padding_is_scipys(real_c3d, monkeypatch):
    flat = _real_positions(real_c3d)
    ours = low_pass(flat, 100.0, 6.0, 4)
    _scipy_low_pass(monkeypatch)
    assert _relative(ours, low_pass(flat, 100.0, 6.0, 4)) <= 1e-10


@pytest.mark.parametrize("degree", [3, 5])
def test_spline_derivatives_are_make_interp_splines(real_c3d, degree):
    flat = _real_positions(real_c3d)[:200]
    t = np.arange(200) / 100.0
    t_new = np.arange(1991) / 1000.0
    spline = make_interp_spline(t, flat, k=degree, axis=0)
    ours = spline_derivatives(t, flat, t_new, degree)
    for nu, values in enumerate(ours):
        assert _relative(values, spline.derivative(nu)(t_new) if nu else spline(t_new)) <= 1e-10


def test_spline_on_uneven_times_and_at_the_ends():
    rng = np.random.default_rng(3)
    t = np.cumsum(rng.uniform(0.005, 0.02, 40))
    y = rng.normal(size=(40, 2, 3))
    t_new = np.r_[t[0], np.linspace(t[0], t[-1], 57), t[-1]]
    spline = make_interp_spline(t, y, k=5, axis=0)
    ours = spline_derivatives(t, y, t_new)
    for nu, values in enumerate(ours):
        assert values.shape == (59, 2, 3)
        assert _relative(values, spline.derivative(nu)(t_new)) <= 1e-10
    np.testing.assert_allclose(ours[0][[0, -1]], y[[0, -1]], atol=1e-12)  # interpolates


def test_spline_too_few_or_missing_samples_are_data_errors():
    with pytest.raises(DataError, match="5 samples are too few for a degree-5 spline"):
        spline_derivatives(np.arange(5.0), np.zeros((5, 2)), np.arange(3.0))
    y = np.zeros((8, 2))
    y[4, 1] = np.nan
    with pytest.raises(DataError, match="missing"):
        spline_derivatives(np.arange(8.0), y, np.arange(3.0))


@pytest.mark.parametrize("count", [2, 3, 4, 5, 30])
def test_cubic_through_is_cubic_spline(count):
    rng = np.random.default_rng(count)
    x = np.sort(rng.uniform(0.0, 1.0, count))
    y = rng.normal(size=(count, 3))
    x_new = np.linspace(x[0], x[-1], 23)
    expected = CubicSpline(x, y, axis=0)(x_new)
    assert _relative(cubic_through(x, y, x_new), expected) <= 1e-10


def test_fill_gaps_on_a_real_marker(real_c3d):
    markers = read_markers(real_c3d)
    missing = np.isnan(markers.positions).any(axis=2)
    index = int(np.argmax([missing[1:-1, m].any() and not missing[[0, -1], m].any()
                           for m in range(missing.shape[1])]))
    trajectory = markers.positions[:, index]
    assert np.isnan(trajectory).any()
    filled, found = fill_gaps(markers.t, trajectory, markers.labels[index], 1.0, "real")
    assert found and not np.isnan(filled).any()
    valid = ~np.isnan(trajectory).any(axis=1)
    expected = CubicSpline(markers.t[valid], trajectory[valid], axis=0)(markers.t[~valid])
    assert _relative(filled[~valid], expected) <= 1e-10
    np.testing.assert_array_equal(filled[valid], trajectory[valid])


def test_prepared_sample_trial_is_unchanged(monkeypatch):
    """The whole preparation of the sample file with scipy's filter and splines patched in (the
    reference implementations) gives the same trial to 1e-10 relative."""
    ours = pipeline.prepare_trial(SAMPLE)
    _scipy_low_pass(monkeypatch)

    def scipy_derivatives(t, samples, t_new, degree=5):
        spline = make_interp_spline(t, samples, k=degree, axis=0)
        return spline(t_new), spline.derivative(1)(t_new), spline.derivative(2)(t_new)

    monkeypatch.setattr(pipeline, "spline_derivatives", scipy_derivatives)
    monkeypatch.setattr(gaps, "cubic_through",
                        lambda x, y, x_new: CubicSpline(x, y, axis=0)(x_new))
    theirs = pipeline.prepare_trial(SAMPLE)
    assert ours.t.shape == (1601,)
    for name in ("points", "driven_q", "driven_qd", "driven_qdd", "free_seen", "free_q0",
                 "free_qd0", "plane_origin", "plane_axes"):
        assert _relative(getattr(ours, name), getattr(theirs, name)) <= 1e-10, name
    assert ours.notes == theirs.notes
