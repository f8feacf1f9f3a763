"""Zero-lag low-pass filtering and resampling of trajectories."""

from __future__ import annotations

import numpy as np
from scipy.interpolate import make_interp_spline
from scipy.signal import butter, sosfiltfilt

from bemore.errors import DataError


def low_pass(
    samples: np.ndarray,
    rate_hz: float,
    cutoff_hz: float,
    order: int,
    source: str = "trial",
    edge_cycles: float = 0.9,
    setting: str = "[filter] cutoff_hz",
) -> np.ndarray:
    """Zero-lag Butterworth low-pass along axis 0 (forward-backward, so the gain is squared).

    ``samples`` (F, ...) at ``rate_hz``; ``cutoff_hz`` is the −3 dB frequency of one pass.
    The ends are padded by extrapolating least-squares quadratics fitted to the first and last
    ``edge_cycles / cutoff_hz`` seconds (0.15 s at 6 Hz), so that a trial starting or ending
    mid-swing shows no edge transient. The end values are then those fits' (white noise σ:
    0.67σ at the ends with 15 samples, 0.33σ inside at 6 Hz, 100 Hz; docs/trials.md): a longer
    fit is quieter at the ends but only if the signal stays quadratic over it.
    Raises DataError naming ``setting`` if the cutoff is not below Nyquist, or if the trial is
    too short.
    """
    nyquist = rate_hz / 2.0
    if not 0 < cutoff_hz < nyquist:
        raise DataError(
            f"{source}: filter cutoff {cutoff_hz:g} Hz must be below the Nyquist frequency "
            f"{nyquist:g} Hz ({setting})"
        )
    n_fit = max(5, round(edge_cycles * rate_hz / cutoff_hz))
    if samples.shape[0] < n_fit:
        raise DataError(
            f"{source}: {samples.shape[0]} frames are too few to filter at {cutoff_hz:g} Hz "
            f"(need at least {n_fit}: edge_cycles = {edge_cycles:g})"
        )
    n_pad = max(10, round(3.0 * rate_hz / cutoff_hz))  # three time constants of the filter
    sos = butter(order, cutoff_hz / nyquist, btype="low", output="sos")
    padded = np.concatenate(
        [_extrapolate(samples[:n_fit][::-1], n_pad)[::-1], samples,
         _extrapolate(samples[-n_fit:], n_pad)],
        axis=0,
    )
    return sosfiltfilt(sos, padded, axis=0, padlen=0)[n_pad:-n_pad]


def _extrapolate(window: np.ndarray, count: int) -> np.ndarray:
    """``count`` samples continuing ``window`` (W, ...) by its least-squares quadratic."""
    k = np.arange(window.shape[0], dtype=float)
    basis = np.stack([np.ones_like(k), k, k * k], axis=1)
    flat = window.reshape(window.shape[0], -1)
    coefficients, *_ = np.linalg.lstsq(basis, flat, rcond=None)
    ahead = np.arange(window.shape[0], window.shape[0] + count, dtype=float)
    future = np.stack([np.ones_like(ahead), ahead, ahead * ahead], axis=1) @ coefficients
    return future.reshape((count, *window.shape[1:]))


def start_value_and_rate(
    t: np.ndarray, samples: np.ndarray, window_s: float, degree: int = 2
) -> tuple[np.ndarray, np.ndarray]:
    """Value and rate at ``t[0]`` of ``samples`` (F, ...) from a least-squares polynomial of
    ``degree`` fitted over ``t ≤ t[0] + window_s`` (at least degree + 3 samples); units of
    samples and per s."""
    count = max(degree + 3, int(np.searchsorted(t, t[0] + window_s + 1e-9)))
    if count > len(t):
        raise DataError(f"trial: {len(t)} frames are too few to fit the initial state")
    dt = t[:count] - t[0]
    basis = np.vander(dt, degree + 1, increasing=True)
    flat = samples[:count].reshape(count, -1)
    coefficients, *_ = np.linalg.lstsq(basis, flat, rcond=None)
    shape = samples.shape[1:]
    return coefficients[0].reshape(shape), coefficients[1].reshape(shape)


def uniform_times(duration_s: float, rate_hz: float) -> np.ndarray:
    """Times 0, 1/rate, … up to ``duration_s`` (s), computed as integers over the rate."""
    count = int(np.floor(duration_s * rate_hz + 1e-9)) + 1
    return np.arange(count) / rate_hz


def spline_derivatives(
    t: np.ndarray, samples: np.ndarray, t_new: np.ndarray, degree: int = 5
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Value, first and second time derivatives of ``samples`` (F, ...) at ``t_new`` (s).

    An interpolating spline of ``degree`` (quintic by default, so that accelerations are
    smooth) through the samples; units are those of ``samples`` per s and per s².
    """
    spline = make_interp_spline(t, samples, k=degree, axis=0)
    return spline(t_new), spline.derivative(1)(t_new), spline.derivative(2)(t_new)
